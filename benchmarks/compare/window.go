package compare

import (
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afex/hystrix-go/hystrix/rolling"
	sbase "github.com/alibaba/sentinel-golang/core/base"
	sstat "github.com/alibaba/sentinel-golang/core/stat/base"
	"github.com/zeromicro/go-zero/core/collection"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/window"
)

// The sliding windows compared: 10 s in 100 buckets of 100 ms, read over
// their last second (10 buckets). hystrix's rolling.Number is fixed at ten
// buckets of 1 s.
const (
	ringBuckets = 100
	ringSpan    = 10 * time.Second
	bucketWidth = ringSpan / ringBuckets
	viewSpan    = time.Second
	viewBuckets = int(viewSpan / bucketWidth)
)

// The same windows in the units sentinel takes.
const (
	ringMs = uint32(ringSpan / time.Millisecond)
	viewMs = uint32(viewSpan / time.Millisecond)
)

// Baselines for operations that read the clock and for those given the time.
var (
	timeNow = Impl{Name: "time.Now", Role: Baseline, Setup: func(*testing.B) Op {
		return func() int64 { _ = time.Now(); return 0 }
	}}
	atomicAdd = Impl{Name: "atomic.AddInt64", Role: Baseline, Setup: func(*testing.B) Op {
		var n int64
		return func() int64 { atomic.AddInt64(&n, 1); return 0 }
	}}
)

// goZeroBucket is go-zero's own bucket type, which sums and counts.
type goZeroBucket = *collection.Bucket[int64]

// newGoZero returns a go-zero RollingWindow of size buckets of bucketWidth.
func newGoZero(size int) *collection.RollingWindow[int64, goZeroBucket] {
	return collection.NewRollingWindow[int64, goZeroBucket](
		func() goZeroBucket { return new(collection.Bucket[int64]) }, size, bucketWidth)
}

// addClock adds 1 at the current time, each implementation reading its own
// clock.
var addClock = &Shape{
	ID:   "AddClock",
	Name: "Add 1, clock read inside",
	Impls: []Impl{
		timeNow,
		{Name: "clock.System.Now", Setup: func(*testing.B) Op {
			return func() int64 { return clock.System.Now() }
		}},
		{Name: "slidegate Counter", Role: Ours, Setup: func(b *testing.B) Op {
			c := must(window.NewCounter(ringBuckets, ringSpan))
			return func() int64 { c.Add(window.Allowed, 1); return 0 }
		}},
		{Name: "sentinel BucketLeapArray", Setup: func(*testing.B) Op {
			a := sstat.NewBucketLeapArray(ringBuckets, ringMs)
			return func() int64 { a.AddCount(sbase.MetricEventPass, 1); return 0 }
		}},
		{Name: "go-zero RollingWindow", Setup: func(*testing.B) Op {
			rw := newGoZero(ringBuckets)
			return func() int64 { rw.Add(1); return 0 }
		}},
		{Name: "hystrix rolling.Number", Setup: func(*testing.B) Op {
			n := rolling.NewNumber()
			return func() int64 { n.Increment(1); return 0 }
		}},
	},
}

// addNow adds 1 at a time the caller read once. Of the other libraries, none
// exports such a method: sentinel's addCountWithTime is unexported.
var addNow = &Shape{
	ID:   "AddNow",
	Name: "Add 1, time given",
	Impls: []Impl{
		atomicAdd,
		{Name: "slidegate Counter", Role: Ours, Setup: func(b *testing.B) Op {
			c := must(window.NewCounter(ringBuckets, ringSpan))
			now := clock.System.Now()
			return func() int64 { c.AddAt(now, window.Allowed, 1); return 0 }
		}},
	},
}

// newFilledCounter returns a Counter over the ring with 1 added in each of
// its buckets before now, and a view of its last second.
func newFilledCounter(b *testing.B, now int64) (*window.Counter, *window.Counter) {
	c := must(window.NewCounter(ringBuckets, ringSpan))
	for i := range ringBuckets {
		c.AddAt(now-int64(i)*int64(bucketWidth), window.Allowed, 1)
	}
	return c, must(c.View(viewSpan))
}

// newFilledHystrix returns a rolling.Number with a value in each of its ten
// past seconds, so that Sum walks a full map as it does in service. The past
// seconds share the current bucket: its type is unexported.
func newFilledHystrix() *rolling.Number {
	n := rolling.NewNumber()
	n.Increment(1)
	for sec, bucket := range maps.Clone(n.Buckets) {
		for i := int64(1); i <= 10; i++ {
			n.Buckets[sec-i] = bucket
		}
	}
	return n
}

// sumClock reads the sum of the last second of a 10 s window at the current
// time, while a background goroutine keeps adding to it.
var sumClock = &Shape{
	ID:   "Sum1sClock",
	Name: "Sum of last 1 s of a 10 s window, clock read inside",
	Impls: []Impl{
		timeNow,
		{Name: "slidegate Counter.View", Role: Ours, Setup: func(b *testing.B) Op {
			c, v := newFilledCounter(b, clock.System.Now())
			keepAlive(b, func() { c.Add(window.Allowed, 1) })
			return func() int64 { return v.Sum(window.Allowed) }
		}},
		{Name: "sentinel SlidingWindowMetric", Setup: func(b *testing.B) Op {
			a := sstat.NewBucketLeapArray(ringBuckets, ringMs)
			m := must(sstat.NewSlidingWindowMetric(uint32(viewBuckets), viewMs, a))
			keepAlive(b, func() { a.AddCount(sbase.MetricEventPass, 1) })
			return func() int64 { return m.GetSum(sbase.MetricEventPass) }
		}},
		// go-zero has no views: Reduce a separate 1 s window.
		{Name: "go-zero RollingWindow 1 s", Setup: func(b *testing.B) Op {
			rw := newGoZero(viewBuckets)
			keepAlive(b, func() { rw.Add(1) })
			return func() int64 {
				var s int64
				rw.Reduce(func(bk goZeroBucket) { s += bk.Sum })
				return s
			}
		}},
		// hystrix sums its fixed 10 s, not 1 s.
		{Name: "hystrix rolling.Number 10 s", Setup: func(b *testing.B) Op {
			n := newFilledHystrix()
			keepAlive(b, func() { n.Increment(1) })
			return func() int64 { return int64(n.Sum(time.Now())) }
		}},
	},
}

// sumNow reads the same sum at a time the caller read once. Only hystrix
// also takes the time, and sums 10 s.
var sumNow = &Shape{
	ID:   "Sum1sNow",
	Name: "Sum of last 1 s of a 10 s window, time given",
	Impls: []Impl{
		atomicAdd,
		{Name: "slidegate Counter.View", Role: Ours, Setup: func(b *testing.B) Op {
			now := clock.System.Now()
			_, v := newFilledCounter(b, now)
			return func() int64 { return v.SumAt(now, window.Allowed) }
		}},
		{Name: "hystrix rolling.Number 10 s", Setup: func(*testing.B) Op {
			n := newFilledHystrix()
			now := time.Now()
			return func() int64 { return int64(n.Sum(now)) }
		}},
	},
}
