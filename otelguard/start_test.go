package otelguard_test

import (
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/otelguard"
)

// A histogram starts when the Producer first sees its resource, and again
// when the guard evicted the resource and counts it afresh: a cumulative
// series whose count falls must have a new start, or a backend reads the
// fall as negative traffic.
func TestHistogramStartsAgainAfterEviction(t *testing.T) {
	clk := clock.NewManual(1 << 40)
	g, err := slidegate.New(slidegate.WithClock(clk), slidegate.WithMaxResources(1))
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := otelguard.NewProducer(g, otelguard.WithNow(func() time.Time { return wall }))
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(bg) })
	h := &harness{g: g, clk: clk, reader: reader}
	took := func(name string) {
		t.Helper()
		e, err := h.enter(t, name)
		if err != nil {
			t.Fatal(err)
		}
		e.ExitAt(clk.Now()+int64(time.Millisecond), nil)
	}
	point := func() metricdata.HistogramDataPoint[float64] {
		t.Helper()
		return histogram(t, h.collect(t), "slidegate.request.duration", "slidegate.resource", "a", "slidegate.direction", "outbound")
	}
	took("a")
	took("a")
	first := point()
	if first.Count != 2 || !first.StartTime.Equal(wall) {
		t.Fatalf("count %d start %v, want 2 and %v", first.Count, first.StartTime, wall)
	}
	wall = wall.Add(time.Minute)
	if again := point(); !again.StartTime.Equal(first.StartTime) || !again.Time.Equal(wall) {
		t.Errorf("unchanged: start %v time %v, want %v and %v", again.StartTime, again.Time, first.StartTime, wall)
	}
	// b evicts a, idle for a whole window; then a evicts b, and starts from 0.
	clk.Advance(11 * time.Second)
	took("b")
	clk.Advance(11 * time.Second)
	took("a")
	wall = wall.Add(time.Minute)
	after := point()
	if after.Count != 1 || !after.StartTime.Equal(wall) {
		t.Errorf("after eviction: count %d start %v, want 1 and %v", after.Count, after.StartTime, wall)
	}
}
