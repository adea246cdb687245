package breaker

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/window"
)

// A DropPolicy says whether an Adaptive breaker counts the requests it drops
// itself among the requests of its drop ratio.
//
// The Google SRE book counts them ("requests" are all the requests the
// application attempted), and so does go-zero today. Under overload that is
// what keeps the dependency's load near K times what it accepts: if it
// accepts C requests per window of the R offered, the breaker sends about
// K·C. Not counting them, the breaker sees only the requests it let through,
// and sends about √(K·C·R): many times the dependency's capacity when R is
// large. The price of counting is recovery: after an outage the share let
// through grows by about e per W/K (W the window), from about 1/(R·W) of the
// traffic, so full recovery takes about (W/K)·ln(R·W), a minute for 1,000
// requests per second, a 10 s window and K = 2. That is the breaker go-zero's
// users see stay open long after an outage. Not counting them, it recovers in
// under a window, and during a hard outage lets about √(R·W) requests per
// window through, a trickle of probes.
//
// So count drops (the default) when failures come from overload, which is
// what adaptive throttling is for; ignore them when failures are outages of a
// dependency whose load does not cause them (an unreachable host, a
// dependency that is down), where fast recovery matters and the trickle costs
// little. ExampleDropPolicy simulates both.
type DropPolicy uint8

const (
	// CountDrops counts dropped requests as requests: the SRE formula.
	CountDrops DropPolicy = iota
	// IgnoreDrops leaves dropped requests out: only requests that reached
	// the dependency count.
	IgnoreDrops
)

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
// is a DropPolicy.
//
// Drops are drawn from WithRandom's source. While the window holds no failure
// and no drop the ratio is 0, and Allow reads neither the window nor the
// source. The ratio is read in constant time, not by walking the window.
//
// An Adaptive breaker is safe for concurrent use. Allowing and settling a
// request allocate nothing. State is Open while the drop ratio is above zero.
type Adaptive struct {
	calls
	policy
	t           *tally
	clock       clock.Clock
	interval    int64
	k           float64
	protection  int64
	minRequests int64
	countDrops  bool
	random      func() float64
	// lastBad is the latest time a failure or a drop was recorded (or a
	// time a whole window before any other). A window ending at a time at
	// least interval later holds neither, and its drop ratio is 0.
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
	if s.drops > IgnoreDrops {
		return nil, fmt.Errorf("%w: drop policy = %d: must be CountDrops or IgnoreDrops", ErrInvalidConfig, s.drops)
	}
	a := &Adaptive{
		policy:      policy{s.isExcluded, s.isSuccessful},
		t:           newTally(s.interval, s.buckets, s.clock),
		clock:       s.clock,
		interval:    int64(s.interval),
		k:           s.k,
		protection:  s.protection,
		minRequests: s.minRequests,
		countDrops:  s.drops == CountDrops,
		random:      s.random,
	}
	a.calls = calls{a}
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
			a.t.add(now, window.Block)
			a.markBad(now)
			return Promise{}, ErrOpen
		}
	}
	return Promise{r: a}, nil
}

func (a *Adaptive) record(_ Promise, now int64, o Outcome) {
	now = clampTime(now)
	switch o {
	case Success:
		a.t.add(now, window.Success)
	case Failure:
		a.t.add(now, window.Error)
		a.markBad(now)
	}
}

func (a *Adaptive) now() int64 { return a.clock.Now() }

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
	if a.countDrops {
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

// StatsAt returns the breaker's state, drop ratio and window counts at time
// now.
func (a *Adaptive) StatsAt(now int64) Stats {
	now = clampTime(now)
	c := a.t.at(now)
	s := Stats{
		Requests:  c.successes + c.failures,
		Successes: c.successes,
		Failures:  c.failures,
		Rejected:  c.rejected,
		DropRatio: a.ratio(c),
	}
	if s.DropRatio > 0 {
		s.State = Open
	}
	return s
}

// clampTime limits t to the times the window accepts, so that differences
// between times never overflow.
func clampTime(t int64) int64 { return min(max(t, -window.MaxTime), window.MaxTime) }
