package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/metrics"
)

// TestIdleResourcesExportNoNaN scrapes resources with no request ended in
// the last 10 s, before any traffic and after the known traffic has aged
// out of every window: a NaN would poison every sum(), avg() and max() a
// fleet's dashboard takes over them. The response-time quantiles and
// maximum are left out instead, and the summary keeps its _sum and _count.
func TestIdleResourcesExportNoNaN(t *testing.T) {
	fresh := newGuard(t, slidegate.WithClock(clock.NewManual(start)))
	if err := fresh.SetRules(knownRules()); err != nil {
		t.Fatal(err)
	}
	aged, clk := knownTraffic(t)
	clk.Advance(20 * time.Second) // past the last 10 s of counts and latencies

	for _, c := range []struct {
		name  string
		guard *slidegate.Guard
		count uint64 // orders' requests ended since the statistics began
	}{{"before any traffic", fresh, 0}, {"after the traffic aged out", aged, 3}} {
		s := newScraper(t, metrics.NewCollector(c.guard))
		if body := s.body(t); strings.Contains(body, "NaN") {
			t.Errorf("%s: the scrape has NaN:\n%s", c.name, body)
		}
		f := s.scrape(t)
		for _, prefix := range []string{"slidegate_", "slidegate_inbound_"} {
			lbl := labels()
			if prefix == "slidegate_" {
				lbl = labels("resource", "orders")
			}
			if m := f.find(prefix+"response_time_max_seconds", lbl); m != nil {
				t.Errorf("%s: %sresponse_time_max_seconds%v = %v, want no series while no request ended", c.name, prefix, lbl, m.GetGauge().GetValue())
			}
			sum := f.summary(t, prefix+"response_time_seconds", lbl)
			if n := len(sum.GetQuantile()); n != 0 {
				t.Errorf("%s: %sresponse_time_seconds%v has %d quantiles, want none while no request ended", c.name, prefix, lbl, n)
			}
			if got := sum.GetSampleCount(); got != c.count {
				t.Errorf("%s: %sresponse_time_seconds_count%v = %d, want %d, the total kept", c.name, prefix, lbl, got, c.count)
			}
		}
	}
}
