package slidegate

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

// The target: a QPS rule and a breaker on one resource, every
// request admitted.
func benchGuard(b *testing.B) *Guard {
	g, err := New()
	if err != nil {
		b.Fatal(err)
	}
	err = g.SetRules(Rules{
		Flow:     []FlowRule{{Resource: "a", Limit: 1 << 30}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func BenchmarkEnterExitQPSAndBreaker(b *testing.B) {
	g := benchGuard(b)
	for i := 0; i < b.N; i++ {
		e, _ := g.Enter(bg, "a")
		e.Exit(nil)
	}
}

func BenchmarkEnterExitQPSAndBreakerParallel(b *testing.B) {
	g := benchGuard(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e, _ := g.Enter(bg, "a")
			e.Exit(nil)
		}
	})
}

func BenchmarkEnterExitNoRules(b *testing.B) {
	g, err := New()
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		e, _ := g.Enter(bg, "a")
		e.Exit(nil)
	}
}

func BenchmarkDoQPSAndBreaker(b *testing.B) {
	g := benchGuard(b)
	fn := func() error { return nil }
	for i := 0; i < b.N; i++ {
		_ = g.Do(bg, "a", fn)
	}
}
