package flow

import (
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/internal/timegrid"
	"github.com/slidegate/slidegate/window"
)

// ShedderSettings configure a [Shedder]. Every zero field takes its
// default.
type ShedderSettings struct {
	// CPU returns the share of its CPU capacity the process uses, in
	// [0, 1]: cpu.Sampler.Usage. It is called on every decision, so it must
	// be cheap. Nil means no CPU signal: the shedder then always holds the
	// requests in flight to twice what the service has shown it completes,
	// shared fairly among keys.
	CPU func() float64
	// CPUThreshold is the usage at or above which the service is
	// overloaded, in (0, 1] (default 0.9).
	CPUThreshold float64
	// Interval and Buckets are the window the shedder learns the service's
	// capacity over (defaults 5 s and 50 buckets).
	Interval time.Duration
	Buckets  int
	// CoolOff is how long the shedder keeps shedding after it last shed
	// with the CPU at or above the threshold (default 1 s). The CPU falls
	// as soon as requests are shed, and the backlog must not come back at
	// once. A negative CoolOff means none.
	CoolOff time.Duration
	// Clock is the clock the shedder reads (default clock.System).
	Clock clock.Clock
}

// A Shedder sheds load when a service is overloaded. While the CPU is at or
// above its threshold, or within the cool-off after it shed there, it
// admits a request only while fewer are in flight than the service
// completes at its best. By Little's law:
//
//	max in flight = best completions per second × least response time
//
// The best rate is the most requests completed in one bucket of the
// window. The least response time is the smallest mean of one bucket. At
// that bound the places are shared fairly among the keys of the requests
// (see [Shedder.AcquireAt]). So a key whose requests stall cannot take the
// service from the others.
//
// Below half the threshold it admits every request. A cap there would be
// one that clients could fill without using the CPU, by holding requests
// open. Between half the threshold and the threshold, and always without a
// CPU signal, it admits up to twice the bound, shared the same way.
//
// Until the window holds one full bucket of completed requests, it admits
// everything. Once it has learnt a bound, a window in which nothing
// completed keeps it: a service that completes nothing is overloaded, not
// idle.
//
// A Shedder is safe for concurrent use. Deciding reads a few atomics and
// the CPU, and allocates nothing. The zero Shedder is not usable; make one
// with [NewShedder].
type Shedder struct {
	fair      *fairShare   // the requests in flight, by lane
	lastShed  atomic.Int64 // when it last shed, on its clock; math.MinInt64 if never
	bound     atomic.Uint64
	completed *window.RollingWindow // completed requests: count and response time in rtUnit, per bucket
	cpu       func() float64
	threshold float64
	coolOff   int64
	width     int64 // a bucket's width in ns
	clock     clock.Clock
}

// The bound word holds the bucket it was computed for (high 32 bits) and the
// most requests in flight it allows (low 32 bits): boundUnknown until the
// window has a full bucket. A bucket index's low 32 bits are enough to tell
// a stale bound: the bound is recomputed whenever they differ.
const (
	boundUnknown = math.MaxUint32
	boundBits    = 32
)

// NewShedder returns a Shedder of the given settings. A bad setting is a
// configuration error naming it ("cpu_threshold", "buckets").
func NewShedder(s ShedderSettings) (*Shedder, error) {
	if s.CPUThreshold == 0 {
		s.CPUThreshold = flowlimits.DefaultShedCPUThreshold
	}
	if !(s.CPUThreshold > 0 && s.CPUThreshold <= 1) {
		return nil, &configError{Pkg: "flow", Field: "cpu_threshold", Value: s.CPUThreshold, Detail: "must be above 0 and at most 1 (a share of the CPU the process may use)"}
	}
	if s.Interval == 0 {
		s.Interval = flowlimits.DefaultShedInterval
	}
	if s.Buckets == 0 {
		s.Buckets = flowlimits.DefaultShedBuckets
	}
	if s.CoolOff == 0 {
		s.CoolOff = flowlimits.DefaultShedCoolOff
	}
	if we := timegrid.CheckWindow(s.Interval, s.Buckets); we != nil {
		return nil, &configError{Pkg: "flow", Field: we.Arg, Value: we.Value, Detail: we.Detail}
	}
	if s.Buckets < 2 {
		return nil, &configError{Pkg: "flow", Field: "buckets", Value: s.Buckets, Detail: "must be at least 2: the bucket in progress is not counted"}
	}
	clk := clockOr(s.Clock)
	completed, err := window.NewRollingWindow(s.Buckets, s.Interval, window.WithClock(clk), window.IgnoreCurrentBucket())
	if err != nil {
		return nil, err // CheckWindow has refused what the window refuses
	}
	sh := &Shedder{
		fair:      newFairShare(),
		completed: completed,
		cpu:       s.CPU,
		threshold: s.CPUThreshold,
		coolOff:   max(int64(s.CoolOff), 0),
		width:     int64(s.Interval) / int64(s.Buckets),
		clock:     clk,
	}
	sh.lastShed.Store(math.MinInt64)
	sh.bound.Store(boundUnknown) // for bucket 0 at most: recomputed at once
	return sh, nil
}

// Acquire decides at the shedder's clock; see [Shedder.AcquireAt].
func (s *Shedder) Acquire(p *Permit, key string) Decision {
	return s.AcquireAt(s.clock.Now(), p, key)
}

// AcquireAt decides whether a request of the given key may enter at time
// now. If so it fills p, a zero or done [Permit], and the caller calls
// [Permit.DoneAt] when the request ends. A shed request is blocked with
// [Overloaded]. A nil p is blocked with [ExceedsLimit]: it could never be
// given back.
//
// The key says whose request it is, for the places to be shared fairly at
// the bound: the route, the client, or "" for all alike.
func (s *Shedder) AcquireAt(now int64, p *Permit, key string) Decision {
	if p == nil {
		return Decision{Reason: ExceedsLimit}
	}
	pk := s.fair.pick(key)
	usage := 1.0 // no CPU signal: as if warm, never hot
	if s.cpu != nil {
		usage = s.cpu()
	}
	hot := s.cpu != nil && usage >= s.threshold
	switch bound := s.maxInFlight(now); {
	case bound == math.MaxInt64 || usage < s.threshold/2 && !s.cooling(now):
		s.fair.take(pk.lane) // cool: no cap at all
	default:
		if !hot && !s.cooling(now) {
			bound *= 2 // warm: room for the traffic to grow
		}
		if !s.fair.admit(now, bound, pk) {
			// The cool-off runs from the last request shed with the CPU
			// hot: one shed in the cool-off itself must not renew it. One
			// store per shed request would make every one write the same
			// word: store only when it moves on by a bucket.
			if last := s.lastShed.Load(); hot && (last == math.MinInt64 || now-last >= s.width) {
				s.lastShed.Store(now)
			}
			return Decision{Reason: Overloaded}
		}
	}
	p.start, p.lane = now, pk.lane
	p.fill(byShedder, unsafe.Pointer(s), 1)
	return allowed
}

// hot reports whether the CPU is at or above the threshold.
func (s *Shedder) hot() bool { return s.cpu != nil && s.cpu() >= s.threshold }

// cooling reports whether now is within the cool-off after a request was
// shed with the CPU hot.
func (s *Shedder) cooling(now int64) bool {
	last := s.lastShed.Load()
	return last != math.MinInt64 && now-last < s.coolOff
}

// maxInFlight returns the bound for the bucket holding now, computing it if
// the bucket has changed since it was last computed. Two decisions that
// both see the change both compute it, from the same buckets; the later
// store wins, and both values are right. A window without a completed
// request keeps the bound learnt last: a service that completes nothing
// (a stalled database) is the most overloaded of all, not one to admit
// everything to.
func (s *Shedder) maxInFlight(now int64) int64 {
	b := uint64(max(now, 0)/s.width) & (1<<boundBits - 1)
	w := s.bound.Load()
	if w>>boundBits != b {
		v := s.computeBound(now)
		if v == boundUnknown {
			v = w & (1<<boundBits - 1)
		}
		w = b<<boundBits | v
		s.bound.Store(w)
	}
	if v := w & (1<<boundBits - 1); v != boundUnknown {
		return int64(v)
	}
	return math.MaxInt64
}

// computeBound reads the window's full buckets: the best completions in
// one, and the least average response time of one, and returns their
// product per bucket width, rounded up, at least 1; boundUnknown if no
// bucket holds a completed request.
func (s *Shedder) computeBound(now int64) uint64 {
	var best int64
	least := math.Inf(1)
	s.completed.ReduceAt(now, func(b window.Bucket) {
		if b.Count == 0 {
			return
		}
		best = max(best, b.Count)
		least = min(least, float64(b.Sum)/float64(b.Count))
	})
	if best == 0 {
		return boundUnknown
	}
	// least is in units of rtUnit, the width in ns.
	v := math.Ceil(float64(best) * least * rtUnit / float64(s.width))
	return uint64(min(max(v, 1), boundUnknown-1))
}

// rtUnit is the unit, in nanoseconds, of the response times a Shedder
// counts: a tenth of a microsecond, so that a bucket's sum holds 15 hours of
// response times, and a handler of 400 ns is told from one of 0.
const rtUnit = 100

// done ends the request of a permit: it leaves the requests in flight and, unless
// it is Ignored, its response time (now minus when it was admitted, to the
// nearest tenth of a microsecond, at least that) is counted in the window.
func (s *Shedder) done(p *Permit, now int64, timed bool, o Outcome) {
	s.fair.leave(p.lane)
	if o >= Ignored {
		return
	}
	if !timed {
		now = s.clock.Now()
	}
	s.completed.AddAt(now, max((now-p.start+rtUnit/2)/rtUnit, 1))
}

// inFlight returns the requests admitted and not yet done.
func (s *Shedder) inFlight() int64 { return s.fair.inflight.Load() }

// sheddingAt reports whether the shedder sheds at time now: the CPU is at
// or above its threshold, or it shed with the CPU there within the
// cool-off.
func (s *Shedder) sheddingAt(now int64) bool { return s.hot() || s.cooling(now) }

// stateAt is what the shedder has learnt at time now: the bound (the most
// requests in flight it admits while it sheds, before it shares them among
// keys, half what it admits without a CPU signal; math.MaxInt64 until it
// has learnt the service's capacity), and whether it sheds.
func (s *Shedder) stateAt(now int64) flowstate.Overload {
	return flowstate.Overload{Limit: s.maxInFlight(now), InFlight: s.inFlight(), Shedding: s.sheddingAt(now)}
}
