package metrics_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/exported"
	"github.com/slidegate/slidegate/metrics"
)

// The families every scrape of a guard with resources, breakers and rules
// holds, without the namespace.
var allFamilies = []string{
	"breaker_block_ratio",
	"breaker_rule_threshold",
	"breaker_state",
	"flow_rule_limit",
	"inbound_request_duration_seconds",
	"inbound_requests_allowed_total",
	"inbound_requests_blocked_total",
	"inbound_requests_failed_total",
	"inbound_requests_in_flight",
	"inbound_requests_succeeded_total",
	"inbound_response_time_max_seconds",
	"inbound_response_time_seconds",
	"key_memory_bytes",
	"key_memory_limit_bytes",
	"request_duration_seconds",
	"requests_allowed_total",
	"requests_blocked_total",
	"requests_failed_total",
	"requests_in_flight",
	"requests_succeeded_total",
	"response_time_max_seconds",
	"response_time_seconds",
}

// clusterFamilies are the families of a guard whose cluster reports its
// health.
var clusterFamilies = []string{
	"cluster_failures_total",
	"cluster_fallbacks_total",
	"cluster_healthy",
	"cluster_misconfigured",
}

// reasonLabels are the values of the label reason, sorted.
var reasonLabels = []string{"breaker_open", "concurrency_limited", "exceeds_limit", "overloaded", "rate_limited", "ref_limited", "wait_too_long"}

// trafficWant is what the known pattern leaves in one stream's families.
type trafficWant struct {
	passed, succeeded, failed, inFlight float64
	blocked                             map[string]float64 // by reason; absent: 0
	rtSum                               float64            // seconds
	rtCount                             uint64
	p50, p99, max                       float64 // seconds; NaN: no request ended, so no series
}

func TestScrapeShowsTheKnownTraffic(t *testing.T) {
	g, _ := knownTraffic(t)
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	nan := math.NaN()

	resources := map[string]trafficWant{
		"orders": {passed: 3, succeeded: 2, failed: 1, blocked: map[string]float64{"rate_limited": 3},
			rtSum: 0.060, rtCount: 3, p50: 0.020, p99: 0.030, max: 0.030},
		"report": {blocked: map[string]float64{"ref_limited": 1}, p50: nan, p99: nan, max: nan},
		"paced": {passed: 1, succeeded: 1, blocked: map[string]float64{"wait_too_long": 1},
			rtSum: 0.040, rtCount: 1, p50: 0.040, p99: 0.040, max: 0.040},
		"db": {passed: 3, failed: 3, blocked: map[string]float64{"concurrency_limited": 1, "breaker_open": 2},
			rtSum: 0.015, rtCount: 3, p50: 0.005, p99: 0.005, max: 0.005},
		"search": {passed: 2, succeeded: 1, inFlight: 1,
			rtSum: 0.050, rtCount: 1, p50: 0.050, p99: 0.050, max: 0.050},
	}
	if got, want := f.labelValues("slidegate_requests_allowed_total", "resource"), slices.Sorted(maps.Keys(resources)); !slices.Equal(got, want) {
		t.Errorf("resources %q, want %q", got, want)
	}
	for name, want := range resources {
		checkKnown(t, f, "slidegate_", labels("resource", name), want)
	}
	checkKnown(t, f, "slidegate_inbound_", labels(), trafficWant{
		passed: 4, succeeded: 2, failed: 1, inFlight: 1, blocked: map[string]float64{"rate_limited": 3},
		rtSum: 0.060, rtCount: 3, p50: 0.020, p99: 0.030, max: 0.030,
	})

	for _, s := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"slidegate_breaker_block_ratio", labels("resource", "db", "rule", "breaker", "strategy", "error_count"), 1},
		{"slidegate_breaker_block_ratio", labels("resource", "orders", "rule", "breaker", "strategy", "error_ratio"), 0},
		{"slidegate_breaker_block_ratio", labels("resource", "search", "rule", "breaker", "strategy", "sre"), 0},
		{"slidegate_flow_rule_limit", labels("resource", "orders", "rule", "qps", "type", "qps"), 3},
		{"slidegate_flow_rule_limit", labels("resource", "db", "rule", "concurrency", "type", "concurrency"), 2},
		{"slidegate_flow_rule_limit", labels("resource", "paced", "rule", "throttle", "type", "throttle"), 10},
		{"slidegate_flow_rule_limit", labels("resource", "report", "rule", "qps", "type", "qps"), 2},
		{"slidegate_breaker_rule_threshold", labels("resource", "db", "rule", "breaker", "strategy", "error_count"), 3},
		{"slidegate_breaker_rule_threshold", labels("resource", "orders", "rule", "breaker", "strategy", "error_ratio"), 0.5},
	} {
		if got := f.value(t, s.name, s.labels); got != s.want {
			t.Errorf("%s%v = %v, want %v", s.name, s.labels, got, s.want)
		}
	}
	for _, b := range []struct {
		labels map[string]string
		state  string
	}{
		{labels("resource", "db", "rule", "breaker", "strategy", "error_count"), "open"},
		{labels("resource", "orders", "rule", "breaker", "strategy", "error_ratio"), "closed"},
		{labels("resource", "search", "rule", "breaker", "strategy", "sre"), "closed"},
	} {
		checkBreakerState(t, f, b.labels, b.state)
	}
	for name, n := range map[string]int{
		"slidegate_breaker_state":          9, // three states of three breakers
		"slidegate_breaker_block_ratio":    3,
		"slidegate_flow_rule_limit":        4,
		"slidegate_breaker_rule_threshold": 2, // the SRE breaker has none
	} {
		if got := len(f[name].GetMetric()); got != n {
			t.Errorf("%s has %d series, want %d", name, got, n)
		}
	}
	var names []string
	for name := range f {
		names = append(names, strings.TrimPrefix(name, "slidegate_"))
	}
	if slices.Sort(names); !slices.Equal(names, allFamilies) {
		t.Errorf("families\n%q, want\n%q", names, allFamilies)
	}
}

// checkKnown checks one stream's families against the known pattern.
func checkKnown(t *testing.T, f families, prefix string, lbl map[string]string, want trafficWant) {
	t.Helper()
	for _, c := range []struct {
		family string
		want   float64
	}{
		{"requests_allowed_total", want.passed},
		{"requests_succeeded_total", want.succeeded},
		{"requests_failed_total", want.failed},
		{"requests_in_flight", want.inFlight},
	} {
		if got := f.value(t, prefix+c.family, lbl); got != c.want {
			t.Errorf("%s%s%v = %v, want %v", prefix, c.family, lbl, got, c.want)
		}
	}
	checkMax(t, f, prefix, lbl, want.max)
	for _, reason := range reasonLabels {
		l := maps.Clone(lbl)
		l["reason"] = reason
		if got := f.value(t, prefix+"requests_blocked_total", l); got != want.blocked[reason] {
			t.Errorf("%srequests_blocked_total%v = %v, want %v", prefix, l, got, want.blocked[reason])
		}
	}
	s := f.summary(t, prefix+"response_time_seconds", lbl)
	if s.GetSampleCount() != want.rtCount || s.GetSampleSum() != want.rtSum {
		t.Errorf("%sresponse_time_seconds%v: count %d, sum %v; want %d, %v", prefix, lbl, s.GetSampleCount(), s.GetSampleSum(), want.rtCount, want.rtSum)
	}
	// The guard's quantiles are within exported.BinError of the response
	// times'; a stream with no request ended has none.
	if n, want := len(s.GetQuantile()), map[bool]int{true: 0, false: 3}[math.IsNaN(want.p50)]; n != want {
		t.Errorf("%sresponse_time_seconds%v has %d quantiles, want %d", prefix, lbl, n, want)
	}
	for _, q := range []struct{ rank, want float64 }{{0.5, want.p50}, {0.99, want.p99}} {
		got := quantile(s, q.rank)
		if math.IsNaN(q.want) != math.IsNaN(got) || math.Abs(got-q.want) > exported.BinError*q.want {
			t.Errorf("%sresponse_time_seconds%v quantile %v = %v, want %v within %.2f%%", prefix, lbl, q.rank, got, q.want, exported.BinError*100)
		}
	}
}

func TestScrapeMatchesTheGuardsStatistics(t *testing.T) {
	g, _ := knownTraffic(t)
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)

	rs := g.Resources()
	var names []string
	for _, s := range rs {
		names = append(names, s.Resource)
		checkStats(t, f, "slidegate_", labels("resource", s.Resource), s)
	}
	for _, family := range []string{"requests_allowed_total", "requests_succeeded_total", "requests_failed_total",
		"requests_in_flight", "response_time_seconds"} {
		if got := f.labelValues("slidegate_"+family, "resource"); !slices.Equal(got, names) {
			t.Errorf("slidegate_%s: resources %q, want Guard.Resources' %q", family, got, names)
		}
	}
	if got := len(f["slidegate_requests_blocked_total"].GetMetric()); got != len(rs)*len(reasonLabels) {
		t.Errorf("slidegate_requests_blocked_total has %d series, want %d (every reason of every resource)", got, len(rs)*len(reasonLabels))
	}
	in, _ := g.Stats(slidegate.InboundResource)
	checkStats(t, f, "slidegate_inbound_", labels(), in)

	bs := g.Breakers()
	for _, b := range bs {
		l := labels("resource", b.Resource, "rule", b.Rule, "strategy", string(b.Strategy))
		checkBreakerState(t, f, l, map[breaker.State]string{breaker.Closed: "closed", breaker.Open: "open", breaker.HalfOpen: "half_open"}[b.State])
		if got := f.value(t, "slidegate_breaker_block_ratio", l); got != b.BlockRatio {
			t.Errorf("slidegate_breaker_block_ratio%v = %v, want %v", l, got, b.BlockRatio)
		}
	}
	if got := len(f["slidegate_breaker_state"].GetMetric()); got != len(breakerStates)*len(bs) {
		t.Errorf("slidegate_breaker_state has %d series, want one per state of each breaker, %d", got, len(breakerStates)*len(bs))
	}

	rules := g.Rules().Named()
	for _, r := range rules.Flow {
		typ := r.Type
		if typ == "" {
			typ = slidegate.QPSRule
		}
		l := labels("resource", r.Resource, "rule", r.Name, "type", string(typ))
		if got := f.value(t, "slidegate_flow_rule_limit", l); got != float64(r.Limit) {
			t.Errorf("slidegate_flow_rule_limit%v = %v, want %v", l, got, r.Limit)
		}
	}
	for _, r := range rules.Breakers {
		l := labels("resource", r.Resource, "rule", r.Name, "strategy", string(r.Strategy))
		m := f.find("slidegate_breaker_rule_threshold", l)
		switch r.Strategy {
		case slidegate.SREBreaker:
			if m != nil {
				t.Errorf("slidegate_breaker_rule_threshold%v exists; an SRE breaker has no threshold", l)
			}
		case slidegate.ErrorCountBreaker:
			if got := f.value(t, "slidegate_breaker_rule_threshold", l); got != float64(r.Count) {
				t.Errorf("slidegate_breaker_rule_threshold%v = %v, want the count %v", l, got, r.Count)
			}
		default:
			if got := f.value(t, "slidegate_breaker_rule_threshold", l); got != r.Threshold {
				t.Errorf("slidegate_breaker_rule_threshold%v = %v, want the threshold %v", l, got, r.Threshold)
			}
		}
	}
}

// checkStats checks one stream's families against the guard's statistics s.
func checkStats(t *testing.T, f families, prefix string, lbl map[string]string, s slidegate.ResourceStats) {
	t.Helper()
	ended := s.Succeeded+s.Failed > 0
	orNaN := func(d time.Duration) float64 {
		if !ended {
			return math.NaN()
		}
		return d.Seconds()
	}
	for _, c := range []struct {
		family string
		want   float64
	}{
		{"requests_allowed_total", float64(s.Totals.Allowed)},
		{"requests_succeeded_total", float64(s.Totals.Succeeded)},
		{"requests_failed_total", float64(s.Totals.Failed)},
		{"requests_in_flight", float64(s.InFlight)},
	} {
		if got := f.value(t, prefix+c.family, lbl); got != c.want {
			t.Errorf("%s%s%v = %v, want the guard's %v", prefix, c.family, lbl, got, c.want)
		}
	}
	checkMax(t, f, prefix, lbl, orNaN(s.MaxRT))
	for _, r := range []struct {
		reason flow.Reason
		label  string
	}{
		{flow.RateLimited, "rate_limited"},
		{flow.ConcurrencyLimited, "concurrency_limited"},
		{flow.WaitTooLong, "wait_too_long"},
		{flow.RefLimited, "ref_limited"},
		{flow.BreakerOpen, "breaker_open"},
	} {
		l := maps.Clone(lbl)
		l["reason"] = r.label
		if got, want := f.value(t, prefix+"requests_blocked_total", l), float64(s.Totals.BlockedBy[r.reason]); got != want {
			t.Errorf("%srequests_blocked_total%v = %v, want the guard's %v", prefix, l, got, want)
		}
	}
	sum := f.summary(t, prefix+"response_time_seconds", lbl)
	if got, want := sum.GetSampleCount(), uint64(s.Totals.Succeeded+s.Totals.Failed); got != want {
		t.Errorf("%sresponse_time_seconds_count%v = %d, want the guard's %d", prefix, lbl, got, want)
	}
	if got, want := sum.GetSampleSum(), s.Totals.RT.Seconds(); got != want {
		t.Errorf("%sresponse_time_seconds_sum%v = %v, want the guard's %v", prefix, lbl, got, want)
	}
	if n, want := len(sum.GetQuantile()), map[bool]int{true: 3, false: 0}[ended]; n != want {
		t.Errorf("%sresponse_time_seconds%v has %d quantiles, want %d", prefix, lbl, n, want)
	}
	for _, q := range []struct {
		rank float64
		d    time.Duration
	}{{0.5, s.P50}, {0.9, s.P90}, {0.99, s.P99}} {
		if got := quantile(sum, q.rank); !same(got, orNaN(q.d)) {
			t.Errorf("%sresponse_time_seconds%v quantile %v = %v, want the guard's %v", prefix, lbl, q.rank, got, orNaN(q.d))
		}
	}
}

// checkMax checks the stream's response_time_max_seconds: want seconds, or
// no series if want is NaN (no request ended in the last 10 s).
func checkMax(t *testing.T, f families, prefix string, lbl map[string]string, want float64) {
	t.Helper()
	m := f.find(prefix+"response_time_max_seconds", lbl)
	switch {
	case math.IsNaN(want) && m != nil:
		t.Errorf("%sresponse_time_max_seconds%v = %v, want no series: no request ended", prefix, lbl, m.GetGauge().GetValue())
	case !math.IsNaN(want) && m == nil:
		t.Errorf("no %sresponse_time_max_seconds%v in the scrape, want %v", prefix, lbl, want)
	case !math.IsNaN(want) && m.GetGauge().GetValue() != want:
		t.Errorf("%sresponse_time_max_seconds%v = %v, want %v", prefix, lbl, m.GetGauge().GetValue(), want)
	}
}

func TestBreakerStateFollowsTheCircuit(t *testing.T) {
	clk := clock.NewManual(start)
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	if err := g.SetRules(slidegate.Rules{Breakers: []slidegate.BreakerRule{{Resource: "db",
		Strategy: slidegate.ErrorCountBreaker, Count: 3, MinRequests: &one, OpenTimeout: slidegate.Duration(5 * time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	s := newScraper(t, metrics.NewCollector(g))
	l := labels("resource", "db", "rule", "breaker", "strategy", "error_count")
	check := func(when string, state string, ratio float64) {
		t.Helper()
		f := s.scrape(t)
		checkBreakerState(t, f, l, state)
		if got := f.value(t, "slidegate_breaker_block_ratio", l); got != ratio {
			t.Errorf("%s: drop ratio %v, want %v", when, got, ratio)
		}
	}
	ctx := context.Background()

	check("before any request", "closed", 0)
	for i := range 3 {
		if err := g.Do(ctx, "db", func() error { return errFailed }); err != errFailed {
			t.Fatalf("request %d: %v", i, err)
		}
		if i < 2 {
			check(fmt.Sprintf("after %d failures", i+1), "closed", 0)
		}
	}
	check("after 3 failures", "open", 1)
	clk.Advance(5 * time.Second)
	probe, err := g.Enter(ctx, "db")
	if err != nil {
		t.Fatalf("the probe after the open timeout: %v", err)
	}
	check("with the probe in flight", "half_open", 1) // its one probe place taken
	probe.Exit(nil)
	check("after the probe succeeded", "closed", 0)
}

// breakerStates are the values of the label state of
// slidegate_breaker_state.
var breakerStates = []string{"closed", "open", "half_open"}

// checkBreakerState checks that the breaker with labels lbl has one series
// of slidegate_breaker_state per state, 1 for state and 0 for the others.
func checkBreakerState(t *testing.T, f families, lbl map[string]string, state string) {
	t.Helper()
	for _, st := range breakerStates {
		l := maps.Clone(lbl)
		l["state"] = st
		want := 0.0
		if st == state {
			want = 1
		}
		if m := f.find("slidegate_breaker_state", l); m == nil {
			t.Errorf("no slidegate_breaker_state%v in the scrape", l)
		} else if got := m.GetGauge().GetValue(); got != want {
			t.Errorf("slidegate_breaker_state%v = %v, want %v (the breaker is %s)", l, got, want, state)
		}
	}
}

// TestBreakerStatesAggregateAcrossGuards reads two guards' breakers as
// max by (state) over their scrapes does: one open and one closed breaker
// of the same rule make open and closed 1 each, and half_open 0, where a
// number per state would have said nothing true (max 1, open).
func TestBreakerStatesAggregateAcrossGuards(t *testing.T) {
	open, _ := knownTraffic(t) // the db breaker is open
	closed := newGuard(t, slidegate.WithClock(clock.NewManual(start)))
	if err := closed.SetRules(knownRules()); err != nil {
		t.Fatal(err)
	}
	maxByState := map[string]float64{}
	for _, g := range []*slidegate.Guard{open, closed} {
		f := newScraper(t, metrics.NewCollector(g)).scrape(t)
		for _, m := range f["slidegate_breaker_state"].GetMetric() {
			if l := labelsOf(m); l["resource"] == "db" {
				maxByState[l["state"]] = max(maxByState[l["state"]], m.GetGauge().GetValue())
			}
		}
	}
	if want := map[string]float64{"closed": 1, "open": 1, "half_open": 0}; !maps.Equal(maxByState, want) {
		t.Errorf("max by (state) of db's breaker over two guards = %v, want %v", maxByState, want)
	}
}

// TestEverySeriesExistsBeforeTraffic checks that every counter and gauge
// of a resource named by the rules is there before its first request, but
// the response-time maximum and quantiles, which describe requests that
// ended.
func TestEverySeriesExistsBeforeTraffic(t *testing.T) {
	// A new reason in the root package must get a label here.
	if n := len(slidegate.Totals{}.BlockedBy) - 1; n != len(reasonLabels) {
		t.Fatalf("slidegate has %d block reasons; the collector labels %d", n, len(reasonLabels))
	}
	g, err := slidegate.New(slidegate.WithClock(clock.NewManual(start)))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(knownRules()); err != nil {
		t.Fatal(err)
	}
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)

	for _, name := range []string{"db", "orders", "paced", "report", "search"} {
		checkKnown(t, f, "slidegate_", labels("resource", name), trafficWant{p50: math.NaN(), p99: math.NaN(), max: math.NaN()})
		l := labels("resource", name)
		var reasons []string
		for _, m := range f["slidegate_requests_blocked_total"].GetMetric() {
			if r, ok := labelsOf(m)["reason"]; ok && labelsOf(m)["resource"] == name {
				reasons = append(reasons, r)
			}
		}
		if slices.Sort(reasons); !slices.Equal(reasons, reasonLabels) {
			t.Errorf("%v: reasons %q, want %q", l, reasons, reasonLabels)
		}
	}
	checkKnown(t, f, "slidegate_inbound_", labels(), trafficWant{p50: math.NaN(), p99: math.NaN(), max: math.NaN()})
	if got := f.labelValues("slidegate_inbound_requests_blocked_total", "reason"); !slices.Equal(got, reasonLabels) {
		t.Errorf("inbound reasons %q, want %q", got, reasonLabels)
	}
}
