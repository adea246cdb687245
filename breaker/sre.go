package breaker

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/breakerlimits"
	"github.com/slidegate/slidegate/internal/timegrid"
	"github.com/slidegate/slidegate/window"
)

// A BlockPolicy says whether an [SRE] breaker counts the requests it
// blocks among the requests of its block ratio. It decides how the breaker
// protects a failing dependency, and how it lets traffic back after.
// ExampleBlockPolicy measures all three. The zero BlockPolicy is
// [CountBlocksWhileFailing], the default.
//
// Counting blocks is the Google SRE book's formula. Under overload it holds
// the dependency's load near K times what the dependency handles. During an
// outage about one request a second gets through. Its price is recovery: the
// blocks keep the ratio up after the outage. The share let through then
// grows by about e per W/K, W being the window. That takes about a minute at
// 1,000 requests a second, with K = 2 and a 10 s window.
//
// Not counting them, the breaker sees only the requests it let through. It
// recovers within a second, all at once. Under overload it sends about
// √(K·C·R) when the dependency handles C of R offered: 4.5 C for R = 10 C.
// During an outage it lets through about 25 requests a second of 1,000.
//
// The default counts blocks while the window holds a failure, and ramps the
// ratio down once the dependency is back. Choose [CountBlocks] when the load
// must come back slower still (cold caches, a queue to drain). Choose
// [IgnoreBlocks] when failures do not come from load (an unreachable host),
// recovery must be fastest, and the larger trickle costs little.
type BlockPolicy uint8

const (
	// CountBlocksWhileFailing counts blocked requests while the window holds
	// a failure: the SRE formula while the dependency fails. It then ramps.
	// Once a request has succeeded and nothing failed for a tenth of the
	// window, the block ratio falls in step with the time since the last
	// failure. It reaches 0 a bucket before that failure leaves the window.
	// So the load comes back over one window, not at once.
	CountBlocksWhileFailing BlockPolicy = iota
	// CountBlocks always counts blocked requests: the SRE formula, without
	// a ramp.
	CountBlocks
	// IgnoreBlocks never counts blocked requests: only requests that
	// reached the dependency count.
	IgnoreBlocks
)

// An SRE breaker is the Google SRE client-side throttle ("Handling
// Overload", Site Reliability Engineering, ch. 21), as go-zero's breaker is.
// Over a sliding window it counts requests and successes. It blocks each new
// request with probability
//
//	max(0, (requests − protection − K·successes) / (requests + 1))
//
// While every request succeeds, nothing is blocked. As the dependency fails,
// the breaker lets through about K requests per successful one. There is no
// state to trip: the ratio follows the window. A [BlockPolicy] says whether
// blocked requests count among the requests. By default they count while the
// window holds a failure, and the ratio ramps down once the dependency is
// back.
//
// While it blocks, the breaker lets a request through when none went through
// for a tenth of its window (a second by default). So it soon learns that the
// dependency is back.
//
// Whether to block is drawn at random. While the window holds no failure
// (nor, under [CountBlocks], a block), [SRE.Allow] reads neither the window
// nor the random source. The ratio is read in constant time (see
// [window.CachedSums]).
//
// An SRE breaker is safe for concurrent use. Allowing and settling a
// request allocate nothing. Its [State] is [Open] while the block ratio is
// above zero. The zero SRE is not usable; make one with [NewSRE].
type SRE struct {
	policy
	t           *window.Counter
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
	// lastGood is a time a success was counted after lastBad, if one was
	// (lastGood > lastBad): the dependency may be back (see ramp). Only a
	// success within a window of lastBad reads or writes it, so a healthy
	// breaker never touches it.
	lastGood atomic.Int64
	// lastPass is about the latest time a request was let through while
	// the block ratio was above 0, or failed: a probe is due probeEvery
	// after it (see probe).
	lastPass   atomic.Int64
	probeEvery int64
	width      int64 // of a bucket
}

// NewSRE returns an SRE breaker. Unless opts say otherwise, its window is
// 10 s in 40 buckets, its K 2 and its protection 5 (see [WithWindow] and
// [WithFormula]). A bad option is an error matching [github.com/slidegate/slidegate.ErrInvalidConfig].
func NewSRE(opts ...Option) (*SRE, error) {
	s, err := build(opts, settings{
		interval: breakerlimits.DefaultInterval, buckets: breakerlimits.DefaultSREBuckets,
		k: breakerlimits.DefaultK, protection: breakerlimits.DefaultProtection, random: defaultRandom,
	}, sreOnly, "an SRE breaker")
	if err != nil {
		return nil, err
	}
	if !(s.k >= 1) || !finite(s.k) {
		return nil, fmt.Errorf("%w: K = %v: must be at least 1 and finite", errInvalidConfig, s.k)
	}
	if s.protection < 0 {
		return nil, fmt.Errorf("%w: protection = %d: must not be negative", errInvalidConfig, s.protection)
	}
	if s.blockPolicy > IgnoreBlocks {
		return nil, fmt.Errorf("%w: block policy = %d: must be CountBlocksWhileFailing, CountBlocks or IgnoreBlocks", errInvalidConfig, s.blockPolicy)
	}
	t, err := window.NewCounter(s.buckets, s.interval, window.WithClock(s.clock), window.WithEvents(window.Succeeded, window.Failed, window.Blocked), window.CachedSums())
	if err != nil {
		return nil, fmt.Errorf("%w: window: %w", errInvalidConfig, err)
	}
	a := &SRE{
		policy:      policy{s.outcomeOf},
		t:           t,
		clock:       s.clock,
		interval:    int64(s.interval),
		k:           s.k,
		protection:  s.protection,
		minRequests: s.minRequests,
		blockPolicy: s.blockPolicy,
		random:      s.random,
	}
	a.probeEvery = a.interval / probesPerWindow
	a.width = a.interval / int64(s.buckets)
	// Times are clamped to ±2^60: no difference overflows.
	a.lastBad.Store(math.MinInt64 / 2)
	a.lastGood.Store(math.MinInt64 / 2)
	a.lastPass.Store(math.MinInt64 / 2)
	return a, nil
}

// Allow reports whether a request may proceed now. If not, the error is
// [ErrBlocked], and the block is counted. Settle the [Promise] with the
// request's outcome.
func (a *SRE) Allow() (Promise, error) { return a.AllowAt(a.clock.Now()) }

// AllowAt is Allow at time now, in nanoseconds on the breaker's clock.
func (a *SRE) AllowAt(now int64) (Promise, error) {
	now = timegrid.Clamp(now)
	if bad := a.lastBad.Load(); now-bad < a.interval {
		if r := a.ratioAt(now, bad); r > 0 {
			if a.random() < r && !a.probe(now) {
				a.block(now)
				return Promise{}, ErrBlocked
			}
			a.passed(now)
		}
	}
	return Promise{rec: (*sreRecorder)(a)}, nil
}

func (a *SRE) record(now int64, o Outcome) {
	now = timegrid.Clamp(now)
	switch o {
	case Success:
		a.t.AddAt(now, window.Succeeded, 1)
		if a.blockPolicy == CountBlocksWhileFailing {
			a.markGood(now)
		}
	case Failure:
		a.t.AddAt(now, window.Failed, 1)
		a.markBad(now)
		a.passed(now)
	}
}

// markGood records a success at time now: the first after the latest
// failure, within a window of it, arms the ramp (see ramp).
func (a *SRE) markGood(now int64) {
	bad := a.lastBad.Load()
	if now <= bad || now-bad >= a.interval {
		return
	}
	for {
		good := a.lastGood.Load()
		if good > bad || a.lastGood.CompareAndSwap(good, now) {
			return
		}
	}
}

// passed records that a request was let through at time now, when the
// block ratio was above 0 or the request failed. It writes lastPass at most
// about sixteen times per probeEvery, so that a breaker under load does not
// write one word from every core.
func (a *SRE) passed(now int64) {
	if now-a.lastPass.Load() >= a.probeEvery>>4 {
		a.lastPass.Store(now)
	}
}

// probe reports whether a request the draw would block at time now goes
// through instead, as a probe: no request went through for probeEvery.
// Only one of the requests that find a probe due wins it.
func (a *SRE) probe(now int64) bool {
	last := a.lastPass.Load()
	return now-last >= a.probeEvery && a.lastPass.CompareAndSwap(last, now)
}

// probesPerWindow is how many probes per interval a blocking breaker lets
// through at least: one a second for the default 10 s window.
const probesPerWindow = 10

// block counts a blocked request.
func (a *SRE) block(now int64) {
	a.t.AddAt(now, window.Blocked, 1)
	if a.blockPolicy == CountBlocks {
		a.markBad(now)
	}
}

// markBad raises lastBad to now.
func (a *SRE) markBad(now int64) {
	for {
		old := a.lastBad.Load()
		if now <= old || a.lastBad.CompareAndSwap(old, now) {
			return
		}
	}
}

// ratioAt is the block ratio at time now, with the latest failure (or
// block) at bad, less than an interval before now: the ratio of the window,
// and, once a success followed the latest failure, that ratio ramped down
// (see ramp).
func (a *SRE) ratioAt(now, bad int64) float64 {
	return a.ramp(a.ratio(a.t.SumsAt(now)), now, bad)
}

// ramp returns block ratio r at time now, the latest failure at bad,
// lowered once the dependency is back: a request succeeded after bad, and
// nothing failed for probeEvery since. It is then lowered in step with the
// time since bad, a bucket ahead as go-zero counts its current bucket, and
// reaches 0 a bucket before the failure leaves the window. So the breaker
// lets the load back over one window, not all at once.
//
// A dependency that fails again within probeEvery is not back: an overload
// whose failures pause for a moment (a quota per second, say) keeps the
// block ratio of its window. Only CountBlocksWhileFailing ramps: the other
// policies are the formula as it stands.
func (a *SRE) ramp(r float64, now, bad int64) float64 {
	since := now - bad
	if r <= 0 || since < a.probeEvery || a.blockPolicy != CountBlocksWhileFailing || a.lastGood.Load() <= bad {
		return r
	}
	left := a.interval - a.width - since
	return r * float64(max(left, 0)) / float64(a.interval)
}

// ratio is the block ratio of the window totals s.
func (a *SRE) ratio(s window.Sums) float64 {
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

// Stats returns the breaker's state, block ratio and window counts now.
func (a *SRE) Stats() Stats { return a.StatsAt(a.clock.Now()) }

// StatsAt returns the breaker's state, block ratio and window counts at time
// now. [Stats.Slow] and [Stats.ConsecutiveFailures] are 0: an SRE breaker
// counts neither.
func (a *SRE) StatsAt(now int64) Stats {
	now = timegrid.Clamp(now)
	w := a.t.SumsAt(now)
	succ, fail := w[window.Succeeded], w[window.Failed]
	s := Stats{
		Requests: succ + fail, Successes: succ, Failures: fail,
		Blocked: w[window.Blocked],
	}
	if bad := a.lastBad.Load(); now-bad < a.interval {
		s.BlockRatio = a.ramp(a.ratio(w), now, bad)
	}
	if s.BlockRatio > 0 {
		s.State = Open
	}
	return s
}
