package breaker

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/timegrid"
	"github.com/slidegate/slidegate/window"
)

// A BlockPolicy says whether an Adaptive breaker counts the requests it
// blocks itself among the requests of its block ratio. It decides how the
// breaker protects a failing dependency and how fast it lets traffic back
// when the dependency recovers; ExampleBlockPolicy measures all three. The
// zero BlockPolicy is CountBlocksWhileFailing, the default.
//
// The Google SRE book counts them ("requests" are all the requests the
// application attempted), and so does go-zero today (CountBlocks). Under
// overload that is what holds the dependency's load near K times what it
// handles: if it handles C requests per second of the R offered, the breaker
// sends about K·C. During an outage about one request per second gets
// through. The price is recovery: the breaker's own blocks keep the ratio
// up, and the share let through grows by about e per W/K (W the window) from
// about 1/(R·W), so recovery takes about (W/K)·ln(R·W): a minute for 1,000
// requests per second, a 10 s window and K = 2. That is the breaker go-zero's
// users see stay open long after an outage.
//
// Not counting them (IgnoreBlocks, what kratos users ask for), the breaker
// sees only the requests it let through: it recovers within a second or two,
// but sends about √(K·C·R) under overload (4.5 C for R = 10 C), and during an
// outage lets through a number of requests per second that grows as √R (25
// at 1,000 requests per second).
//
// CountBlocksWhileFailing, the default, counts blocked requests only while
// the window holds a failure. While the dependency fails, blocked requests
// are evidence of load and the breaker is the SRE throttle, with its
// protection under overload and its trickle during an outage; once every
// request the dependency was sent in the window succeeded, the blocks are
// the breaker's own doing, and it blocks nothing. It recovers fully one
// window after the last failure at the latest.
//
// Choose CountBlocks for a dependency that needs its load to come back
// slowly after an overload (cold caches, a queue to drain): its ramp, by e
// per W/K, is gradual, where the default lets the whole load back at once
// after a window without failures. Choose IgnoreBlocks when failures do not
// come from load (an unreachable host), recovery must be fastest, and the
// trickle of probes costs little.
type BlockPolicy uint8

const (
	// CountBlocksWhileFailing counts blocked requests as requests while the
	// window holds a failure: the SRE formula while the dependency fails,
	// and no blocks once it has not failed for a window.
	CountBlocksWhileFailing BlockPolicy = iota
	// CountBlocks counts blocked requests as requests: the SRE formula.
	CountBlocks
	// IgnoreBlocks leaves blocked requests out: only requests that reached
	// the dependency count.
	IgnoreBlocks
)

var blockPolicyNames = [...]string{"count blocks while failing", "count blocks", "ignore blocks"}

// String returns the policy in words ("count blocks").
func (p BlockPolicy) String() string {
	if int(p) < len(blockPolicyNames) {
		return blockPolicyNames[p]
	}
	return "unknown block policy"
}

// An Adaptive breaker is the Google SRE client-side throttle ("Handling
// Overload", Site Reliability Engineering, ch. 21), as go-zero builds its
// breaker: over a sliding window it counts requests and successes (the
// book's "accepts", requests the dependency handled), and blocks each new
// request with probability
//
//	max(0, (requests − protection − K·successes) / (requests + 1))
//
// so that while every request succeeds nothing is blocked, and as the
// dependency fails the breaker lets through about K requests per successful
// one. There is no state to trip: the ratio follows the window, and the
// breaker recovers as the dependency does. Whether blocked requests count
// among the requests is a BlockPolicy; by default they count while the
// window holds a failure.
//
// Whether to block is drawn from WithRandom's source. While the window holds
// no failure and no block the ratio is 0, and Allow reads neither the window
// nor the source. The ratio is read in constant time, not by walking the
// window (see window.Tally).
//
// An Adaptive breaker is safe for concurrent use. Allowing and settling a
// request allocate nothing. State is Open while the block ratio is above
// zero. The zero Adaptive is not usable; make one with NewAdaptive.
type Adaptive struct {
	calls
	policy
	self        issuer
	t           *window.Tally
	clock       clock.Clock
	interval    int64
	k           float64
	protection  int64
	minRequests int64
	blockPolicy BlockPolicy
	random      func() float64
	// lastBad is the latest time a failure (and, under CountBlocks, a
	// block) was counted, or a time a whole window before any other. A
	// window ending at least interval later holds none, and its block
	// ratio is 0.
	lastBad atomic.Int64
}

// NewAdaptive returns an Adaptive breaker. The defaults are go-zero's window
// (40 buckets over 10 s) and protection (5), K = 2 and no minimum volume;
// see the options. A bad option is an error wrapping ErrInvalidConfig.
func NewAdaptive(opts ...Option) (*Adaptive, error) {
	s, err := build(opts, settings{
		interval: 10 * time.Second, buckets: 40, k: 2, protection: 5, random: defaultRandom,
	}, adaptiveOnly, "an Adaptive breaker")
	if err != nil {
		return nil, err
	}
	if !(s.k >= 1) || !finite(s.k) {
		return nil, fmt.Errorf("%w: K = %v: must be at least 1 and finite", ErrInvalidConfig, s.k)
	}
	if s.protection < 0 {
		return nil, fmt.Errorf("%w: protection = %d: must not be negative", ErrInvalidConfig, s.protection)
	}
	if s.blockPolicy > IgnoreBlocks {
		return nil, fmt.Errorf("%w: block policy = %d: must be CountBlocksWhileFailing, CountBlocks or IgnoreBlocks", ErrInvalidConfig, s.blockPolicy)
	}
	t, err := window.NewTally(s.buckets, s.interval, window.WithClock(s.clock), window.WithEvents(window.Succeeded, window.Failed, window.Blocked))
	if err != nil {
		return nil, fmt.Errorf("%w: window: %w", ErrInvalidConfig, err)
	}
	a := &Adaptive{
		policy:      policy{s.isExcluded, s.isSuccessful},
		t:           t,
		clock:       s.clock,
		interval:    int64(s.interval),
		k:           s.k,
		protection:  s.protection,
		minRequests: s.minRequests,
		blockPolicy: s.blockPolicy,
		random:      s.random,
	}
	a.calls = calls{a}
	a.self = issuer{a: a}
	a.lastBad.Store(math.MinInt64 / 2) // times are clamped to ±2^60: no difference overflows
	return a, nil
}

// Allow reports whether a request may proceed now; if not, the error is
// ErrBlocked and the block is counted. Settle the Promise with the request's
// outcome.
func (a *Adaptive) Allow() (Promise, error) { return a.AllowAt(a.clock.Now()) }

// AllowAt is Allow at time now, in nanoseconds on the breaker's clock.
func (a *Adaptive) AllowAt(now int64) (Promise, error) {
	now = timegrid.Clamp(now)
	if now-a.lastBad.Load() < a.interval {
		if r := a.ratio(a.t.SumsAt(now)); r > 0 && a.random() < r {
			a.block(now)
			return Promise{}, ErrBlocked
		}
	}
	return Promise{by: &a.self}, nil
}

func (a *Adaptive) record(now int64, o Outcome) {
	now = timegrid.Clamp(now)
	switch o {
	case Success:
		a.t.AddAt(now, window.Succeeded, 1)
	case Failure:
		a.t.AddAt(now, window.Failed, 1)
		a.markBad(now)
	}
}

// block counts a blocked request.
func (a *Adaptive) block(now int64) {
	a.t.AddAt(now, window.Blocked, 1)
	if a.blockPolicy == CountBlocks {
		a.markBad(now)
	}
}

// markBad raises lastBad to now.
func (a *Adaptive) markBad(now int64) {
	for {
		old := a.lastBad.Load()
		if now <= old || a.lastBad.CompareAndSwap(old, now) {
			return
		}
	}
}

// ratio is the block ratio of the window totals s.
func (a *Adaptive) ratio(s window.Sums) float64 {
	successes, failures := s[window.Succeeded], s[window.Failed]
	requests := successes + failures
	if requests < a.minRequests {
		return 0
	}
	if a.blockPolicy == CountBlocks || (a.blockPolicy == CountBlocksWhileFailing && failures > 0) {
		requests += s[window.Blocked]
	}
	r := (float64(requests-a.protection) - a.k*float64(successes)) / float64(requests+1)
	return max(r, 0)
}

// BlockRatio returns the probability that the breaker blocks a request now.
func (a *Adaptive) BlockRatio() float64 { return a.BlockRatioAt(a.clock.Now()) }

// BlockRatioAt returns the probability that the breaker blocks a request at
// time now.
func (a *Adaptive) BlockRatioAt(now int64) float64 {
	now = timegrid.Clamp(now)
	if now-a.lastBad.Load() >= a.interval {
		return 0
	}
	return a.ratio(a.t.SumsAt(now))
}

// State returns Open while the breaker blocks requests (its block ratio is
// above zero), else Closed.
func (a *Adaptive) State() State { return a.StateAt(a.clock.Now()) }

// StateAt returns the breaker's state at time now: Open while its block
// ratio is above zero, else Closed.
func (a *Adaptive) StateAt(now int64) State {
	if a.BlockRatioAt(now) > 0 {
		return Open
	}
	return Closed
}

// Stats returns the breaker's state, block ratio and window counts now.
func (a *Adaptive) Stats() Stats { return a.StatsAt(a.clock.Now()) }

// StatsAt returns the breaker's state, block ratio and window counts at time
// now. Counts.Slow and Counts.ConsecutiveFailures are 0: an Adaptive breaker
// counts neither.
func (a *Adaptive) StatsAt(now int64) Stats {
	now = timegrid.Clamp(now)
	w := a.t.SumsAt(now)
	succ, fail := w[window.Succeeded], w[window.Failed]
	s := Stats{
		Counts:     Counts{Requests: succ + fail, Successes: succ, Failures: fail},
		Blocked:    w[window.Blocked],
		BlockRatio: a.ratio(w),
	}
	if s.BlockRatio > 0 {
		s.State = Open
	}
	return s
}

// RetryAfterAt returns 0: an Adaptive breaker blocks requests at random, and
// the next may be allowed at once.
func (a *Adaptive) RetryAfterAt(int64) time.Duration { return 0 }
