package breaker

import (
	"context"
	"errors"
)

// policy classifies a request's error: the WithIsExcluded and WithIsSuccessful
// options.
type policy struct {
	isExcluded   func(error) bool
	isSuccessful func(error) bool
}

// classify returns the outcome of a request that returned err: excluded,
// else a success if acceptable (or, when acceptable is nil, isSuccessful)
// takes it as one, else a failure.
func (p policy) classify(err error, acceptable Acceptable) Outcome {
	ok := p.isSuccessful
	if acceptable != nil {
		ok = acceptable
	}
	return outcomeOf(err, p.isExcluded, ok)
}

func (p policy) outcome(err error) Outcome { return p.classify(err, nil) }

// allower is a breaker as the Do family sees it.
type allower interface {
	Allow() (Promise, error)
	classify(err error, acceptable Acceptable) Outcome
}

// calls gives a breaker the Do family, built on its Allow. Both breakers embed
// it, pointing it at themselves.
type calls struct{ b allower }

// Do runs req if the breaker allows it, and counts its outcome. A nil error
// is a success, or one that [WithIsSuccessful] takes as one. A blocked
// request returns [ErrBlocked] without running req. If req panics, the panic
// counts as a failure and goes on.
func (c *calls) Do(req func() error) error { return c.run(context.Background(), req, nil, nil) }

// DoCtx is Do, returning ctx.Err() at once if ctx is already done, without
// running req or counting anything. A request that fails with
// [context.Canceled] after ctx was cancelled is not counted.
func (c *calls) DoCtx(ctx context.Context, req func() error) error { return c.run(ctx, req, nil, nil) }

// DoWithAcceptable is Do, with acceptable deciding which errors count as
// successes.
func (c *calls) DoWithAcceptable(req func() error, acceptable Acceptable) error {
	return c.run(context.Background(), req, nil, acceptable)
}

// DoWithAcceptableCtx is DoWithAcceptable, with DoCtx's handling of ctx.
func (c *calls) DoWithAcceptableCtx(ctx context.Context, req func() error, acceptable Acceptable) error {
	return c.run(ctx, req, nil, acceptable)
}

// DoWithFallback is Do, calling fallback with the block's error instead of
// running req when the breaker blocks it, and returning what fallback
// returns.
func (c *calls) DoWithFallback(req func() error, fallback Fallback) error {
	return c.run(context.Background(), req, fallback, nil)
}

// DoWithFallbackCtx is DoWithFallback, with DoCtx's handling of ctx.
func (c *calls) DoWithFallbackCtx(ctx context.Context, req func() error, fallback Fallback) error {
	return c.run(ctx, req, fallback, nil)
}

// DoWithFallbackAcceptable combines DoWithFallback and DoWithAcceptable.
func (c *calls) DoWithFallbackAcceptable(req func() error, fallback Fallback, acceptable Acceptable) error {
	return c.run(context.Background(), req, fallback, acceptable)
}

// DoWithFallbackAcceptableCtx is DoWithFallbackAcceptable, with DoCtx's
// handling of ctx.
func (c *calls) DoWithFallbackAcceptableCtx(ctx context.Context, req func() error, fallback Fallback, acceptable Acceptable) error {
	return c.run(ctx, req, fallback, acceptable)
}

// AllowCtx is Allow, returning ctx.Err() at once, and counting nothing, if
// ctx is already done.
func (c *calls) AllowCtx(ctx context.Context) (Promise, error) {
	if err := ctx.Err(); err != nil {
		return Promise{}, err
	}
	return c.b.Allow()
}

// run is the Do family. The variants without a context pass Background.
func (c *calls) run(ctx context.Context, req func() error, fallback Fallback, acceptable Acceptable) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := c.b.Allow()
	if err != nil {
		if fallback != nil {
			return fallback(err)
		}
		return err
	}
	// A panic (or runtime.Goexit) in req, or in acceptable, skips the
	// settling below: count it as a failure and let it go on unrecovered,
	// so that its stack is the original one.
	settled := false
	defer func() {
		if !settled {
			p.settle(Failure)
		}
	}()
	err = req()
	o := c.b.classify(err, acceptable)
	if o == Failure && errors.Is(err, context.Canceled) && ctx.Err() == context.Canceled {
		o = Ignored // the caller gave up; the dependency did not fail
	}
	settled = true
	p.settle(o)
	return err
}
