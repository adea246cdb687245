package breaker

import (
	"errors"
	"fmt"
	"time"
)

// ErrBlocked is the error of a request the breaker blocks: its circuit is
// open, or the SRE breaker blocked it at random. Test for it with
// [errors.Is], which also matches [ErrProbesBusy].
var ErrBlocked = errors.New("breaker: blocked")

// ErrProbesBusy is the error of a request a half-open [Circuit] blocks
// because every probe place is taken. errors.Is(ErrProbesBusy, ErrBlocked)
// is true.
var ErrProbesBusy = fmt.Errorf("%w: half-open, every probe place taken", ErrBlocked)

// ErrInvalidConfig is wrapped by every error a constructor returns for a bad
// option or strategy. The message names the option and its value.
var ErrInvalidConfig = errors.New("breaker: invalid configuration")

// A State is where a breaker stands. The zero State is Closed.
type State uint8

const (
	// Closed: requests are allowed and their outcomes are counted.
	Closed State = iota
	// Open: requests are blocked (a [Circuit]), or some of them are (an
	// [SRE] breaker whose block ratio is above zero).
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
	// Failure: the dependency failed, or, for [SlowRatio], the request took
	// longer than allowed.
	Failure
	// Ignored: the result says nothing about the dependency (the caller gave
	// up, say, or the error is the caller's own). It is not counted, and
	// does not break a run of failures. A probe that ends Ignored gives its
	// place back without deciding anything.
	Ignored
)

// Acceptable reports whether a request that returned err counts as a success
// (go-zero's name). A nil Acceptable leaves the decision to the breaker's
// [WithIsSuccessful], which by default takes only a nil error as a success.
type Acceptable func(err error) bool

// Fallback is called, instead of the request, with the error of a request the
// breaker blocked; its result is returned instead. A nil Fallback returns the
// breaker's error, as Do does.
type Fallback func(err error) error

// A Breaker guards calls to a dependency: [SRE] and [Circuit] are
// Breakers, and so can be a type of your own. It is what the guard asks of
// a breaker rule.
//
// [Breaker.AllowAt] and [Breaker.StatsAt] take the time, in nanoseconds on
// the breaker's clock; [Breaker.Allow] and [Breaker.Stats] read that clock.
// The go-zero family of Do methods is on the concrete types.
type Breaker interface {
	// Allow reports whether a request may proceed now. If it may, settle
	// the Promise with the request's outcome, once. If not, the error is
	// [ErrBlocked] or wraps it.
	Allow() (Promise, error)
	// AllowAt is Allow at time now.
	AllowAt(now int64) (Promise, error)
	// RetryAfterAt returns how long after time now a blocked request could
	// be allowed, or 0 if the breaker cannot tell.
	RetryAfterAt(now int64) time.Duration
	// Stats returns the breaker's state and window counts now.
	Stats() Stats
	// StatsAt returns the breaker's state and window counts at time now.
	StatsAt(now int64) Stats
}

// A Recorder is the breaker a [Promise] reports to. [SRE] and
// [Circuit] have their own. A [Breaker] of your own implements it, and
// makes its Promises with [NewPromise].
type Recorder interface {
	// Now returns the time on the breaker's clock, in nanoseconds.
	Now() int64
	// RecordAt is told that the request of p ended at time now, with
	// outcome o. It is called each time p is settled.
	RecordAt(p Promise, now int64, o Outcome)
}

// Stats is a breaker's state and the counts in its window, for metrics. The
// zero Stats is a closed breaker that has counted nothing.
type Stats struct {
	// State is the breaker's state. An [SRE] breaker is [Open] while
	// its block ratio is above zero.
	State State
	// BlockRatio is the share of requests the breaker blocks now. For an
	// [SRE] breaker, it is the probability that it blocks a request.
	// A [Circuit]'s is 0 when closed and 1 when open. Half-open, it is the
	// share of its probe places taken (probes in flight / probes).
	BlockRatio float64
	// Counts are the outcomes counted in the window (see [Counts]). For a
	// Circuit they are what its strategy sees. An SRE breaker counts
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

// A Promise stands for one request a breaker allowed. Tell it the request's
// outcome with one of its methods, once. A Promise is a small value: issuing
// and settling one allocates nothing. The zero Promise, which Allow returns
// with an error, ignores every call.
//
// Settling a copy a second time counts the request twice. A [Circuit]
// releases a probe's place only once.
type Promise struct {
	// A Promise is four words, the most the compiler keeps in registers:
	// larger, it is copied through memory on every return, which costs
	// more than the rest of allowing a request.
	rec   Recorder
	start int64  // a Circuit's: when the request was allowed, if it needs it
	token uint64 // the Recorder's (see circuitToken)
}

// NewPromise returns a Promise that reports to r, for a [Breaker] of your
// own. token is r's to choose: [Promise.Token] returns it.
func NewPromise(r Recorder, token uint64) Promise { return Promise{rec: r, token: token} }

// Token returns the token the Promise was made with (see [NewPromise]).
func (p Promise) Token() uint64 { return p.token }

// Probe reports whether the request is a half-open [Circuit]'s probe. Its
// outcome decides whether the circuit closes. So a client should not retry
// a failed probe (see flow.AttemptProbe). Other Promises are not probes.
func (p Promise) Probe() bool {
	_, ok := p.rec.(*circuitRecorder)
	return ok && p.token&probeBit != 0
}

// Succeed reports that the request succeeded.
func (p Promise) Succeed() { p.settle(Success) }

// Fail reports that the request failed.
func (p Promise) Fail() { p.settle(Failure) }

// Ignore reports that the request's outcome says nothing about the
// dependency. Nothing is counted; a probe gives its place back.
func (p Promise) Ignore() { p.settle(Ignored) }

// Done reports the request's outcome by its error, as Do does: [Ignored] if
// [WithIsExcluded] excludes it, else [Success] if [WithIsSuccessful] takes it
// as one, else [Failure]. By default only a nil error is a success. A
// Promise of your own ([NewPromise]) takes a nil error as a success, and any
// other as a failure.
func (p Promise) Done(err error) {
	if p.rec != nil {
		p.RecordAt(p.rec.Now(), p.outcome(err))
	}
}

// DoneAt is Done at time now, in nanoseconds on the breaker's clock.
func (p Promise) DoneAt(now int64, err error) {
	if p.rec != nil {
		p.RecordAt(now, p.outcome(err))
	}
}

// RecordAt reports outcome o at time now, in nanoseconds on the breaker's
// clock. It is Succeed, Fail or Ignore for code that has read the clock
// already, and for simulations. An o that is not an [Outcome] counts
// nothing, and a probe's place stays taken until it times out.
func (p Promise) RecordAt(now int64, o Outcome) {
	if o > Ignored {
		return
	}
	// The breakers of this package are called directly, not through the
	// interface, so that settling a request costs a direct call.
	switch r := p.rec.(type) {
	case nil:
	case *sreRecorder:
		(*SRE)(r).record(now, o)
	case *circuitRecorder:
		if r.clock != nil { // not the zero Circuit
			(*Circuit)(r).record(p, now, o)
		}
	default:
		r.RecordAt(p, now, o)
	}
}

// outcome classifies err as the breaker that issued p does.
func (p Promise) outcome(err error) Outcome {
	switch r := p.rec.(type) {
	case *sreRecorder:
		return r.policy.outcome(err)
	case *circuitRecorder:
		return r.policy.outcome(err)
	}
	return outcomeOf(err, nil, nil)
}

func (p Promise) settle(o Outcome) {
	switch r := p.rec.(type) {
	case nil:
	case *sreRecorder:
		(*SRE)(r).record(r.clock.Now(), o)
	case *circuitRecorder:
		if r.clock != nil { // not the zero Circuit
			(*Circuit)(r).record(p, r.clock.Now(), o)
		}
	default:
		r.RecordAt(p, r.Now(), o)
	}
}

// sreRecorder and circuitRecorder are the breakers as the Recorders of
// their Promises: a Promise holds the breaker itself, with no method of
// Recorder in the breaker's API.
type (
	sreRecorder     SRE
	circuitRecorder Circuit
)

func (r *sreRecorder) Now() int64 { return r.clock.Now() }

func (r *sreRecorder) RecordAt(p Promise, now int64, o Outcome) { p.RecordAt(now, o) }

func (r *circuitRecorder) Now() int64 {
	if r.clock == nil { // the zero Circuit
		return 0
	}
	return r.clock.Now()
}

func (r *circuitRecorder) RecordAt(p Promise, now int64, o Outcome) { p.RecordAt(now, o) }

var (
	_ Breaker = (*SRE)(nil)
	_ Breaker = (*Circuit)(nil)
)
