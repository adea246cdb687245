package metrics_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/metrics"
)

func TestResourceNamedLikeOtherDoesNotBreakTheScrape(t *testing.T) {
	// A request entered as "(other)" is counted in the guard's own
	// OtherResource, so the scrape has one series of that name.
	g, err := slidegate.New(slidegate.WithClock(clock.NewManual(start)), slidegate.WithMaxResources(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{slidegate.OtherResource, "x", "x", "y"} {
		if err := g.Do(ctx, name, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	if got := f.value(t, "slidegate_requests_allowed_total", labels("resource", slidegate.OtherResource)); got != 2 {
		t.Errorf("passed{(other)} = %v, want 2: the request entered as (other) and y, which found no room", got)
	}
	if got := f.summary(t, "slidegate_response_time_seconds", labels("resource", slidegate.OtherResource)).GetSampleCount(); got != 2 {
		t.Errorf("response_time_seconds_count{(other)} = %v, want 2", got)
	}
	if got := f.value(t, "slidegate_requests_allowed_total", labels("resource", "x")); got != 2 {
		t.Errorf("passed{x} = %v, want 2", got)
	}
}

func TestResourceNamesThatAreNotUTF8(t *testing.T) {
	g, err := slidegate.New(slidegate.WithClock(clock.NewManual(start)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"a\xff", "a\xfe", "b"} {
		if err := g.Do(ctx, name, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	if got := f.labelValues("slidegate_requests_allowed_total", "resource"); !slices.Equal(got, []string{"a\uFFFD", "b"}) {
		t.Errorf("resources %q, want the invalid bytes replaced", got)
	}
	if got := f.value(t, "slidegate_requests_allowed_total", labels("resource", "a\uFFFD")); got != 2 {
		t.Errorf("passed{a\\uFFFD} = %v, want 2: two names that read the same once made valid, added up", got)
	}
}

func TestNilGuardIsTheDefault(t *testing.T) {
	const name = "metrics_test: the default guard"
	if err := slidegate.Default().Do(context.Background(), name, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	f := newScraper(t, metrics.NewCollector(nil)).scrape(t)
	if got := f.value(t, "slidegate_requests_allowed_total", labels("resource", name)); got < 1 {
		t.Errorf("passed{%s} = %v, want at least 1", name, got)
	}
}

func TestConcurrentScrapesWhileTrafficFlows(t *testing.T) {
	clk := clock.NewManual(start)
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(knownRules()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(g))
	ctx := context.Background()
	done := make(chan struct{})
	writers := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { writers <- struct{}{} }()
			names := []string{"orders", "db", "paced", "search", "free"}
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if e, err := g.Enter(ctx, names[(i+w)%len(names)], slidegate.WithInbound()); err == nil {
					if w == 0 && i%16 == 0 {
						clk.Advance(time.Millisecond)
					}
					e.Exit(nil)
				}
			}
		}()
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			var last float64
			for range 20 {
				mfs, err := reg.Gather()
				if err != nil {
					errs <- err
					return
				}
				// The inbound counters only grow.
				var total float64
				for _, mf := range mfs {
					if mf.GetName() == "slidegate_inbound_requests_allowed_total" || mf.GetName() == "slidegate_inbound_requests_blocked_total" {
						for _, m := range mf.GetMetric() {
							total += m.GetCounter().GetValue()
						}
					}
				}
				if total < last {
					errs <- fmt.Errorf("inbound requests went from %v to %v", last, total)
					return
				}
				last = total
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(done)
	for range 4 {
		<-writers
	}
}
