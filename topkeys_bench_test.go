package slidegate

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// BenchmarkTopKeys measures TopKeys(n) of a resource whose per-key rule
// tracks 4,096 keys, each at 60% of its limit: what a scrape or a dashboard sample
// asks of it.
func BenchmarkTopKeys(b *testing.B) {
	clk := clock.NewManual(int64(time.Hour))
	g, err := New(WithClock(clk))
	if err != nil {
		b.Fatal(err)
	}
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "api", Limit: 10, PerKey: true}}}); err != nil {
		b.Fatal(err)
	}
	for i := range 4096 {
		for range 6 {
			if e, err := g.EnterAt(context.Background(), clk.Now(), "api", WithKey(fmt.Sprint("user-", i))); err == nil {
				e.ExitAt(clk.Now(), nil)
			}
		}
	}
	if n := len(g.TopKeysAt(clk.Now(), "api", math.MaxInt, false)); n != 4096 {
		b.Fatalf("%d keys tracked, want 4096", n)
	}
	for _, n := range []int{10, math.MaxInt} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g.TopKeysAt(clk.Now(), "api", n, false)
			}
		})
	}
}
