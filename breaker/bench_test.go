package breaker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// Baselines for the same run; see BENCHMARKS.md.

var sinkTime time.Time
var sinkInt int64

func BenchmarkBaselineTimeNow(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sinkTime = time.Now()
	}
}

func BenchmarkBaselineClockNow(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sinkInt += clock.System.Now()
	}
}

func BenchmarkBaselineAtomicAdd(b *testing.B) {
	var x atomic.Int64
	for i := 0; i < b.N; i++ {
		x.Add(1)
	}
}

func mustSRE(b *testing.B, opts ...Option) *SRE {
	a, err := NewSRE(opts...)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func mustCircuit(b *testing.B, s Strategy, opts ...Option) *Circuit {
	c, err := NewCircuit(s, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// Allow and settle a request to a healthy dependency: the breakers' common
// case.
func BenchmarkSREAllowSucceed(b *testing.B) {
	a := mustSRE(b)
	for i := 0; i < b.N; i++ {
		p, _ := a.Allow()
		p.settle(Success)
	}
}

func BenchmarkSREDo(b *testing.B) {
	a := mustSRE(b)
	ok := func() error { return nil }
	for i := 0; i < b.N; i++ {
		_ = a.Do(bg, ok)
	}
}

// A failing dependency: every request reads the window's totals and draws;
// about half are blocked.
func BenchmarkSREFailing(b *testing.B) {
	a := mustSRE(b, withRandom(func() float64 { return 0.5 }))
	for i := 0; i < b.N; i++ {
		if p, err := a.Allow(); err == nil {
			p.settle(Failure)
		}
	}
}

func BenchmarkSREAllowSucceedParallel(b *testing.B) {
	a := mustSRE(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := a.Allow()
			p.settle(Success)
		}
	})
}

func BenchmarkCircuitAllowSucceed(b *testing.B) {
	c := mustCircuit(b, ErrorRatio(0.5))
	for i := 0; i < b.N; i++ {
		p, _ := c.Allow()
		p.settle(Success)
	}
}

// With time given: the breaker's own work, no clock read.
func BenchmarkCircuitAllowSucceedAt(b *testing.B) {
	c := mustCircuit(b, ErrorRatio(0.5))
	now := clock.System.Now()
	for i := 0; i < b.N; i++ {
		p, _ := c.AllowAt(now)
		p.recordAt(now, Success)
	}
}

func BenchmarkCircuitDo(b *testing.B) {
	c := mustCircuit(b, ErrorRatio(0.5))
	ok := func() error { return nil }
	for i := 0; i < b.N; i++ {
		_ = c.Do(bg, ok)
	}
}

// SlowRatio reads the clock twice: to allow and to settle.
func BenchmarkCircuitSlowAllowSucceed(b *testing.B) {
	c := mustCircuit(b, SlowRatio(time.Second, 0.5))
	for i := 0; i < b.N; i++ {
		p, _ := c.Allow()
		p.settle(Success)
	}
}

// A failure reads the window's totals to check the strategy.
func BenchmarkCircuitAllowFail(b *testing.B) {
	c := mustCircuit(b, ErrorCount(1<<40))
	for i := 0; i < b.N; i++ {
		p, _ := c.Allow()
		p.settle(Failure)
	}
}

// ConsecutiveFailures and TripWhen read the window and the run on every
// failure, as CircuitAllowFail does.
func BenchmarkCircuitConsecutiveFailuresAllowFail(b *testing.B) {
	c := mustCircuit(b, ConsecutiveFailures(1<<40))
	for i := 0; i < b.N; i++ {
		p, _ := c.Allow()
		p.settle(Failure)
	}
}

func BenchmarkCircuitTripWhenAllowFail(b *testing.B) {
	c := mustCircuit(b, TripWhen(func(n Stats) bool { return n.ConsecutiveFailures < 0 }))
	for i := 0; i < b.N; i++ {
		p, _ := c.Allow()
		p.settle(Failure)
	}
}

// An open circuit blocking.
func BenchmarkCircuitOpen(b *testing.B) {
	c := mustCircuit(b, ErrorCount(1), WithMinRequests(1), WithOpenTimeout(time.Hour, 0))
	p, _ := c.Allow()
	p.settle(Failure)
	for i := 0; i < b.N; i++ {
		_, _ = c.Allow()
	}
}

func BenchmarkCircuitAllowSucceedParallel(b *testing.B) {
	c := mustCircuit(b, ErrorRatio(0.5))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := c.Allow()
			p.settle(Success)
		}
	})
}
