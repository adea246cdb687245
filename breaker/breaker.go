package breaker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrBlocked is the error of a request the breaker refuses: its circuit is open,
// or the adaptive breaker dropped it. Test for it with errors.Is, which also
// matches ErrProbesBusy.
var ErrBlocked = errors.New("breaker: open")

// ErrProbesBusy is the error of a request a half-open Circuit refuses because
// every probe place is taken. errors.Is(ErrProbesBusy, ErrOpen) is true.
var ErrProbesBusy = fmt.Errorf("%w: half-open, every probe place taken", ErrBlocked)

// ErrInvalidConfig is wrapped by every error a constructor returns for a bad
// option. The message names the option and its value.
var ErrInvalidConfig = errors.New("breaker: invalid configuration")

// A State is where a breaker stands.
type State uint8

const (
	// Closed: requests pass and their outcomes are counted.
	Closed State = iota
	// Open: requests are refused (a Circuit), or some of them are dropped
	// (an Adaptive breaker whose drop ratio is above zero).
	Open
	// HalfOpen: a Circuit lets a few probe requests through to decide
	// whether to close again.
	HalfOpen
)

var stateNames = [...]string{"closed", "open", "half-open"}

// String returns the state in words ("half-open").
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown state"
}

// An Outcome is what a request's result says about the protected dependency.
type Outcome uint8

const (
	// Success: the dependency did its job.
	Success Outcome = iota
	// Failure: the dependency failed (or, for a slow-request strategy, the
	// request took longer than allowed; see SlowRatio).
	Failure
	// Ignored: the result says nothing about the dependency (the caller gave
	// up, say, or the error is the caller's own). It is not counted, and a
	// probe that ends Ignored gives its place back without deciding anything.
	Ignored
)

// Acceptable reports whether a request that returned err counts as a success
// (go-zero's name). A nil Acceptable leaves the decision to the breaker's
// WithIsSuccessful, which by default accepts exactly err == nil.
type Acceptable func(err error) bool

// Fallback is called, instead of the request, with the error of a request the
// breaker refused; its result is returned instead.
type Fallback func(err error) error

// A Breaker guards calls to a dependency. Adaptive and Circuit are Breakers.
//
// Allow asks whether one request may proceed and returns a Promise on which
// its outcome must be reported. The Do family runs the request and reports
// for it: a request that returns an error counts as a failure unless
// Acceptable (or the breaker's WithIsSuccessful) accepts it, and one whose
// error WithIsExcluded excludes is not counted. A request that panics counts
// as a failure and the panic goes on, with its stack. The ...Ctx variants
// return ctx.Err() at once, counting nothing, when ctx is already done, and
// do not count a request that fails with context.Canceled after its own ctx
// was cancelled: the caller gave up, the dependency did not fail.
//
// A refused request gets ErrOpen (or ErrProbesBusy), or what its Fallback
// returns.
type Breaker interface {
	// Allow reports whether a request may proceed now. If it may, the
	// Promise must be told the outcome, once.
	Allow() (Promise, error)
	// AllowCtx is Allow, returning ctx.Err() at once if ctx is done.
	AllowCtx(ctx context.Context) (Promise, error)
	// AllowAt is Allow at time now, in nanoseconds on the breaker's clock.
	AllowAt(now int64) (Promise, error)

	// Do runs req if the breaker allows it and counts its outcome.
	Do(req func() error) error
	// DoCtx is Do, returning ctx.Err() at once if ctx is done.
	DoCtx(ctx context.Context, req func() error) error
	// DoWithAcceptable is Do, with acceptable deciding which errors count
	// as successes.
	DoWithAcceptable(req func() error, acceptable Acceptable) error
	// DoWithAcceptableCtx is DoWithAcceptable, returning ctx.Err() at once
	// if ctx is done.
	DoWithAcceptableCtx(ctx context.Context, req func() error, acceptable Acceptable) error
	// DoWithFallback is Do, calling fallback instead of req when refused.
	DoWithFallback(req func() error, fallback Fallback) error
	// DoWithFallbackCtx is DoWithFallback, returning ctx.Err() at once if
	// ctx is done.
	DoWithFallbackCtx(ctx context.Context, req func() error, fallback Fallback) error
	// DoWithFallbackAcceptable combines DoWithFallback and
	// DoWithAcceptable.
	DoWithFallbackAcceptable(req func() error, fallback Fallback, acceptable Acceptable) error
	// DoWithFallbackAcceptableCtx is DoWithFallbackAcceptable, returning
	// ctx.Err() at once if ctx is done.
	DoWithFallbackAcceptableCtx(ctx context.Context, req func() error, fallback Fallback, acceptable Acceptable) error

	// RetryAfterAt returns how long after time now a refused request
	// could be let through: the rest of an open Circuit's timeout; 0 when
	// the breaker cannot tell (an Adaptive breaker drops at random) or
	// would let one through now. It reads no clock.
	RetryAfterAt(now int64) time.Duration

	// State returns the breaker's state.
	State() State
	// Stats returns the breaker's state and window counts, for metrics.
	Stats() Stats
}

// Stats is a breaker's state and the counts in its window, for metrics.
type Stats struct {
	// State is the breaker's state. An Adaptive breaker is Open while its
	// drop ratio is above zero.
	State State
	// BlockRatio is the share of requests the breaker refuses now: for an
	// Adaptive breaker, the probability that it drops a request; for a
	// Circuit, 0 when closed, 1 when open, and 1 - (free probe places /
	// probes) when half-open.
	BlockRatio float64
	// Requests is how many requests finished with a counted outcome in the
	// window: Successes + Failures.
	Requests int64
	// Successes and Failures are the outcomes counted in the window.
	Successes, Failures int64
	// Slow is how many of the Requests took longer than a SlowRatio
	// strategy's maximum; 0 for other breakers.
	Slow int64
	// Blocked is how many requests the breaker refused in the window.
	Blocked int64
	// ProbesInFlight is how many probes a half-open Circuit is waiting on.
	ProbesInFlight int
	// RetryAfter is how long an open Circuit stays open before it lets a
	// probe through; 0 otherwise.
	RetryAfter time.Duration
	// Generation counts a Circuit's state changes. Outcomes of requests
	// admitted in an earlier generation are ignored.
	Generation uint64
}

// A Promise stands for one request a breaker allowed; tell it the request's
// outcome with exactly one of its methods, once. A Promise is a small value:
// issuing and settling one allocates nothing. The zero Promise (what Allow
// returns with an error) ignores every call.
//
// Settle each Promise once: settling a copy a second time counts the request
// twice, except for a Circuit's probes, whose place is released only once.
//
// A Promise is four words, the most the compiler keeps in registers: larger,
// it is copied through memory on every return, which costs more than the
// rest of allowing a request.
type Promise struct {
	by     *issuer // the breaker that issued it
	start  int64   // when the request was allowed, on the breaker's clock (a Circuit's, when it needs it)
	gen    uint64  // a Circuit's state word when the request was allowed
	ticket uint64  // a probe's ticket (see probe), or 0
}

// An issuer is the breaker a Promise reports to: one of the two is set. Each
// breaker holds its own, so that a Promise names it in one word and settling
// is a direct call.
type issuer struct {
	a *Adaptive
	c *Circuit
}

// Succeed reports that the request succeeded.
func (p Promise) Succeed() { p.settle(Success) }

// Fail reports that the request failed.
func (p Promise) Fail() { p.settle(Failure) }

// Ignore reports that the request's outcome says nothing about the
// dependency. Nothing is counted; a probe gives its place back.
func (p Promise) Ignore() { p.settle(Ignored) }

// Done reports the request's outcome by its error, as the breaker's Do does:
// excluded (WithIsExcluded), else a success if WithIsSuccessful accepts err
// (by default, if err is nil), else a failure.
func (p Promise) Done(err error) {
	switch {
	case p.by == nil:
	case p.by.c != nil:
		p.settle(p.by.c.outcome(err))
	case p.by.a != nil:
		p.settle(p.by.a.outcome(err))
	}
}

// RecordAt reports outcome o at time now, in nanoseconds on the breaker's
// clock: for code that has read the clock already, and for simulations.
func (p Promise) RecordAt(now int64, o Outcome) {
	if o > Ignored {
		return
	}
	switch {
	case p.by == nil:
	case p.by.c != nil:
		p.by.c.record(p, now, o)
	case p.by.a != nil:
		p.by.a.record(now, o)
	}
}

func (p Promise) settle(o Outcome) {
	switch {
	case p.by == nil:
	case p.by.c != nil:
		c := p.by.c
		c.record(p, c.clock.Now(), o)
	case p.by.a != nil:
		a := p.by.a
		a.record(a.clock.Now(), o)
	}
}

var (
	_ Breaker = (*Adaptive)(nil)
	_ Breaker = (*Circuit)(nil)
)
