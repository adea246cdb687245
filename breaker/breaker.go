package breaker

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/internal/blocked"
	"github.com/slidegate/slidegate/internal/config"
)

// ErrBlocked is the error of a request the breaker blocks: its circuit is
// open or its probe places are taken, or the SRE breaker blocked it at
// random. Test for it with [errors.Is]. It matches
// [github.com/slidegate/slidegate/flow.ErrBlocked], which every refusal
// of any package matches.
var ErrBlocked = blocked.Sentinel("breaker")

// errProbesBusy is the error of a request a half-open Circuit blocks
// because every probe place is taken: it wraps ErrBlocked, and says why.
var errProbesBusy = fmt.Errorf("%w: half-open, every probe place taken", ErrBlocked)

// errInvalidConfig is wrapped by every error a constructor returns for a bad
// option or strategy. The message names the option and its value.
var errInvalidConfig = config.Sentinel("breaker")

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

// A Breaker guards calls to a dependency: [SRE] and [Circuit] are
// Breakers, and so can be a type of your own (see [NewPromise]). It is what
// the guard asks of a breaker rule.
//
// [Breaker.AllowAt] and [Breaker.StatsAt] take the time, in nanoseconds on
// the breaker's clock; [Breaker.Allow] and [Breaker.Stats] read that clock.
type Breaker interface {
	// Allow reports whether a request may proceed now. If it may, settle
	// the Promise with the request's outcome, once. If not, the error is
	// [ErrBlocked] or wraps it.
	Allow() (Promise, error)
	// AllowAt is Allow at time now.
	AllowAt(now int64) (Promise, error)
	// Stats returns the breaker's state and window counts now.
	Stats() Stats
	// StatsAt returns the breaker's state and window counts at time now.
	StatsAt(now int64) Stats
}

// A Recorder is told the outcomes of the Promises of a [Breaker] of your
// own, which makes them with [NewPromise].
type Recorder interface {
	// Now returns the time on the breaker's clock, in nanoseconds.
	Now() int64
	// RecordAt is told that the request of the Promise made with token
	// ended at time now, with outcome o. It is called each time that
	// Promise is settled.
	RecordAt(token uint64, now int64, o Outcome)
}

// Stats is a breaker's state and the counts in its window, for metrics. The
// zero Stats is a closed breaker that has counted nothing.
//
// The counts are the outcomes of the requests a breaker allowed within its
// window's interval: the bucket holding now and those before it (see
// [WithWindow]). A [Circuit] counts only since it last closed; probes,
// blocked requests and ignored outcomes are not among them. They are what
// a Circuit's [Strategy] sees.
type Stats struct {
	// State is the breaker's state. An [SRE] breaker is [Open] while its
	// block ratio is above zero.
	State State
	// BlockRatio is the share of requests the breaker blocks now. For an
	// [SRE] breaker, it is the probability that it blocks a request.
	// A [Circuit]'s is 0 when closed and 1 when open. Half-open, it is the
	// share of its probe places taken (probes in flight / probes).
	BlockRatio float64
	// Requests is how many requests ended with a counted outcome:
	// Successes + Failures.
	Requests int64
	// Successes and Failures count the requests that ended with each
	// outcome.
	Successes, Failures int64
	// Slow is how many of the Requests took longer than a [SlowRatio]
	// strategy's maximum. Other strategies do not time requests, and see 0.
	Slow int64
	// ConsecutiveFailures is the run of failures that ends the window, in
	// the order the outcomes were counted. It is the failures counted after
	// the window's latest success, or all of them if it holds none. It is
	// at most Failures, and 0 after a success. An SRE breaker reports 0.
	ConsecutiveFailures int64
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
// outcome, once, with [Promise.Done]. A Promise is a small value: issuing
// and settling one allocates nothing. The zero Promise, which Allow returns
// with an error, ignores every call.
//
// Settling a copy a second time counts the request twice. A [Circuit]
// releases a probe's place only once.
type Promise struct {
	// A Promise is four words, the most the compiler keeps in registers:
	// larger, it is copied through memory on every return, which costs
	// more than the rest of allowing a request.
	rec   any    // *sreRecorder, *circuitRecorder, or a Recorder of a Breaker of one's own
	start int64  // a Circuit's: when the request was allowed, if it needs it
	token uint64 // the Recorder's (see circuitToken)
}

// NewPromise returns a Promise that reports to r with token, for a
// [Breaker] of your own. token is r's to choose: [Recorder.RecordAt] is
// given it.
func NewPromise(r Recorder, token uint64) Promise { return Promise{rec: r, token: token} }

// Probe reports whether the request is a half-open [Circuit]'s probe. Its
// outcome decides whether the circuit closes. So a client should not retry
// a failed probe (see flow.AttemptProbe). Other Promises are not probes.
func (p Promise) Probe() bool {
	_, ok := p.rec.(*circuitRecorder)
	return ok && p.token&probeBit != 0
}

// Done reports the request's outcome by its error, as [SRE.Do] does: the
// outcome [WithOutcomeOf] gives it. By default a nil error is a [Success]
// and any other a [Failure]. A Promise of a Breaker of your own
// ([NewPromise]) takes errors so.
func (p Promise) Done(err error) {
	switch r := p.rec.(type) {
	case nil:
	case *sreRecorder:
		(*SRE)(r).record(r.clock.Now(), r.policy.outcome(err))
	case *circuitRecorder:
		if r.clock != nil { // not the zero Circuit
			(*Circuit)(r).record(p, r.clock.Now(), r.policy.outcome(err))
		}
	case Recorder:
		r.RecordAt(p.token, r.Now(), outcomeOf(err, nil))
	}
}

// DoneAt is Done at time now, in nanoseconds on the breaker's clock.
func (p Promise) DoneAt(now int64, err error) {
	switch r := p.rec.(type) {
	case nil:
	case *sreRecorder:
		p.recordAt(now, r.policy.outcome(err))
	case *circuitRecorder:
		p.recordAt(now, r.policy.outcome(err))
	case Recorder:
		p.recordAt(now, outcomeOf(err, nil))
	}
}

// recordAt reports outcome o at time now: DoneAt for code that has
// classified the outcome itself (the guard, through internal/breakerhook).
// An o that is not an Outcome counts nothing, and a probe's place stays
// taken until it times out.
func (p Promise) recordAt(now int64, o Outcome) {
	if o > Ignored {
		return
	}
	// The breakers of this package are called directly, not through an
	// interface, so that settling a request costs a direct call.
	switch r := p.rec.(type) {
	case nil:
	case *sreRecorder:
		(*SRE)(r).record(now, o)
	case *circuitRecorder:
		if r.clock != nil { // not the zero Circuit
			(*Circuit)(r).record(p, now, o)
		}
	case Recorder:
		r.RecordAt(p.token, now, o)
	}
}

// settle reports outcome o now, on the breaker's clock.
func (p Promise) settle(o Outcome) {
	switch r := p.rec.(type) {
	case nil:
	case *sreRecorder:
		(*SRE)(r).record(r.clock.Now(), o)
	case *circuitRecorder:
		if r.clock != nil { // not the zero Circuit
			(*Circuit)(r).record(p, r.clock.Now(), o)
		}
	case Recorder:
		r.RecordAt(p.token, r.Now(), o)
	}
}

// sreRecorder and circuitRecorder are the breakers as the holders of their
// Promises: a Promise holds the breaker itself, with no method of Recorder
// in the breaker's API.
type (
	sreRecorder     SRE
	circuitRecorder Circuit
)

var (
	_ Breaker = (*SRE)(nil)
	_ Breaker = (*Circuit)(nil)
)
