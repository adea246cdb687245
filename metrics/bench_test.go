package metrics_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/metrics"
)

// BenchmarkCollect measures one Collect of a guard with 100 resources, each
// with traffic, without the registry's gathering and encoding.
func BenchmarkCollect(b *testing.B) {
	g, err := slidegate.New(slidegate.WithClock(clock.NewManual(start)))
	if err != nil {
		b.Fatal(err)
	}
	if err := g.SetRules(knownRules()); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		_ = g.Do(context.Background(), "resource "+strconv.Itoa(i), func() error { return nil })
	}
	c := metrics.NewCollector(g)
	ch := make(chan prometheus.Metric, 4096)
	b.ReportAllocs()
	for b.Loop() {
		c.Collect(ch)
		for len(ch) > 0 {
			<-ch
		}
	}
}

// BenchmarkCollectTopKeys measures one Collect of a guard with a resource
// whose per-key rule tracks as many keys as it can (512,
// each over half its limit), and with WithTopKeys(0), which reads none: the
// difference is what the key families cost a scrape.
func BenchmarkCollectTopKeys(b *testing.B) {
	g, _ := keyedGuard(b, 1)
	for i := range 2 * flowlimits.DefaultHotKeys {
		send(b, g, "GET /api", "user-"+strconv.Itoa(i), 2)
	}
	benchCollectTop(b, g)
}

// BenchmarkCollectManyKeys measures the key families of one Collect of a
// guard whose per-key rule tracks 4,096 keys, each at 60% of its limit:
// WithTopKeys(10) against WithTopKeys(0), which reads none.
func BenchmarkCollectManyKeys(b *testing.B) {
	g, _ := keyedGuard(b, 10)
	for i := range 4096 {
		send(b, g, "GET /api", "user-"+strconv.Itoa(i), 6)
	}
	if n := len(g.TopKeys("GET /api", 1<<20, false)); n != 4096 {
		b.Fatalf("%d keys tracked, want 4096", n)
	}
	benchCollectTop(b, g)
}

// benchCollectTop measures one Collect of g with WithTopKeys(DefaultTopKeys)
// and with WithTopKeys(0), which reads no keys.
func benchCollectTop(b *testing.B, g *slidegate.Guard) {
	for _, n := range []int{metrics.DefaultTopKeys, 0} {
		b.Run("top="+strconv.Itoa(n), func(b *testing.B) {
			c := metrics.NewCollector(g, metrics.WithTopKeys(n))
			ch := make(chan prometheus.Metric, 4096)
			b.ReportAllocs()
			for b.Loop() {
				c.Collect(ch)
				for len(ch) > 0 {
					<-ch
				}
			}
		})
	}
}
