package metrics_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
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
