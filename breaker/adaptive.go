package breaker

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/window"
)

// A BlockPolicy says whether an Adaptive breaker counts the requests it drops
// itself among the requests of its drop ratio. It decides how the breaker
// protects a failing dependency and how fast it lets traffic back when the
// dependency recovers; ExampleDropPolicy measures all three.
//
// The Google SRE book counts them ("requests" are all the requests the
// application attempted), and so does go-zero today (CountDrops). Under
// overload that is what holds the dependency's load near K times what it
// accepts: if it accepts C requests per second of the R offered, the breaker
// sends about K·C. During an outage about one request per second gets
// through. The price is recovery: the breaker's own drops keep the ratio up,
// and the share let through grows by about e per W/K (W the window) from
// about 1/(R·W), so recovery takes about (W/K)·ln(R·W): a minute for 1,000
// requests per second, a 10 s window and K = 2. That is the breaker go-zero's
// users see stay open long after an outage.
//
// Not counting them (IgnoreDrops, what kratos users ask for), the breaker sees
// only the requests it let through: it recovers within a second or two, but
// sends about √(K·C·R) under overload (4.5 C for R = 10 C), and during an
// outage lets through a number of requests per second that grows as √R (25
// at 1,000 requests per second).
//
// CountDropsWhileFailing, the default, counts drops only while the window
// holds a failure. While the dependency fails, drops are evidence of load and
// the breaker is the SRE throttle, with its protection under overload and its
// trickle during an outage; once every request the dependency was sent in the
// window succeeded, drops are the breaker's own doing, and it drops nothing.
// It recovers fully one window after the last failure at the latest.
//
// Choose CountDrops for a dependency that needs its load to come back slowly
// after an overload (cold caches, a queue to drain): its ramp, by e per W/K,
// is gradual, where the default lets the whole load back at once after a
// window without failures. Choose IgnoreDrops when failures do not come from
// load (an unreachable host), recovery must be fastest, and the trickle of
// probes costs little.
type BlockPolicy uint8

const (
	// CountBlocksWhileFailing counts dropped requests as requests while the
	// window holds a failure: the SRE formula while the dependency fails,
	// and no drops once it has not failed for a window.
	CountBlocksWhileFailing BlockPolicy = iota
	// CountBlocks counts dropped requests as requests: the SRE formula.
	CountBlocks
	// IgnoreBlocks leaves dropped requests out: only requests that reached
	// the dependency count.
	IgnoreBlocks
)

var dropPolicyNames = [...]string{"count drops while failing", "count drops", "ignore drops"}

// String returns the policy in words ("count drops").
func (p BlockPolicy) String() string {
	if int(p) < len(dropPolicyNames) {
		return dropPolicyNames[p]
	}
	return "unknown drop policy"
}

// An Adaptive breaker is the Google SRE client-side throttle ("Handling
// Overload", Site Reliability Engineering, ch. 21), as go-zero builds its
// breaker: over a sliding window it counts requests and accepts (requests
// the dependency handled), and drops each new request with probability
//
//	max(0, (requests − protection − K·accepts) / (requests + 1))
//
// so that while the dependency accepts everything nothing is dropped, and as
// it fails the breaker lets through about K requests per accepted one. There
// is no state to trip: the ratio follows the window, and the breaker recovers
// as the dependency does. Whether dropped requests count among the requests
// is a DropPolicy; by default they count while the window holds a failure.
//
// Drops are drawn from WithRandom's source. While the window holds no failure
// and no drop the ratio is 0, and Allow reads neither the window nor the
// source. The ratio is read in constant time, not by walking the window.
//
// An Adaptive breaker is safe for concurrent use. Allowing and settling a
// request allocate nothing. State is Open while the drop ratio is above zero.
// The zero Adaptive is not usable; make one with NewAdaptive.
type Adaptive struct {
	calls
	policy
	self        issuer
	t           *tally
	clock       clock.Clock
	interval    int64
	k           float64
	protection  int64
	minRequests int64
	drops       BlockPolicy
	random      func() float64
	// lastBad is the latest time a failure (and, under CountDrops, a drop)
	// was recorded, or a time a whole window before any other. A window
	// ending at least interval later holds none, and its drop ratio is 0.
	lastBad atomic.Int64
}

// NewAdaptive returns an Adaptive breaker. The defaults are go-zero's window
// (10 s in 40 buckets) and protection (5), K = 2 and no minimum volume;
// see the options.
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
	if s.random == nil {
		return nil, fmt.Errorf("%w: random source is nil", ErrInvalidConfig)
	}
	if s.drops > IgnoreBlocks {
		return nil, fmt.Errorf("%w: drop policy = %d: must be CountDropsWhileFailing, CountDrops or IgnoreDrops", ErrInvalidConfig, s.drops)
	}
	a := &Adaptive{
		policy:      policy{s.isExcluded, s.isSuccessful},
		t:           newTally(s.interval, s.buckets, s.clock),
		clock:       s.clock,
		interval:    int64(s.interval),
		k:           s.k,
		protection:  s.protection,
		minRequests: s.minRequests,
		drops:       s.drops,
		random:      s.random,
	}
	a.calls = calls{a}
	a.self = issuer{a: a}
	a.lastBad.Store(math.MinInt64 / 2) // times are clamped to ±2^60: no difference overflows
	return a, nil
}

// Allow reports whether a request may proceed now; if not, the error is
// ErrOpen and the drop is counted. Settle the Promise with the request's
// outcome.
func (a *Adaptive) Allow() (Promise, error) { return a.AllowAt(a.clock.Now()) }

// AllowAt is Allow at time now, in nanoseconds on the breaker's clock.
func (a *Adaptive) AllowAt(now int64) (Promise, error) {
	now = clampTime(now)
	if now-a.lastBad.Load() < a.interval {
		if r := a.ratio(a.t.at(now)); r > 0 && a.random() < r {
			a.drop(now)
			return Promise{}, ErrBlocked
		}
	}
	return Promise{by: &a.self}, nil
}

func (a *Adaptive) record(now int64, o Outcome) {
	now = clampTime(now)
	switch o {
	case Success:
		a.t.add(now, window.Succeeded)
	case Failure:
		a.t.add(now, window.Failed)
		a.markBad(now)
	}
}

// drop counts a dropped request.
func (a *Adaptive) drop(now int64) {
	a.t.add(now, window.Blocked)
	if a.drops == CountBlocks {
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

// ratio is the drop ratio of the window totals c.
func (a *Adaptive) ratio(c counts) float64 {
	if c.successes+c.failures < a.minRequests {
		return 0
	}
	requests := c.successes + c.failures
	if a.drops == CountBlocks || (a.drops == CountBlocksWhileFailing && c.failures > 0) {
		requests += c.rejected
	}
	r := (float64(requests-a.protection) - a.k*float64(c.successes)) / float64(requests+1)
	return max(r, 0)
}

// DropRatio returns the probability that the breaker drops a request now.
func (a *Adaptive) DropRatio() float64 { return a.DropRatioAt(a.clock.Now()) }

// DropRatioAt returns the probability that the breaker drops a request at
// time now.
func (a *Adaptive) DropRatioAt(now int64) float64 {
	now = clampTime(now)
	if now-a.lastBad.Load() >= a.interval {
		return 0
	}
	return a.ratio(a.t.at(now))
}

// State returns Open while the breaker drops requests (its drop ratio is
// above zero), else Closed.
func (a *Adaptive) State() State {
	if a.DropRatio() > 0 {
		return Open
	}
	return Closed
}

// Stats returns the breaker's state, drop ratio and window counts now.
func (a *Adaptive) Stats() Stats { return a.StatsAt(a.clock.Now()) }

// RetryAfterAt returns 0: an Adaptive breaker drops requests at random, and
// the next may pass at once.
func (a *Adaptive) RetryAfterAt(int64) time.Duration { return 0 }

// StatsAt returns the breaker's state, drop ratio and window counts at time
// now.
func (a *Adaptive) StatsAt(now int64) Stats {
	now = clampTime(now)
	c := a.t.at(now)
	s := Stats{
		Requests:   c.successes + c.failures,
		Successes:  c.successes,
		Failures:   c.failures,
		Blocked:    c.rejected,
		BlockRatio: a.ratio(c),
	}
	if s.BlockRatio > 0 {
		s.State = Open
	}
	return s
}

// clampTime limits t to the times the window accepts, so that differences
// between times never overflow.
func clampTime(t int64) int64 { return min(max(t, -window.MaxTime), window.MaxTime) }
