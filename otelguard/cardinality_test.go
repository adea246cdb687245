package otelguard_test

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/otelguard"
)

// The SDK folds the data points of an instrument beyond its cardinality
// limit (2,000 by default) into one overflow series: a guard with 700
// resources, 3 data points each, overflows the default and fits
// WithCardinalityLimit(0), as the package doc says.
func TestCardinalityLimitOfTheSDK(t *testing.T) {
	const resources = 700
	for _, c := range []struct {
		name     string
		opts     []sdkmetric.Option
		overflow bool
	}{
		{"default", nil, true},
		{"no limit", []sdkmetric.Option{sdkmetric.WithCardinalityLimit(0)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewManual(1 << 40)
			g, err := slidegate.New(slidegate.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(append(c.opts, sdkmetric.WithReader(reader))...)
			defer mp.Shutdown(bg)
			if _, err := otelguard.Register(g, mp); err != nil {
				t.Fatal(err)
			}
			h := &harness{g: g, clk: clk, reader: reader}
			for i := range resources {
				e, err := h.enter(t, fmt.Sprintf("r%d", i))
				if err != nil {
					t.Fatal(err)
				}
				e.ExitAt(clk.Now()+int64(time.Millisecond), nil)
			}
			var overflow bool
			named := map[string]bool{}
			for _, dp := range points(t, h.collect(t)["slidegate.requests"]) {
				if v, ok := dp.Attributes.Value(attribute.Key("otel.metric.overflow")); ok && v.AsBool() {
					overflow = true
				}
				if v, ok := dp.Attributes.Value(otelguard.ResourceKey); ok {
					named[v.AsString()] = true
				}
			}
			if overflow != c.overflow {
				t.Errorf("overflow %v, want %v", overflow, c.overflow)
			}
			if !c.overflow && len(named) != resources {
				t.Errorf("%d resources, want %d", len(named), resources)
			}
		})
	}
}
