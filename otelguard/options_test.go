package otelguard_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/otelguard"
)

// Two guards sharing a MeterProvider, told apart by WithAttributes, each
// have their own series of a resource of the same name, histograms
// included.
func TestWithAttributesTellsGuardsApart(t *testing.T) {
	clk := clock.NewManual(1 << 40)
	var producers []sdkmetric.ManualReaderOption
	var guards []*slidegate.Guard
	for _, name := range []string{"api", "worker"} {
		g, err := slidegate.New(slidegate.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		p, err := otelguard.NewProducer(g, otelguard.WithAttributes(attribute.String("guard", name)))
		if err != nil {
			t.Fatal(err)
		}
		guards = append(guards, g)
		producers = append(producers, sdkmetric.WithProducer(p))
	}
	reader := sdkmetric.NewManualReader(producers...)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(bg)
	for i, name := range []string{"api", "worker"} {
		if _, err := otelguard.Register(guards[i], mp, otelguard.WithAttributes(attribute.String("guard", name))); err != nil {
			t.Fatal(err)
		}
		for range i + 1 {
			e, err := guards[i].EnterAt(bg, clk.Now(), "db")
			if err != nil {
				t.Fatal(err)
			}
			e.ExitAt(clk.Now(), nil)
		}
	}
	h := &harness{reader: reader}
	ms := h.collect(t)
	for i, name := range []string{"api", "worker"} {
		kv := []string{"guard", name, "slidegate.resource", "db", "slidegate.direction", "outbound"}
		if got := value(t, ms, "slidegate.requests", append(kv, "slidegate.outcome", "allowed")...); got != int64(i+1) {
			t.Errorf("%s: allowed %d, want %d", name, got, i+1)
		}
		if dp := histogram(t, ms, "slidegate.request.duration", kv...); dp.Count != uint64(i+1) {
			t.Errorf("%s: histogram count %d, want %d", name, dp.Count, i+1)
		}
		if got := value(t, ms, "slidegate.inbound.in_flight_requests", "guard", name); got != 0 {
			t.Errorf("%s: inbound in flight %d", name, got)
		}
	}
}

// Options that cannot be honoured are refused with an error naming them.
func TestOptionsRefused(t *testing.T) {
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider()
	defer mp.Shutdown(bg)
	for _, c := range []struct {
		opt  otelguard.Option
		want string
	}{
		{otelguard.WithAttributes(attribute.String("", "x")), "otelguard: attributes[0]: the key is empty"},
		{otelguard.WithAttributes(attribute.String("a", "x"), attribute.String("slidegate.resource", "x")), `otelguard: attributes[1] = "slidegate.resource": the namespace slidegate. is the instruments' own`},
	} {
		if _, err := otelguard.Register(g, mp, c.opt); err == nil || err.Error() != c.want {
			t.Errorf("Register: %v, want %q", err, c.want)
		}
		if _, err := otelguard.NewProducer(g, c.opt); err == nil || err.Error() != c.want {
			t.Errorf("NewProducer: %v, want %q", err, c.want)
		}
	}
	_, err = otelguard.Register(g, mp, otelguard.WithBuckets())
	if err == nil || !strings.Contains(err.Error(), "WithBuckets") {
		t.Errorf("Register with WithBuckets: %v", err)
	}
}
