package slidegate

import (
	"strconv"
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

// The same through a handle on the resource (Guard.Resource): no lookup
// of the name.
func BenchmarkResourceEnterExitQPSAndBreaker(b *testing.B) {
	r := benchGuard(b).Resource("a")
	for i := 0; i < b.N; i++ {
		e, _ := r.Enter(bg)
		e.Exit(nil)
	}
}

func BenchmarkResourceEnterExitQPSAndBreakerParallel(b *testing.B) {
	r := benchGuard(b).Resource("a")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e, _ := r.Enter(bg)
			e.Exit(nil)
		}
	})
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

// benchKeys are a million keys, as a public API's users or clients might
// be; benchmarks go through them in order (the guard's hash scatters them
// as it would any keys).
var benchKeys = func() []string {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	return keys
}()

// BenchmarkEnterExitPerKey is the per-key rule's cost: Enter+Exit on a
// resource with a QPS rule, without a key, against the same with a per-key
// QPS rule (limit 100/s per key) on keys drawn from a million, and on one
// key.
func BenchmarkEnterExitPerKey(b *testing.B) {
	for _, tc := range []struct {
		name string
		rule FlowRule
		key  func(i int) string
	}{
		{"no key", FlowRule{Resource: "a", Limit: 1 << 30}, nil},
		{"1M keys", FlowRule{Resource: "a", Limit: 100, PerKey: true}, func(i int) string { return benchKeys[i&(len(benchKeys)-1)] }},
		{"64K keys", FlowRule{Resource: "a", Limit: 100, PerKey: true}, func(i int) string { return benchKeys[i&(1<<16-1)] }},
		{"one key", FlowRule{Resource: "a", Limit: 1 << 30, PerKey: true}, func(int) string { return "user-1" }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g, err := New()
			if err != nil {
				b.Fatal(err)
			}
			if err := g.SetRules(Rules{Flow: []FlowRule{tc.rule}}); err != nil {
				b.Fatal(err)
			}
			enter := func(i int) {
				var e Entry
				if tc.key == nil {
					e, _ = g.Enter(bg, "a")
				} else {
					e, _ = g.Enter(bg, "a", WithKey(tc.key(i)))
				}
				e.Exit(nil)
			}
			for i := range len(benchKeys) {
				enter(i) // every key seen once: the sketch at its size
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				enter(i)
			}
		})
	}
}

// BenchmarkEnterExitPerKeyParallel is BenchmarkEnterExitPerKey from every
// processor at once: on one key (one shard's mutex) and on many.
func BenchmarkEnterExitPerKeyParallel(b *testing.B) {
	for _, tc := range []struct {
		name string
		keys int
	}{{"one key", 1}, {"64K keys", 1 << 16}} {
		b.Run(tc.name, func(b *testing.B) {
			g, err := New()
			if err != nil {
				b.Fatal(err)
			}
			if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: 1 << 30, PerKey: true}}}); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1) << 20)
				for pb.Next() {
					e, _ := g.Enter(bg, "a", WithKey(benchKeys[i%tc.keys]))
					e.Exit(nil)
					i++
				}
			})
		})
	}
}

// Inbound traffic, no rules: the resource's direction is marked, and the
// guard's inbound traffic counted too.
func BenchmarkEnterExitInbound(b *testing.B) {
	g, err := New()
	if err != nil {
		b.Fatal(err)
	}
	in := WithInbound()
	for i := 0; i < b.N; i++ {
		e, _ := g.Enter(bg, "a", in)
		e.Exit(nil)
	}
}

// An inbound request under the overload rules of a service: a shed rule on
// all the inbound traffic, the CPU cool, and an adaptive limit on its
// resource, each sharing its limit (by resource, by key).
func BenchmarkEnterExitOverloadRules(b *testing.B) {
	g, err := New(WithCPU(func() float64 { return 0.1 }))
	if err != nil {
		b.Fatal(err)
	}
	if err := g.SetRules(Rules{Flow: []FlowRule{
		{Resource: InboundResource, Type: ShedRule},
		{Resource: "a", Type: AdaptiveRule, Limit: 100},
	}}); err != nil {
		b.Fatal(err)
	}
	in := WithInbound()
	for i := 0; i < b.N; i++ {
		e, _ := g.Enter(bg, "a", in)
		e.Exit(nil)
	}
}
