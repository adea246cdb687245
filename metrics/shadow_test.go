package metrics_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/metrics"
)

// shadowFamilies are the families of what shadow rules would have blocked.
var shadowFamilies = []string{"requests_would_block_total", "inbound_requests_would_block_total"}

func TestShadowRulesExportWhatTheyWouldHaveBlocked(t *testing.T) {
	g := newGuard(t, slidegate.WithClock(clock.NewManual(start)))
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "a", Limit: 2, Shadow: true},
		{Resource: "quiet", Limit: 2, Shadow: true},
		{Resource: "b", Limit: 100},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "a", "a", "a", "a", "b"} {
		if err := g.Do(context.Background(), name, func() error { return nil }, slidegate.WithInbound()); err != nil {
			t.Fatal(err)
		}
	}
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	if got := f.value(t, "slidegate_requests_would_block_total", labels("resource", "a", "reason", "rate_limited")); got != 3 {
		t.Errorf("a would have had %v blocked, want 3", got)
	}
	if got := f.value(t, "slidegate_inbound_requests_would_block_total", labels("reason", "rate_limited")); got != 3 {
		t.Errorf("inbound: %v would have been blocked, want 3", got)
	}
	if got := f.value(t, "slidegate_requests_allowed_total", labels("resource", "a")); got != 5 {
		t.Errorf("a allowed %v, want all 5", got)
	}
	// A resource a shadow rule names has every reason from the start;
	// one no shadow rule names, none.
	if got := len(f.labelValues("slidegate_requests_would_block_total", "reason")); got != 2*len(reasonLabels) {
		t.Errorf("%d would-block series, want every reason of a and quiet (%d)", got, 2*len(reasonLabels))
	}
	for _, r := range f.labelValues("slidegate_requests_would_block_total", "resource") {
		if r == "b" {
			t.Fatal("b, which no shadow rule names and nothing would have blocked, has would-block series")
		}
	}
	problems, err := testutil.CollectAndLint(metrics.NewCollector(g), "slidegate_requests_would_block_total", "slidegate_inbound_requests_would_block_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
