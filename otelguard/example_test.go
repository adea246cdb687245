package otelguard_test

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/otelguard"
)

// Register the guard's instruments with a MeterProvider, and give its
// Producer to the reader for the response-time histograms. A service
// would use a PeriodicReader with an OTLP exporter; the ManualReader here
// collects when asked.
func Example() {
	clk := clock.NewManual(0)
	g, _ := slidegate.New(slidegate.WithClock(clk))
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "orders", Limit: 2}}})

	p, _ := otelguard.NewProducer(g)
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	reg, _ := otelguard.Register(g, mp)
	defer reg.Unregister()

	for range 3 {
		if e, err := g.EnterAt(context.Background(), clk.Now(), "orders"); err == nil {
			e.ExitAt(clk.Now()+int64(20*time.Millisecond), nil)
		}
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					if dp.Value > 0 && m.Name == "slidegate.requests" {
						fmt.Printf("%s %s = %d\n", m.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value)
					}
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					if dp.Count > 0 {
						fmt.Printf("%s %s: count %d, sum %.3f %s\n", m.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Count, dp.Sum, m.Unit)
					}
				}
			}
		}
	}
	// Unordered output:
	// slidegate.requests slidegate.direction=outbound,slidegate.outcome=allowed,slidegate.resource=orders = 2
	// slidegate.requests slidegate.direction=outbound,slidegate.outcome=succeeded,slidegate.resource=orders = 2
	// slidegate.requests slidegate.direction=outbound,slidegate.outcome=blocked,slidegate.reason=rate_limited,slidegate.resource=orders = 1
	// slidegate.request.duration slidegate.direction=outbound,slidegate.resource=orders: count 2, sum 0.040 s
}
