package breaker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrBlocked is the error of a request the breaker blocks: its circuit is
// open, or the adaptive breaker blocked it at random. Test for it with
// errors.Is, which also matches ErrProbesBusy.
var ErrBlocked = errors.New("breaker: blocked")

// ErrProbesBusy is the error of a request a half-open Circuit blocks because
// every probe place is taken. errors.Is(ErrProbesBusy, ErrBlocked) is true.
var ErrProbesBusy = fmt.Errorf("%w: half-open, every probe place taken", ErrBlocked)

// ErrInvalidConfig is wrapped by every error a constructor returns for a bad
// option or strategy. The message names the option and its value.
var ErrInvalidConfig = errors.New("breaker: invalid configuration")

// A State is where a breaker stands. The zero State is Closed.
type State uint8

const (
	// Closed: requests are allowed and their outcomes are counted.
	Closed State = iota
	// Open: requests are blocked (a Circuit), or some of them are (an
	// Adaptive breaker whose block ratio is above zero).
	Open
	// HalfOpen: a Circuit allows a few probe requests to decide whether to
	// close again.
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
// The zero Outcome is Success.
type Outcome uint8

const (
	// Success: the dependency did its job.
	Success Outcome = iota
	// Failure: the dependency failed (or, for a slow-request strategy, the
	// request took longer than allowed; see SlowRatio).
	Failure
	// Ignored: the result says nothing about the dependency (the caller gave
	// up, say, or the error is the caller's own). It is not counted, does
	// not break a run of failures, and a probe that ends Ignored gives its
	// place back without deciding anything.
	Ignored
)

// Acceptable reports whether a request that returned err counts as a success
// (go-zero's name). A nil Acceptable leaves the decision to the breaker's
// WithIsSuccessful, which by default takes exactly err == nil as a success.
type Acceptable func(err error) bool

// Fallback is called, instead of the request, with the error of a request the
// breaker blocked; its result is returned instead. A nil Fallback returns the
// breaker's error, as Do does.
type Fallback func(err error) error

// A Breaker guards calls to a dependency. Adaptive and Circuit are Breakers.
//
// Allow asks whether one request may proceed and returns a Promise on which
// its outcome must be reported. The Do family runs the request and reports
// for it: a request that returns an error counts as a failure unless
// Acceptable (or the breaker's WithIsSuccessful) takes it as a success, and
// one whose error WithIsExcluded excludes is not counted. A request that
// panics counts as a failure and the panic goes on, with its stack. The
// ...Ctx variants return ctx.Err() at once, counting nothing, when ctx is
// already done, and do not count a request that fails with context.Canceled
// after its own ctx was cancelled: the caller gave up, the dependency did not
// fail.
//
// A blocked request gets ErrBlocked (or ErrProbesBusy), or what its Fallback
// returns.
//
// Every method that reads the clock has an ...At twin that takes the time
// instead, in nanoseconds on the breaker's clock (see WithClock): AllowAt,
// StateAt, StatsAt, and Promise.RecordAt and DoneAt for settling. The Do
// family and AllowCtx have none: the Do family times a request that really
// runs, and code that has the time already checks its context and calls
// AllowAt.
type Breaker interface {
	// Allow reports whether a request may proceed now. If it may, the
	// Promise must be told the outcome, once.
	Allow() (Promise, error)
	// AllowCtx is Allow, returning ctx.Err() at once if ctx is done.
	AllowCtx(ctx context.Context) (Promise, error)
	// AllowAt is Allow at time now.
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
	// DoWithFallback is Do, calling fallback instead of req when blocked.
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

	// RetryAfterAt returns how long after time now a blocked request
	// could be allowed: the rest of an open Circuit's timeout; 0 when the
	// breaker cannot tell (an Adaptive breaker blocks at random) or would
	// allow one now. It reads no clock.
	RetryAfterAt(now int64) time.Duration

	// State returns the breaker's state now.
	State() State
	// StateAt returns the breaker's state at time now.
	StateAt(now int64) State
	// Stats returns the breaker's state and window counts now, for metrics.
	Stats() Stats
	// StatsAt returns the breaker's state and window counts at time now.
	StatsAt(now int64) Stats
}

// Stats is a breaker's state and the counts in its window, for metrics. The
// zero Stats is a closed breaker that has counted nothing.
type Stats struct {
	// State is the breaker's state. An Adaptive breaker is Open while its
	// block ratio is above zero.
	State State
	// BlockRatio is the share of requests the breaker blocks now: for an
	// Adaptive breaker, the probability that it blocks a request; for a
	// Circuit, 0 when closed, 1 when open, and the share of its probe
	// places taken (probes in flight / probes) when half-open.
	BlockRatio float64
	// Counts are the outcomes counted in the window (see Counts). For a
	// Circuit they are what its strategy sees; an Adaptive breaker counts
	// no slow requests and no runs of failures, and reports 0 for those.
	Counts
	// Blocked is how many requests the breaker blocked in the window (for a
	// Circuit, since it last closed).
	Blocked int64
	// ProbesInFlight is how many probes a half-open Circuit is waiting on.
	ProbesInFlight int
	// RetryAfter is how long an open Circuit stays open before it lets a
	// probe through; 0 otherwise.
	RetryAfter time.Duration
	// Generation counts a Circuit's state changes. Outcomes of requests
	// allowed in an earlier generation are ignored.
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

// Probe reports whether the request is one of a half-open Circuit's
// probes, whose outcome decides whether the circuit closes. A client should
// not retry a failed probe: its failure is the breaker's answer (see
// flow.AttemptProbe). The zero Promise and an Adaptive breaker's are not
// probes.
func (p Promise) Probe() bool { return p.ticket != 0 }

// Succeed reports that the request succeeded.
func (p Promise) Succeed() { p.settle(Success) }

// Fail reports that the request failed.
func (p Promise) Fail() { p.settle(Failure) }

// Ignore reports that the request's outcome says nothing about the
// dependency. Nothing is counted; a probe gives its place back.
func (p Promise) Ignore() { p.settle(Ignored) }

// Done reports the request's outcome by its error, as the breaker's Do does:
// excluded (WithIsExcluded), else a success if WithIsSuccessful takes err as
// one (by default, if err is nil), else a failure.
func (p Promise) Done(err error) {
	switch {
	case p.by == nil:
	case p.by.c != nil:
		p.settle(p.by.c.outcome(err))
	case p.by.a != nil:
		p.settle(p.by.a.outcome(err))
	}
}

// DoneAt is Done at time now, in nanoseconds on the breaker's clock.
func (p Promise) DoneAt(now int64, err error) {
	switch {
	case p.by == nil:
	case p.by.c != nil:
		p.RecordAt(now, p.by.c.outcome(err))
	case p.by.a != nil:
		p.RecordAt(now, p.by.a.outcome(err))
	}
}

// RecordAt reports outcome o at time now, in nanoseconds on the breaker's
// clock: Succeed, Fail or Ignore for code that has read the clock already,
// and for simulations. An o that is not an Outcome counts nothing, and a
// probe's place stays taken until it times out.
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
