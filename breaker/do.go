package breaker

import (
	"context"
	"errors"
)

// policy classifies a request's error: the WithOutcomeOf option.
type policy struct {
	outcomeOf func(error) Outcome
}

// outcome returns the outcome of a request that returned err.
func (p policy) outcome(err error) Outcome { return outcomeOf(err, p.outcomeOf) }

// outcomeOf classifies a request's error by f, or, when f is nil, takes a
// nil error as a success and any other as a failure.
func outcomeOf(err error, f func(error) Outcome) Outcome {
	if f != nil {
		return f(err)
	}
	if err == nil {
		return Success
	}
	return Failure
}

// Do runs req if the breaker allows it, and counts its outcome (see
// [WithOutcomeOf]). A blocked request returns [ErrBlocked] without running
// req. If ctx is already done, Do returns ctx.Err() at once and counts
// nothing; a request that fails with [context.Canceled] after ctx was
// cancelled is not counted. If req panics, the panic counts as a failure and
// goes on.
func (a *SRE) Do(ctx context.Context, req func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := a.Allow()
	if err != nil {
		return err
	}
	return p.run(ctx, req, a.policy)
}

// Do runs req if the circuit allows it, and counts its outcome, as
// [SRE.Do] does. A blocked request returns [ErrBlocked], or an error that
// wraps it, without running req.
func (c *Circuit) Do(ctx context.Context, req func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := c.Allow()
	if err != nil {
		return err
	}
	return p.run(ctx, req, c.policy)
}

// run runs the request of p, allowed by a breaker of policy pol, and settles
// p with its outcome.
func (p Promise) run(ctx context.Context, req func() error, pol policy) error {
	// A panic (or runtime.Goexit) in req, or in the classifier, skips the
	// settling below: count it as a failure and let it go on unrecovered,
	// so that its stack is the original one.
	settled := false
	defer func() {
		if !settled {
			p.settle(Failure)
		}
	}()
	err := req()
	o := pol.outcome(err)
	if o == Failure && errors.Is(err, context.Canceled) && ctx.Err() == context.Canceled {
		o = Ignored // the caller gave up; the dependency did not fail
	}
	settled = true
	p.settle(o)
	return err
}
