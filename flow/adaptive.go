package flow

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowstate"
)

// AdaptiveSettings configure an [Adaptive] limiter. Every zero field takes
// its default.
type AdaptiveSettings struct {
	// Algorithm is how the limit comes down when requests queue:
	// "gradient" (the default) scales it by tolerance × baseline / mean,
	// between 0.5 and 1; "aimd" multiplies it by Backoff. Both grow it by
	// its square root while it is in use and requests do not queue.
	Algorithm string
	// InitialLimit is the limit to start from, within [MinLimit, MaxLimit]
	// (default 20). The limit doubles every window until requests first
	// queue, so a low start costs a few windows.
	InitialLimit int64
	// MinLimit and MaxLimit bound the limit (defaults 4 and 10000). The
	// limit never falls below MinLimit, not even in a drain.
	MinLimit, MaxLimit int64
	// Tolerance is how much slower than the baseline the mean response time
	// may be before the limit comes down, at least 1 (default 1.25). Under
	// sustained overload a gradient limit settles where requests take
	// Tolerance × the baseline.
	Tolerance float64
	// Window is the shortest window of samples (default 100 ms). A window
	// also lasts twice the mean response time, and until it holds
	// MinSamples completed requests (default 10).
	Window     time.Duration
	MinSamples int64
	// DrainInterval is how often the limiter drains its queue to measure
	// the baseline afresh (default 10 s; negative: never).
	DrainInterval time.Duration
	// Backoff multiplies the limit when a request in the window was
	// overloaded, and for "aimd" when requests queue: in [0.5, 1) (default
	// 0.8).
	Backoff float64
	// Clock is the clock the limiter reads (default clock.System).
	Clock clock.Clock
}

// How an Adaptive limit moves.
//
// The model. A service of W workers that each take S per request completes
// C = W/S requests a second. Up to W requests in flight, each takes S;
// beyond, the rest queue, and each takes S × inflight/W. The limiter judges
// a window of requests by their mean response time without its outliers:
// the requests that took over four times the window's median. A queue
// slows most requests, and moves the median with them; a few requests slow
// for their own reasons (a large upload, a rare expensive query) do not,
// and left in, 5% of requests 100 times slower would make the mean six
// times the rest's. A median alone would not do either: it lets a queue
// that holds a third of the requests go unseen. It keeps a baseline: the
// least such mean of a window (of at least MinSamples requests) it has
// seen, S. A mean of many requests, not the fastest one: a few fast answers
// (cache hits, quick errors) among slow ones must not make every window
// look queued. At the end of each window it compares the window's mean
// with the baseline. Gradient sets the limit to limit × tolerance ×
// baseline / mean when that is below the limit, which under sustained
// overload is tolerance × W: every worker busy, each request taking
// tolerance × S. It grows the limit when requests take less and the limit
// is in use (at least half of it was in flight in the window): doubling
// each window until requests first queue (slow start), then by its square
// root. AIMD cuts by the backoff factor instead, and grows the same way. A
// request that ends overloaded cuts the limit by the backoff factor at the
// end of its window, whatever the response times say; in a drain, it cuts
// the limit the drain comes back to. The limit grows only while it is in
// use, and never under sustained overload: between drains the baseline
// only goes down, so it cannot drift up with the queue.
//
// A drain measures the baseline afresh, up or down, so that a service that
// became slower for good is not held to its old speed. Every DrainInterval
// (with a jitter of a quarter, so that instances do not drain together),
// the limit goes down to 0.8 × limit / tolerance: four fifths of the
// workers once the limit has settled. When the requests in flight have
// fallen to that, the queue is gone, and the mean response time of the
// next MinSamples requests admitted is the new baseline; the limit then
// comes back to what it was. A drain lasts about one response time more
// than the queue takes to drain: at most four mean response times (a
// window if that is longer), and until a request ends after that. No drain
// starts in a window with overloaded requests, and none lowers the limit
// below MinLimit; a window whose requests in flight stayed below the
// drain's limit measures the baseline without lowering anything. A drain
// costs at most a fifth of the throughput for about a response time every
// ten seconds: a fraction of a percent.
//
// A window holds the requests that ended within it; the first request to
// end after it closes it, if it holds MinSamples, and the window goes on
// otherwise. Response times are summed, and counted in the bins of
// window.Sketch to find the median and the outliers: a window without
// outliers has its exact mean, one with them the mean of the others within
// 4.4%. Acquiring is a compare-and-swap on the requests in flight; ending
// adds the sample with a few atomics, and the request that finds the
// window over closes it under a mutex that no other request waits for.

// An Adaptive limiter is a concurrency limit that finds itself. It admits a
// request while fewer than its limit are in flight, as [Concurrency] does.
// It moves the limit by the response times of the requests it admitted.
// At the limit, the places are shared fairly among the keys of the
// requests (see [Adaptive.AcquireAt]). So a key whose requests stall cannot
// take the limit from the others.
//
// The limiter judges each window of requests by its mean response time,
// outliers left out. It compares that mean with a baseline: the least mean
// it has seen. When requests queue, "gradient" cuts the limit in
// proportion, and "aimd" by the backoff factor. When they do not and the
// limit is in use, it grows. A request that ends [FailedOverloaded] cuts
// the limit by the backoff factor. Every DrainInterval the limit dips for
// about a response time, to measure the baseline afresh.
//
// An Adaptive limiter is safe for concurrent use. Neither acquiring nor
// ending allocates. The zero Adaptive is not usable; make one with
// [NewAdaptive].
type Adaptive struct {
	limit atomic.Int64
	fair  *fairShare // the requests in flight, by lane
	// The current window's samples: their response times by bin, and the
	// requests that ended overloaded.
	samples    *rtBins
	overloaded atomic.Int64
	peak       atomic.Int64
	// A drain's: its limit (0 when none), when its queue was found drained
	// (the requests admitted from then on measure the baseline; MaxInt64
	// until then), their response times and their number.
	drainLimit, measureFrom atomic.Int64
	drained                 *rtBins
	measured                atomic.Int64
	windowEnd               atomic.Int64
	shownBaseline           atomic.Int64 // baseline, for Baseline

	mu sync.Mutex // held by the request closing a window; no one waits for it
	// Under mu.
	lim       float64 // the limit, unrounded
	baseline  int64   // the least mean response time of a window, outliers left out, in ns; 0 until measured
	slowStart bool
	draining  bool
	drainEnd  int64
	saved     float64 // the limit before the drain
	nextDrain int64
	windows   uint64 // windows closed, for the drains' jitter

	s     AdaptiveSettings
	aimd  bool // s.Algorithm is "aimd"
	clock clock.Clock
}

// NewAdaptive returns an Adaptive limiter of the given settings. A bad
// setting is a configuration error naming it ("initial_limit", "tolerance").
func NewAdaptive(s AdaptiveSettings) (*Adaptive, error) {
	if err := s.fill(); err != nil {
		return nil, err
	}
	a := &Adaptive{s: s, aimd: s.Algorithm == "aimd", clock: s.Clock, lim: float64(s.InitialLimit), slowStart: true,
		fair: newFairShare(), samples: new(rtBins), drained: new(rtBins)}
	a.limit.Store(s.InitialLimit)
	a.measureFrom.Store(math.MaxInt64)
	now := a.clock.Now()
	a.windowEnd.Store(now + int64(s.Window))
	a.nextDrain = a.drainAfter(now)
	return a, nil
}

// fill gives the zero fields their defaults and checks the others.
func (s *AdaptiveSettings) fill() *configError {
	switch s.Algorithm {
	case "":
		s.Algorithm = flowlimits.DefaultAdaptiveAlgorithm
	case "gradient", "aimd":
	default:
		return &configError{Pkg: "flow", Field: "algorithm", Value: s.Algorithm, Detail: `must be "gradient" or "aimd"`}
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.MinLimit, flowlimits.DefaultAdaptiveMinLimit)
	def(&s.MaxLimit, flowlimits.DefaultAdaptiveMaxLimit)
	def(&s.InitialLimit, flowlimits.DefaultAdaptiveInitialLimit)
	def(&s.MinSamples, flowlimits.DefaultAdaptiveMinSamples)
	if s.MinLimit < 1 || s.MinLimit > maxLimit {
		return &configError{Pkg: "flow", Field: "min_limit", Value: s.MinLimit, Detail: fmt.Sprintf("must be between 1 and %d", int64(maxLimit))}
	}
	if s.MaxLimit < s.MinLimit || s.MaxLimit > maxLimit {
		return &configError{Pkg: "flow", Field: "max_limit", Value: s.MaxLimit, Detail: fmt.Sprintf("must be between the min limit (%d) and %d", s.MinLimit, int64(maxLimit))}
	}
	if s.InitialLimit < s.MinLimit || s.InitialLimit > s.MaxLimit {
		// An initial limit given outside its bounds is a mistake; one
		// defaulted outside them (bounds set around it) is moved in.
		if s.InitialLimit != flowlimits.DefaultAdaptiveInitialLimit {
			return &configError{Pkg: "flow", Field: "initial_limit", Value: s.InitialLimit, Detail: fmt.Sprintf("must be between the min limit (%d) and the max limit (%d)", s.MinLimit, s.MaxLimit)}
		}
		s.InitialLimit = min(max(s.InitialLimit, s.MinLimit), s.MaxLimit)
	}
	if s.Tolerance == 0 {
		s.Tolerance = flowlimits.DefaultAdaptiveTolerance
	}
	if !(s.Tolerance >= 1 && s.Tolerance <= 100) {
		return &configError{Pkg: "flow", Field: "tolerance", Value: s.Tolerance, Detail: "must be between 1 and 100"}
	}
	if s.Window == 0 {
		s.Window = flowlimits.DefaultAdaptiveWindow
	}
	if s.Window < time.Millisecond || s.Window > time.Hour {
		return &configError{Pkg: "flow", Field: "window", Value: s.Window, Detail: "must be between 1ms and 1h"}
	}
	if s.MinSamples < 1 || s.MinSamples > 1e6 {
		return &configError{Pkg: "flow", Field: "min_samples", Value: s.MinSamples, Detail: "must be between 1 and 1000000"}
	}
	if s.DrainInterval == 0 {
		s.DrainInterval = flowlimits.DefaultAdaptiveDrainInterval
	}
	if s.DrainInterval > 0 && s.DrainInterval < 10*s.Window {
		return &configError{Pkg: "flow", Field: "drain_interval", Value: s.DrainInterval, Detail: fmt.Sprintf("must be at least ten windows (%v), or negative for none", 10*s.Window)}
	}
	if s.Backoff == 0 {
		s.Backoff = flowlimits.DefaultAdaptiveBackoff
	}
	s.Clock = clockOr(s.Clock)
	if !(s.Backoff >= 0.5 && s.Backoff < 1) {
		return &configError{Pkg: "flow", Field: "backoff", Value: s.Backoff, Detail: "must be at least 0.5 and below 1"}
	}
	return nil
}

// Acquire decides at the limiter's clock; see [Adaptive.AcquireAt].
func (a *Adaptive) Acquire(p *Permit, key string) Decision {
	return a.AcquireAt(a.clock.Now(), p, key)
}

// AcquireAt admits a request of the given key at time now if fewer than
// the limit are in flight, or if the key holds less than its share. It
// then fills p, a zero or done [Permit], and the caller calls
// [Permit.DoneAt] when the request ends. Otherwise the request is blocked
// with [Overloaded]. A nil p is blocked with [ExceedsLimit]: it could never
// be given back. The key says whose request it is: the route, the client,
// or "" for all alike.
func (a *Adaptive) AcquireAt(now int64, p *Permit, key string) Decision {
	if p == nil {
		return Decision{Reason: ExceedsLimit}
	}
	pk := a.fair.pick(key)
	if !a.fair.admit(now, a.limit.Load(), pk) {
		return Decision{Reason: Overloaded}
	}
	if cur := a.fair.inflight.Load(); cur > a.peak.Load() {
		storeMax(&a.peak, cur)
	}
	p.start, p.lane = now, pk.lane
	p.fill(byAdaptive, unsafe.Pointer(a), 1)
	return allowed
}

// storeMax raises v to x.
func storeMax(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if x <= cur || v.CompareAndSwap(cur, x) {
			return
		}
	}
}

// done ends the request of a permit at time now. Succeeded, its response
// time is a sample of the service's, unless now is not after the time it was
// admitted (a clock that went back). FailedOverloaded, it is a signal to
// back off, its response time no sample. Failed or Ignored, it only leaves
// the requests in flight.
func (a *Adaptive) done(p *Permit, now int64, timed bool, o Outcome) {
	a.fair.leave(p.lane)
	if o != Succeeded && o != FailedOverloaded {
		return
	}
	if !timed {
		now = a.clock.Now()
	}
	// A window holds the requests that ended before it did: the one that
	// finds it over closes it, then counts in the next.
	if now >= a.windowEnd.Load() && a.mu.TryLock() {
		a.closeWindow(now)
		a.mu.Unlock()
	}
	switch rt := now - p.start; {
	case o == FailedOverloaded:
		a.overloaded.Add(1)
	case rt > 0: // a clock that went back gives no sample
		a.samples.add(rt)
		if a.drainLimit.Load() > 0 {
			a.measure(now, p.start, rt)
		}
	}
}

// measure counts a response time rt of a request admitted at start and
// ended at now during a drain: once the requests in flight have fallen to
// the drain's limit, the queue is gone, and the requests admitted from then
// on measure the baseline. When MinSamples of them have ended, the drain
// is over: the next request to end closes it.
func (a *Adaptive) measure(now, start, rt int64) {
	from := a.measureFrom.Load()
	if from == math.MaxInt64 && a.fair.inflight.Load() <= a.drainLimit.Load() {
		a.measureFrom.CompareAndSwap(math.MaxInt64, now)
		return
	}
	if start < from {
		return
	}
	a.drained.add(rt)
	if a.measured.Add(1) == a.s.MinSamples {
		a.windowEnd.Store(now)
	}
}

// closeWindow ends the window at now, under mu: it takes the window's
// samples, and moves the baseline and the limit.
func (a *Adaptive) closeWindow(now int64) {
	defer func() { a.shownBaseline.Store(a.baseline) }()
	if now < a.windowEnd.Load() {
		return // another request closed it first
	}
	n, over := a.samples.count.Load(), a.overloaded.Load()
	if n+over < a.s.MinSamples {
		return // too few to judge by: the window goes on
	}
	// A sample added while the window is taken lands in one window or the
	// next: a window is statistics, not a promise.
	over = a.overloaded.Swap(0)
	n, rt := a.samples.take()
	peak := a.peak.Swap(a.fair.inflight.Load())
	a.windows++
	// The baseline is a mean of many requests, not the fastest one: a
	// few fast answers (cache hits, quick errors) among slow ones must not
	// make every window look queued.
	full := n >= a.s.MinSamples
	if full && (a.baseline == 0 || rt < a.baseline) {
		a.baseline = rt
	}
	a.windowEnd.Store(now + max(int64(a.s.Window), 2*rt))
	switch {
	case a.draining:
		if over > 0 {
			// Overloaded requests in a drain cut the limit it comes back to.
			a.saved *= a.s.Backoff
			a.slowStart = false
		}
		if now < a.drainEnd && a.measured.Load() < a.s.MinSamples {
			return
		}
		a.measured.Store(0)
		if m, rt := a.drained.take(); m > 0 {
			a.baseline = rt
		}
		a.drainLimit.Store(0)
		a.measureFrom.Store(math.MaxInt64)
		a.draining = false
		a.nextDrain = a.drainAfter(now)
		a.set(a.saved)
		return
	case a.s.DrainInterval > 0 && now >= a.nextDrain && full && over == 0:
		drain := max(float64(a.s.MinLimit), 0.8*a.lim/a.s.Tolerance)
		if float64(peak) <= drain {
			// The window never had more in flight than a drain would
			// allow: its requests did not queue behind each other.
			a.baseline = rt
			a.nextDrain = a.drainAfter(now)
			break
		}
		a.draining, a.saved = true, a.lim
		a.drainEnd = now + max(4*rt, int64(a.s.Window))
		a.measured.Store(0)
		a.drained.take()
		a.measureFrom.Store(math.MaxInt64)
		a.windowEnd.Store(a.drainEnd)
		a.set(drain)
		a.drainLimit.Store(a.limit.Load())
		return
	}
	a.update(n, over, rt, peak)
}

// update moves the limit by the window's samples: n response times of
// mean rt (outliers left out), over overloaded requests, peak requests in
// flight at most.
func (a *Adaptive) update(n, over, rt, peak int64) {
	lim := a.lim
	queued := n > 0 && float64(rt) > a.s.Tolerance*float64(a.baseline)
	switch {
	case over > 0:
		lim *= a.s.Backoff
		a.slowStart = false
	case n == 0:
		return
	case queued && !a.aimd:
		lim *= max(a.s.Tolerance*float64(a.baseline)/float64(rt), 0.5)
		a.slowStart = false
	case queued:
		lim *= a.s.Backoff
		a.slowStart = false
	case 2*float64(peak) >= lim: // in use, and no queue: room to grow
		if a.slowStart {
			lim *= 2
		} else {
			lim += math.Sqrt(lim)
		}
	}
	a.set(lim)
}

// set makes lim, within the bounds, the limit.
func (a *Adaptive) set(lim float64) {
	a.lim = min(max(lim, float64(a.s.MinLimit)), float64(a.s.MaxLimit))
	a.limit.Store(int64(math.Round(a.lim)))
}

// drainAfter returns when the drain after now is due: DrainInterval later,
// give or take a quarter of it, drawn from the number of windows closed.
func (a *Adaptive) drainAfter(now int64) int64 {
	if a.s.DrainInterval <= 0 {
		return math.MaxInt64
	}
	x := (a.windows + 1) * 0x9e3779b97f4a7c15 // a spread of the count: a Weyl sequence
	jitter := float64(x>>11)/float64(1<<53)/2 - 0.25
	return now + int64(float64(a.s.DrainInterval)*(1+jitter))
}

// limitNow returns the limit in force.
func (a *Adaptive) limitNow() int64 { return a.limit.Load() }

// inFlight returns the requests admitted and not yet done.
func (a *Adaptive) inFlight() int64 { return a.fair.inflight.Load() }

// baselineNow returns the mean response time the limiter judges queueing
// by; 0 until it has one.
func (a *Adaptive) baselineNow() time.Duration { return time.Duration(a.shownBaseline.Load()) }

// state is what the limiter has learnt.
func (a *Adaptive) state() flowstate.Overload {
	return flowstate.Overload{Limit: a.limitNow(), InFlight: a.inFlight(), Baseline: a.baselineNow()}
}
