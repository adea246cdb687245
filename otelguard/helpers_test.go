package otelguard_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/otelguard"
)

var (
	bg      = context.Background()
	errFail = errors.New("failed")
)

// harness is a guard on a manual clock, its instruments registered with a
// MeterProvider whose ManualReader also reads the guard's Producer.
type harness struct {
	g      *slidegate.Guard
	clk    *clock.Manual
	reader *sdkmetric.ManualReader
	reg    metric.Registration
}

func newHarness(t testing.TB, rules slidegate.Rules, opts ...slidegate.Option) *harness {
	t.Helper()
	clk := clock.NewManual(1 << 40)
	g, err := slidegate.New(append([]slidegate.Option{slidegate.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	p, err := otelguard.NewProducer(g)
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(bg) })
	reg, err := otelguard.Register(g, mp)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{g: g, clk: clk, reader: reader, reg: reg}
}

// collect collects once and returns the metrics by name.
func (h *harness) collect(t testing.TB) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(bg, &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			prev, dup := out[m.Name]
			if !dup {
				out[m.Name] = m
				continue
			}
			// Producers of several guards each send their histograms.
			a, okA := prev.Data.(metricdata.Histogram[float64])
			b, okB := m.Data.(metricdata.Histogram[float64])
			if !okA || !okB {
				t.Fatalf("metric %s twice in one collection", m.Name)
			}
			a.DataPoints = append(a.DataPoints, b.DataPoints...)
			prev.Data = a
			out[m.Name] = prev
		}
	}
	return out
}

// enter enters name at the clock's time.
func (h *harness) enter(t testing.TB, name string, opts ...slidegate.EntryOption) (slidegate.Entry, error) {
	t.Helper()
	return h.g.EnterAt(bg, h.clk.Now(), name, opts...)
}

// attrs makes an attribute set of key, value pairs.
func attrs(kv ...string) attribute.Set {
	var out []attribute.KeyValue
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, attribute.String(kv[i], kv[i+1]))
	}
	return attribute.NewSet(out...)
}

// points returns the int64 data points of m by attribute set, failing the
// test on a set seen twice.
func points(t testing.TB, m metricdata.Metrics) map[attribute.Distinct]metricdata.DataPoint[int64] {
	t.Helper()
	var dps []metricdata.DataPoint[int64]
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		dps = d.DataPoints
	case metricdata.Gauge[int64]:
		dps = d.DataPoints
	default:
		t.Fatalf("%s: data of type %T", m.Name, m.Data)
	}
	out := map[attribute.Distinct]metricdata.DataPoint[int64]{}
	for _, dp := range dps {
		if _, dup := out[dp.Attributes.Equivalent()]; dup {
			t.Fatalf("%s: attributes %v twice", m.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()))
		}
		out[dp.Attributes.Equivalent()] = dp
	}
	return out
}

// value returns the value of m's data point with the attributes kv, and
// fails the test if there is none.
func value(t testing.TB, ms map[string]metricdata.Metrics, name string, kv ...string) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	set := attrs(kv...)
	dp, ok := points(t, m)[set.Equivalent()]
	if !ok {
		t.Fatalf("%s: no data point with %v", name, set.Encoded(attribute.DefaultEncoder()))
	}
	return dp.Value
}

// histogram returns the histogram data point of m with the attributes kv.
func histogram(t testing.TB, ms map[string]metricdata.Metrics, name string, kv ...string) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	h, ok := ms[name].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s: data of type %T", name, ms[name].Data)
	}
	if h.Temporality != metricdata.CumulativeTemporality {
		t.Errorf("%s: temporality %v", name, h.Temporality)
	}
	set := attrs(kv...)
	var found []metricdata.HistogramDataPoint[float64]
	for _, dp := range h.DataPoints {
		if dp.Attributes.Equals(&set) {
			found = append(found, dp)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d data points with %v", name, len(found), set.Encoded(attribute.DefaultEncoder()))
	}
	return found[0]
}

// noNaN fails the test on any float value that is NaN or infinite.
func noNaN(t testing.TB, ms map[string]metricdata.Metrics) {
	t.Helper()
	for name, m := range ms {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
			for _, dp := range h.DataPoints {
				if math.IsNaN(dp.Sum) || math.IsInf(dp.Sum, 0) {
					t.Errorf("%s %v: sum %v", name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Sum)
				}
			}
		}
	}
}
