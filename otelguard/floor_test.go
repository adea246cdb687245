package otelguard_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/slidegate/slidegate/internal/bounds"
)

// BenchmarkSDKFloor is what the SDK alone takes to collect the data points
// the instruments observe for 4,096 resources (allowed, succeeded, failed
// and in flight for each), their attribute sets made beforehand: the floor
// of a collection through a MeterProvider, whatever reads the guard.
func BenchmarkSDKFloor(b *testing.B) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m := mp.Meter("x")
	c, _ := m.Int64ObservableCounter("c")
	u, _ := m.Int64ObservableUpDownCounter("u")
	const n = bounds.DefaultMaxResources
	sets := make([][4]metric.ObserveOption, n)
	for i := range sets {
		for j, o := range []string{"allowed", "succeeded", "failed", ""} {
			kv := []attribute.KeyValue{attribute.String("slidegate.resource", fmt.Sprintf("r%d", i)), attribute.String("slidegate.direction", "outbound")}
			if o != "" {
				kv = append(kv, attribute.String("slidegate.outcome", o))
			}
			s := attribute.NewSet(kv...)
			sets[i][j] = metric.WithAttributeSet(s)
		}
	}
	_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i := range sets {
			o.ObserveInt64(c, 1, sets[i][0])
			o.ObserveInt64(c, 1, sets[i][1])
			o.ObserveInt64(c, 1, sets[i][2])
			o.ObserveInt64(u, 1, sets[i][3])
		}
		return nil
	}, c, u)
	var rm metricdata.ResourceMetrics
	b.ReportAllocs()
	for b.Loop() {
		_ = reader.Collect(context.Background(), &rm)
	}
}
