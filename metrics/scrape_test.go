package metrics_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// newGuard returns a guard made with opts, failing the test if it cannot.
func newGuard(t testing.TB, opts ...slidegate.Option) *slidegate.Guard {
	t.Helper()
	g, err := slidegate.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A scraper serves a registry over HTTP, as Prometheus scrapes it.
type scraper struct {
	srv *httptest.Server
}

// newScraper registers cs in a fresh pedantic registry, which also checks
// that every metric collected matches a described descriptor, and serves
// it until the test ends.
func newScraper(t *testing.T, cs ...prometheus.Collector) *scraper {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	t.Cleanup(srv.Close)
	return &scraper{srv: srv}
}

// body fetches /metrics in the text format.
func (s *scraper) body(t *testing.T) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s\n%s", resp.Status, body)
	}
	return string(body)
}

// scrape fetches /metrics in the text format and parses it.
func (s *scraper) scrape(t *testing.T) families {
	t.Helper()
	body := s.body(t)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse the exposition: %v\n%s", err, body)
	}
	return fams
}

// families are a scrape, by metric name.
type families map[string]*dto.MetricFamily

// find returns the metric of family name whose labels are exactly labels,
// the label direction aside if labels does not name it: most tests are
// about other things, and TestDirectionLabelsTheResources checks it.
func (f families) find(name string, labels map[string]string) *dto.Metric {
	mf := f[name]
	if mf == nil {
		return nil
	}
	_, withDirection := labels["direction"]
next:
	for _, m := range mf.GetMetric() {
		n := 0
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "direction" && !withDirection {
				continue
			}
			n++
			if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
				continue next
			}
		}
		if n == len(labels) {
			return m
		}
	}
	return nil
}

// value returns the value of the counter or gauge of family name with
// labels, failing the test if there is none.
func (f families) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	m := f.find(name, labels)
	if m == nil {
		t.Fatalf("no %s%v in the scrape", name, labels)
	}
	switch f[name].GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s is a %v, not a counter or a gauge", name, f[name].GetType())
	return 0
}

// summary returns the summary of family name with labels.
func (f families) summary(t *testing.T, name string, labels map[string]string) *dto.Summary {
	t.Helper()
	m := f.find(name, labels)
	if m == nil || f[name].GetType() != dto.MetricType_SUMMARY {
		t.Fatalf("no summary %s%v in the scrape", name, labels)
	}
	return m.GetSummary()
}

// labelValues returns the sorted values of label in family name.
func (f families) labelValues(name, label string) []string {
	var out []string
	for _, m := range f[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				out = append(out, lp.GetValue())
			}
		}
	}
	sort.Strings(out)
	return out
}

// quantile returns the value of the summary's quantile q, NaN if absent.
func quantile(s *dto.Summary, q float64) float64 {
	for _, x := range s.GetQuantile() {
		if x.GetQuantile() == q {
			return x.GetValue()
		}
	}
	return math.NaN()
}

// same reports whether a and b are equal, NaN being equal to NaN.
func same(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

// labels builds a label set from name, value pairs.
func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

var errFailed = errors.New("the dependency failed")

// start is where the tests' manual clocks start: away from zero, so that
// nothing rests on a window that began at the clock's origin.
const start = int64(100 * time.Second)

// knownRules are the rules of the known traffic pattern.
func knownRules() slidegate.Rules {
	one := int64(1)
	return slidegate.Rules{
		Flow: []slidegate.FlowRule{
			{Resource: "orders", Limit: 3},                               // flow[0]: 3 a second
			{Resource: "db", Type: slidegate.ConcurrencyRule, Limit: 2},  // flow[1]: 2 at once
			{Resource: "paced", Limit: 10, Type: slidegate.ThrottleRule}, // flow[2]: one every 100 ms, no waiting
			{Resource: "report", Limit: 2, RefResource: "orders"},        // flow[3]: while orders passes < 2 a second
		},
		Breakers: []slidegate.BreakerRule{
			{Resource: "db", Strategy: slidegate.ErrorCountBreaker, Count: 3, MinRequests: &one,
				OpenTimeout: slidegate.Duration(5 * time.Second)}, // breakers[0]: opens at the 3rd failure
			{Resource: "orders", Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5}, // breakers[1]: 10 requests at least, stays closed
			{Resource: "search", Strategy: slidegate.SREBreaker},                        // breakers[2]: no threshold
		},
	}
}

// knownTraffic makes a guard on a manual clock, sets knownRules and drives
// this pattern through it (times after start):
//
//	0 ms   orders ×6 inbound: 3 pass (o1-o3), 3 rate_limited
//	       report: ref_limited (orders passed 3 ≥ 2 in the last second)
//	       paced ×2: p1 passes, 1 wait_too_long
//	       db ×3: d1, d2 pass, 1 concurrency_limited
//	       search: s1 passes
//	5 ms   d1, d2 exit with errors (5 ms each); d4 passes
//	10 ms  o1 exits (10 ms); d4 exits with an error (5 ms): db's breaker opens
//	       db ×2: breaker_open
//	20 ms  o2 exits (20 ms)
//	30 ms  o3 exits with an error (30 ms)
//	40 ms  p1 exits (40 ms)
//	50 ms  s1 exits (50 ms); s2 passes, inbound, and stays in flight
func knownTraffic(t *testing.T) (*slidegate.Guard, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(start)
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(knownRules()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	enter := func(name string, want flow.Reason, opts ...slidegate.EntryOption) slidegate.Entry {
		t.Helper()
		e, err := g.Enter(ctx, name, opts...)
		var be *slidegate.BlockError
		switch {
		case want == 0 && err != nil:
			t.Fatalf("%s at %v: %v, want a pass", name, time.Duration(clk.Now()-start), err)
		case want != 0 && (!errors.As(err, &be) || be.Reason != want):
			t.Fatalf("%s at %v: %v, want blocked: %v", name, time.Duration(clk.Now()-start), err, want)
		}
		return e
	}
	in := slidegate.WithInbound()

	o1, o2, o3 := enter("orders", 0, in), enter("orders", 0, in), enter("orders", 0, in)
	for range 3 {
		enter("orders", flow.RateLimited, in)
	}
	enter("report", flow.RefLimited)
	p1 := enter("paced", 0)
	enter("paced", flow.WaitTooLong)
	d1, d2 := enter("db", 0), enter("db", 0)
	enter("db", flow.ConcurrencyLimited)
	s1 := enter("search", 0)

	clk.Advance(5 * time.Millisecond)
	d1.Exit(errFailed)
	d2.Exit(errFailed)
	d4 := enter("db", 0)

	clk.Advance(5 * time.Millisecond)
	o1.Exit(nil)
	d4.Exit(errFailed)
	enter("db", flow.BreakerOpen)
	enter("db", flow.BreakerOpen)

	clk.Advance(10 * time.Millisecond)
	o2.Exit(nil)
	clk.Advance(10 * time.Millisecond)
	o3.Exit(errFailed)
	clk.Advance(10 * time.Millisecond)
	p1.Exit(nil)
	clk.Advance(10 * time.Millisecond)
	s1.Exit(nil)
	enter("search", 0, in) // s2, in flight
	return g, clk
}

// labelsOf returns the labels of m, by name.
func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}
