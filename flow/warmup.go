package flow

import (
	"fmt"
	"math"
	"time"
)

// A warmUp is the cold-start curve of a QPS limiter, after Guava's
// SmoothWarmingUp. The limiter stores "coldness" S, in requests, between 0
// and max. At or below threshold the limit is the full limit; above it the
// time each request takes grows linearly, up to coldFactor times the stable
// time at max, where the limit is limit/coldFactor. The constants make
// warming from max to threshold at the curve's rate take exactly the
// warm-up period:
//
//	stable    = interval / limit
//	threshold = period / 2 / stable
//	max       = threshold + 2 × period / (stable × (1 + coldFactor))
//
// S changes once per bucket, when the bucket opens: the requests admitted in
// the bucket before use it up, and the capacity the last interval left
// unused gives it back, at max per period when the limiter is idle (Guava
// refills only for idle time too). Traffic that keeps the limiter full, at
// whatever limit it has reached, therefore warms it; idleness cools it.
type warmUp struct {
	limit     float64
	cold      float64 // coldFactor
	threshold float64
	max       float64
	refill    float64 // S regained per idle bucket
}

func newWarmUp(limit int64, interval, period time.Duration, coldFactor float64, buckets int) (*warmUp, error) {
	if period <= 0 {
		return nil, fmt.Errorf("%w: warm-up period = %v: must be positive", ErrInvalidConfig, period)
	}
	if !(coldFactor > 1) || math.IsInf(coldFactor, 0) {
		return nil, fmt.Errorf("%w: cold factor = %v: must be greater than 1", ErrInvalidConfig, coldFactor)
	}
	if limit == 0 {
		return nil, nil // nothing to warm up
	}
	stable := float64(interval) / float64(limit)
	w := &warmUp{
		limit:     float64(limit),
		cold:      coldFactor,
		threshold: float64(period) / 2 / stable,
	}
	w.max = w.threshold + 2*float64(period)/(stable*(1+coldFactor))
	w.refill = w.max * float64(interval) / float64(buckets) / float64(period)
	return w, nil
}

// limitAt returns the limit for coldness s: the full limit at or below the
// threshold, limit/coldFactor at max, and at least 1, so that a cold limiter
// can always admit the traffic that warms it.
func (w *warmUp) limitAt(s float64) int64 {
	if s <= w.threshold {
		return int64(w.limit)
	}
	slow := 1 + (w.cold-1)*(s-w.threshold)/(w.max-w.threshold)
	return max(int64(w.limit/slow), 1)
}

// next returns the coldness of a bucket opening buckets buckets after the
// open one, from the open one's coldness s and limit, the requests it
// admitted (used), and those admitted over the interval before the new bucket
// (traffic). The open bucket gives back the share of its limit the traffic
// left unused; the buckets skipped after it were idle.
func (w *warmUp) next(s float64, limit, used, traffic int64, buckets uint64) float64 {
	idle := 1 - min(float64(traffic)/float64(max(limit, 1)), 1)
	s += w.refill * (idle + float64(min(buckets, 1<<20)-1))
	return min(max(s-float64(used), 0), w.max)
}
