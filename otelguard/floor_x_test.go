package otelguard_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func BenchmarkXFloor(b *testing.B) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m := mp.Meter("x")
	c, _ := m.Int64ObservableCounter("c")
	u, _ := m.Int64ObservableUpDownCounter("u")
	const n = 4096
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
	m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
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
		reader.Collect(context.Background(), &rm)
	}
}
