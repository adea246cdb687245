package otelguard_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/bounds"
)

// BenchmarkCollect measures one collection of the instruments and the
// histograms of a guard with n resources, each with some traffic ended.
func BenchmarkCollect(b *testing.B) {
	for _, n := range []int{10, 1000, bounds.DefaultMaxResources} {
		b.Run(fmt.Sprintf("resources=%d", n), func(b *testing.B) {
			h := newHarness(b, slidegate.Rules{
				Flow:     []slidegate.FlowRule{{Resource: "r0", Limit: 1000}},
				Breakers: []slidegate.BreakerRule{{Resource: "r0", Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5}},
			})
			for i := range n {
				e, err := h.enter(b, fmt.Sprintf("r%d", i))
				if err != nil {
					b.Fatal(err)
				}
				e.ExitAt(h.clk.Now()+int64(time.Duration(i+1)*time.Microsecond), nil)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				h.collect(b)
			}
		})
	}
}

// BenchmarkEnterExit is Enter+Exit with a QPS rule and a breaker, with and
// without the instruments registered: the same code, the same cost.
func BenchmarkEnterExit(b *testing.B) {
	rules := slidegate.Rules{
		Flow:     []slidegate.FlowRule{{Resource: "a", Limit: 1 << 30}},
		Breakers: []slidegate.BreakerRule{{Resource: "a", Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5}},
	}
	b.Run("registered", func(b *testing.B) {
		h := newHarness(b, rules)
		h.collect(b)
		b.ReportAllocs()
		for b.Loop() {
			e, _ := h.g.Enter(bg, "a")
			e.Exit(nil)
		}
	})
	b.Run("not registered", func(b *testing.B) {
		g, err := slidegate.New()
		if err != nil {
			b.Fatal(err)
		}
		if err := g.SetRules(rules); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			e, _ := g.Enter(bg, "a")
			e.Exit(nil)
		}
	})
}
