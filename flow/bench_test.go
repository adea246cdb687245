package flow

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// Baselines for the same run; see BENCHMARKS.md.

var sinkTime time.Time

func BenchmarkBaselineTimeNow(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sinkTime = time.Now()
	}
}

func BenchmarkBaselineAtomicAdd(b *testing.B) {
	var x atomic.Int64
	for i := 0; i < b.N; i++ {
		x.Add(1)
	}
}

// An unreachable limit, so that every decision allows and counts.
func BenchmarkQPSAllow(b *testing.B) {
	q := mustQPS(b, MaxLimit, time.Second)
	for i := 0; i < b.N; i++ {
		q.Allow()
	}
}

func BenchmarkQPSAllowAt(b *testing.B) {
	q := mustQPS(b, MaxLimit, time.Second)
	now := clock.System.Now()
	for i := 0; i < b.N; i++ {
		q.AllowAt(now)
	}
}

// A limit far below the offered rate: most decisions block.
func BenchmarkQPSAllowBlocking(b *testing.B) {
	q := mustQPS(b, 1000, time.Second)
	for i := 0; i < b.N; i++ {
		q.Allow()
	}
}

func BenchmarkQPSAllowParallel(b *testing.B) {
	q := mustQPS(b, MaxLimit, time.Second)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			q.Allow()
		}
	})
}

func BenchmarkConcurrencyAcquireRelease(b *testing.B) {
	c, _ := NewConcurrency(100)
	for i := 0; i < b.N; i++ {
		var p Permit
		c.Acquire(&p)
		p.Release()
	}
}

func BenchmarkConcurrencyAcquireReleaseParallel(b *testing.B) {
	c, _ := NewConcurrency(100)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			var p Permit
			c.Acquire(&p)
			p.Release()
		}
	})
}

func BenchmarkThrottleAllow(b *testing.B) {
	th, _ := NewThrottle(MaxLimit, time.Second, time.Hour)
	for i := 0; i < b.N; i++ {
		th.Allow()
	}
}

func BenchmarkQPSAllowPriorityBorrowing(b *testing.B) {
	c := clock.NewManual(0)
	q := mustQPS(b, 1000, time.Second, WithClock(c))
	for i := 0; i < b.N; i++ {
		if i%64 == 0 {
			c.Advance(time.Millisecond)
		}
		q.AllowPriority(time.Second)
	}
}

// With warm-up, an unreachable limit: every decision allows, and the meter
// warms. Buckets open on the system clock, once per bucket width.
func BenchmarkQPSAllowWarmUp(b *testing.B) {
	q := mustQPS(b, MaxLimit, time.Second, WithWarmUp(10*time.Second, 3))
	for i := 0; i < b.N; i++ {
		q.Allow()
	}
}

// With warm-up and a limit far below the offered rate: most decisions block.
func BenchmarkQPSAllowWarmUpBlocking(b *testing.B) {
	q := mustQPS(b, 1000, time.Second, WithWarmUp(10*time.Second, 3))
	for i := 0; i < b.N; i++ {
		q.Allow()
	}
}

// With warm-up, a bucket opens every 64 decisions, so the cost of opening
// one (and of updating the coldness) shows.
func BenchmarkQPSAllowAtWarmUpOpeningBuckets(b *testing.B) {
	q := mustQPS(b, 100000, time.Second, WithWarmUp(10*time.Second, 3))
	width := int64(time.Second / DefaultBuckets)
	for i := 0; i < b.N; i++ {
		q.AllowAt(int64(i/64) * width)
	}
}

func BenchmarkThrottleAllowWarmUp(b *testing.B) {
	th, _ := NewThrottle(MaxLimit, time.Second, time.Hour, WithWarmUp(10*time.Second, 3))
	for i := 0; i < b.N; i++ {
		th.Allow()
	}
}
