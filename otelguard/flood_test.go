package otelguard_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/otelguard"
)

// A flood of distinct names, and names longer than the guard keeps, adds
// no more series than the guard keeps resources: the rest is counted under
// slidegate.OtherResource, and every request is counted somewhere.
func TestFloodOfNamesIsBoundedByTheGuard(t *testing.T) {
	const max, names = 64, 10_000
	h := newHarness(t, slidegate.Rules{}, slidegate.WithMaxResources(max))
	long := strings.Repeat("x", bounds.MaxNameLength+1)
	for i := range names {
		name := fmt.Sprintf("/users/%d", i)
		if i%100 == 0 {
			name = long + name
		}
		e, err := h.enter(t, name)
		if err != nil {
			t.Fatal(err)
		}
		e.ExitAt(h.clk.Now()+int64(time.Millisecond), nil)
	}
	ms := h.collect(t)
	resources := map[string]bool{}
	var allowed int64
	for _, dp := range points(t, ms["slidegate.requests"]) {
		r, _ := dp.Attributes.Value(otelguard.ResourceKey)
		resources[r.AsString()] = true
		if o, _ := dp.Attributes.Value("slidegate.outcome"); o.AsString() == "allowed" {
			allowed += dp.Value
		}
	}
	if len(resources) > max+1 {
		t.Errorf("%d resources exported after %d names, want at most %d", len(resources), names, max+1)
	}
	if !resources[slidegate.OtherResource] {
		t.Errorf("no %s among %d resources", slidegate.OtherResource, len(resources))
	}
	for r := range resources {
		if len(r) > bounds.MaxNameLength {
			t.Errorf("a resource of %d bytes exported", len(r))
		}
	}
	if allowed != names {
		t.Errorf("%d allowed over all resources, want %d", allowed, names)
	}
	if n := len(ms["slidegate.request.duration"].Data.(metricdata.Histogram[float64]).DataPoints); n != len(resources) {
		t.Errorf("%d histograms for %d resources", n, len(resources))
	}
}
