package flow

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/internal/timegrid"
)

// A warmUp is the cold-start curve of a QPS limiter or of a Throttle's meter,
// after Guava's SmoothWarmingUp. The limiter stores coldness S, in requests,
// between 0 and max. At or below threshold its rate is the full limit; above
// it the time each request takes grows linearly, up to coldFactor times the
// stable time at max, where the rate is limit/coldFactor. The constants make
// S fall from max to threshold in exactly the warm-up period when it falls
// at the curve's rate, rateAt(S) per interval:
//
//	stable    = interval / limit
//	threshold = period / 2 / stable
//	max       = threshold + 2 × period / (stable × (1 + coldFactor))
//
// S lives on its own clock, the limiter's buckets. It changes once per
// bucket, when the bucket closes (QPS.nextCold), from how much of the
// bucket's capacity the limiter used: a fully used bucket warms it by the
// curve's rate over one bucket, rateAt(S)/k for k buckets per interval, and
// a fully idle one cools it by refill, max/period per bucket width, so an idle
// limiter is fully cold after period (Guava refills for idle time too). So
// steady overload warms it along the curve in period, whatever the limit's
// rounding, and nothing warms it faster. How use is measured depends on the
// limiter:
//
// A QPS limiter's window of k+1 buckets holds its limit l under steady
// overload, allowed unevenly: a bucket may take its whole room at once
// and the next k none. So a bucket's use is read from its window as well as
// from itself:
//
//	use = min(max(window, (k+1) × allowed) / l, 1)
//	S  += refill × (1 - use) - use × rateAt(S) / k
//
// A bucket whose window holds l, however long ago the requests in it were
// allowed, was not idle: it had no room. And a bucket that alone allowed
// its share of the limit, l/(k+1), was not idle either, though its window
// still holds less than l because the limit has just risen faster than the
// traffic could fill it. Only room left in both senses cools. Light traffic
// of x requests per interval spread evenly has use x(k+1)/(k l), the share
// of the capacity, k/(k+1) of l, it takes.
//
// A Throttle gives evenly spaced places, each taking the time the curve
// gives it (pace), so its use is measured in time, as Guava's is: every
// place given drains 1, and the part of the bucket its places do not cover
// is idle. Coverage beyond a bucket's end (a place given late in it, or a
// queue of places reserved ahead) carries over to the buckets after, so a
// queue counts as use however many buckets it spans.
//
// Invariants: 0 <= S <= max. S falls only in a bucket with use, by at most
// rateAt(S)/k for a QPS limiter, and rises only in a bucket with idle
// capacity, by at most refill. The limit of a QPS limiter's bucket,
// limitAt(S), is fixed when the bucket opens and lies in
// [floor(limit/coldFactor), limit], where the constructor makes
// limit/coldFactor at least 1.
type warmUp struct {
	limit     float64
	cold      float64 // coldFactor
	threshold float64
	max       float64
	refill    float64 // S regained per idle bucket: max × width / period
	buckets   float64 // k
	stable    float64 // nanoseconds per request at the full limit
	slope     float64 // stable × (coldFactor-1) / (2 × (max-threshold)), for pace
	width     float64 // nanoseconds per bucket
	paced     bool    // a Throttle's meter: use is measured in time
	one       int64   // ceil(interval / limit): one place's time at the full limit
	// The open bucket's limit and coldness (float64 bits), and, for a paced
	// meter, the coverage by places, in bucket widths, it inherits at its
	// start (float64 bits), and the time one place takes at its coldness
	// (pace rounded up, at least one). The caller that opens a bucket stores
	// them before publishing it (opened); buckets open one at a time, so one
	// word each serves them all. A caller may read them for a bucket opened
	// after its own: a decision then fails its compare-and-swap on the
	// sealed count word and decides again (see QPS), and a Throttle paces by
	// a newer coldness, as if it had come a little later.
	bucketLimit atomic.Int64
	bucketCold  atomic.Uint64
	carry       atomic.Uint64
	onePlace    atomic.Int64
}

// minWarmUpIntervals and minWarmUpBuckets bound the warm-up period from
// below. A limit holds over an interval: a QPS limiter under overload allows
// in an interval what its limit is at the interval's end, so a warm-up of one
// interval would have the first interval allow the full limit; with two, it
// allows at most about 1.4 × limit/coldFactor, the curve's own rise. And the
// limit changes once per bucket, each set from the bucket before, so the
// warm-up lags by a bucket or two: ten buckets keep that lag within a fifth
// of the period.
const (
	minWarmUpIntervals = 2
	minWarmUpBuckets   = 10
)

// newWarmUp returns the curve of a limiter of limit requests per interval in
// the given number of buckets (paced for a Throttle's meter), or nil for
// limit 0, which has nothing to warm up. A configuration it cannot honor is
// a *configError: see QPSSettings.WarmUp.
func newWarmUp(limit int64, interval, period time.Duration, coldFactor float64, buckets int, paced bool) (*warmUp, error) {
	if period <= 0 {
		return nil, &configError{Pkg: "flow", Field: "warm_up", Value: period, Detail: "must be positive"}
	}
	if !(coldFactor > 1) || math.IsInf(coldFactor, 0) {
		return nil, &configError{Pkg: "flow", Field: "cold_factor", Value: coldFactor, Detail: "must be greater than 1"}
	}
	// period < n × d is period/n < d in integers, which cannot overflow.
	if period/minWarmUpIntervals < interval {
		return nil, &configError{Pkg: "flow", Field: "warm_up", Value: period, Detail: fmt.Sprintf(
			"must be at least %d intervals of %v: a limit holds over an interval, so a shorter warm-up would let the first interval allow far above the cold limit",
			minWarmUpIntervals, interval)}
	}
	width := interval / time.Duration(buckets)
	if period/minWarmUpBuckets < width {
		return nil, &configError{Pkg: "flow", Field: "warm_up", Value: period, Detail: fmt.Sprintf(
			"must be at least %d buckets of %v: the limit changes once per bucket, so a shorter warm-up is a few steps that overshoot the period",
			minWarmUpBuckets, width)}
	}
	if limit == 0 {
		return nil, nil
	}
	if float64(limit)/coldFactor < 1 {
		return nil, &configError{Pkg: "flow", Field: "cold_factor", Value: coldFactor, Detail: fmt.Sprintf(
			"must be at most the limit, %d, so that the cold limit is at least 1 request per interval", limit)}
	}
	stable := float64(interval) / float64(limit)
	w := &warmUp{
		limit:     float64(limit),
		cold:      coldFactor,
		threshold: float64(period) / 2 / stable,
		buckets:   float64(buckets),
		stable:    stable,
		width:     float64(width),
		paced:     paced,
	}
	w.max = w.threshold + 2*float64(period)/(stable*(1+coldFactor))
	w.refill = w.max * float64(width) / float64(period)
	w.slope = stable * (coldFactor - 1) / (2 * (w.max - w.threshold))
	w.one = (int64(interval) + limit - 1) / limit
	w.opened(0, w.max, 0)
	return w, nil
}

// opened records the state of a bucket opening with the given limit,
// coldness cold and, for a paced meter, coverage carry. The caller that opens
// the bucket calls it before publishing the bucket.
func (w *warmUp) opened(limit int64, cold, carry float64) {
	w.bucketLimit.Store(limit)
	w.bucketCold.Store(math.Float64bits(cold))
	if !w.paced {
		return
	}
	w.carry.Store(math.Float64bits(carry))
	w.onePlace.Store(w.placeTime(1, cold, w.one))
}

// placeTime returns the time n places take at coldness s, in whole
// nanoseconds: pace rounded up, and at least least, the time they take at
// the full limit, which it is at or below the threshold.
func (w *warmUp) placeTime(n int64, s float64, least int64) int64 {
	if s <= w.threshold {
		return least
	}
	p := w.pace(n, s)
	if p >= timegrid.MaxTime {
		return timegrid.MaxTime
	}
	c := least
	if p > float64(c) {
		c = int64(p)
		if float64(c) < p {
			c++
		}
	}
	return c
}

// rateAt returns the curve's rate at coldness s, in requests per interval:
// the full limit at or below the threshold, limit/coldFactor at max.
func (w *warmUp) rateAt(s float64) float64 {
	if s <= w.threshold {
		return w.limit
	}
	return w.limit / (1 + (w.cold-1)*(s-w.threshold)/(w.max-w.threshold))
}

// limitAt returns the limit for coldness s: the curve's rate rounded down,
// and at least 1.
func (w *warmUp) limitAt(s float64) int64 {
	return max(int64(w.rateAt(s)), 1)
}

// stepWindow returns a QPS limiter's coldness after a bucket that opened
// with coldness s and the given limit, allowed used requests, and closed
// with window requests in its window of k+1 buckets.
func (w *warmUp) stepWindow(s float64, limit, used, window int64) float64 {
	l := float64(max(limit, 1))
	use := min(max(float64(window), float64(used)*(w.buckets+1))/l, 1)
	s += w.refill*(1-use) - use*w.rateAt(s)/w.buckets
	return min(max(s, 0), w.max)
}

// pace returns the time n places take at coldness s, in nanoseconds: as in
// Guava, the integral of the time per request, stable × (1 + (coldFactor-1)
// × (x-threshold)/(max-threshold)) above the threshold and stable below it,
// over the coldness x the places use, from s down to s-n. The places of one
// bucket all start from its coldness s.
func (w *warmUp) pace(n int64, s float64) float64 {
	x, f := s-w.threshold, float64(n)
	switch {
	case x >= f: // all n above the threshold: (x² - (x-n)²) = n(2x - n)
		return f * (w.stable + w.slope*(2*x-f))
	case x > 0: // the first x above it
		return w.stable*f + w.slope*x*x
	}
	return w.stable * f
}

// stepPaced returns a Throttle meter's coldness and carried coverage after
// a bucket that opened with coldness s and coverage carry and gave used
// places, followed by skipped buckets that gave none.
func (w *warmUp) stepPaced(s, carry float64, used int64, skipped uint64) (float64, float64) {
	carry += float64(used) * w.pace(1, s) / w.width
	s += w.refill*max(1-carry, 0) - float64(used)
	s = max(s, 0)
	carry = max(carry-1, 0)
	idle := max(float64(skipped)-carry, 0)
	carry = max(carry-float64(skipped), 0)
	return min(s+w.refill*idle, w.max), carry
}

// nextCold returns the coldness of bucket bn, which opens after bucket ob
// closes having allowed used requests and lent lent places to bucket ob+1,
// and, for a paced meter, the coverage bn inherits.
//
// For a QPS limiter it steps the curve once for ob, and once for each bucket
// skipped between them: those allowed nothing but ob+1 what ob lent, and
// their windows still held what ob's did, less what left them one bucket at
// a time. After k+1 skipped buckets the windows are empty, and every further
// one is fully idle. It reads ob's window from the slots, and ob's base,
// limit and coldness, which advance calls it in time for: before it writes
// bn's, while every bucket of ob's window is still in its slot.
func (q *QPS) nextCold(ob, bn uint64, used, lent int64) (float64, float64) {
	w := q.warm
	if ob == 0 {
		return w.max, 0 // the limiter starts cold
	}
	cold := math.Float64frombits(w.bucketCold.Load())
	skipped := bn - ob - 1
	if w.paced {
		return w.stepPaced(cold, math.Float64frombits(w.carry.Load()), used, skipped)
	}
	window := q.base.Load() + used
	cold = w.stepWindow(cold, w.bucketLimit.Load(), used, window)
	for j := uint64(1); j <= min(skipped, q.k+1); j++ {
		// Bucket ob+j-k-1 leaves the window as ob+j enters it.
		if leaving := ob + j - q.k - 1; leaving <= ob {
			if c := q.slots[leaving&q.mask].Load(); holds(c, leaving) {
				window -= int64(c & countMask)
			}
		} else if leaving == ob+1 {
			window -= lent
		}
		var n int64
		if j == 1 {
			n = lent
		}
		window += n
		cold = w.stepWindow(cold, w.limitAt(cold), n, window)
	}
	if skipped > q.k+1 {
		cold = min(cold+w.refill*float64(skipped-q.k-1), w.max)
	}
	return cold, 0
}
