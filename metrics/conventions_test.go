package metrics_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/slidegate/slidegate/metrics"
)

func TestLintFindsNoProblems(t *testing.T) {
	g, _ := knownTraffic(t)
	problems, err := testutil.CollectAndLint(metrics.NewCollector(g))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestNamesFollowPrometheusConventions(t *testing.T) {
	g, _ := knownTraffic(t)
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	for name, mf := range f {
		counter := mf.GetType() == dto.MetricType_COUNTER
		if total := strings.HasSuffix(name, "_total"); counter != total {
			t.Errorf("%s is a %v: a name ends in _total exactly when it is a counter's", name, mf.GetType())
		}
		if (strings.Contains(name, "response_time") || strings.Contains(name, "duration")) && !strings.HasSuffix(name, "_seconds") {
			t.Errorf("%s: a time is in seconds, and its name says so", name)
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s has no help", name)
		}
	}
	if got := f["slidegate_response_time_seconds"].GetType(); got != dto.MetricType_SUMMARY {
		t.Errorf("slidegate_response_time_seconds is a %v, want a summary", got)
	}
	for _, name := range []string{"slidegate_request_duration_seconds", "slidegate_inbound_request_duration_seconds"} {
		if got := f[name].GetType(); got != dto.MetricType_HISTOGRAM {
			t.Errorf("%s is a %v, want a histogram", name, got)
		}
	}
}

func TestNamespaceAndConstLabels(t *testing.T) {
	g, _ := knownTraffic(t)
	f := newScraper(t, metrics.NewCollector(g, metrics.WithNamespace("edge"), metrics.WithConstLabels(prometheus.Labels{"guard": "api"}))).scrape(t)
	if len(f) != len(allFamilies) {
		t.Errorf("%d families, want %d", len(f), len(allFamilies))
	}
	for name, mf := range f {
		if !strings.HasPrefix(name, "edge_") {
			t.Errorf("%s: want the namespace edge", name)
		}
		for _, m := range mf.GetMetric() {
			if labelsOf(m)["guard"] != "api" {
				t.Errorf("%s%v: want the label guard=api", name, labelsOf(m))
			}
		}
	}
	if got := f.value(t, "edge_requests_allowed_total", labels("resource", "orders", "guard", "api")); got != 3 {
		t.Errorf("edge_requests_allowed_total{orders} = %v, want 3", got)
	}

	f = newScraper(t, metrics.NewCollector(g, metrics.WithNamespace(""))).scrape(t)
	if got := f.value(t, "requests_allowed_total", labels("resource", "orders")); got != 3 {
		t.Errorf("requests_allowed_total{orders} without a namespace = %v, want 3", got)
	}
}

func TestRegisteringRefusesCollisions(t *testing.T) {
	g := newGuard(t)
	for _, c := range []struct {
		name string
		cs   []prometheus.Collector
		ok   bool
	}{
		{"two guards told apart by a label", []prometheus.Collector{
			metrics.NewCollector(g, metrics.WithConstLabels(prometheus.Labels{"guard": "a"})),
			metrics.NewCollector(newGuard(t), metrics.WithConstLabels(prometheus.Labels{"guard": "b"}))}, true},
		{"two guards told apart by the namespace", []prometheus.Collector{
			metrics.NewCollector(g), metrics.NewCollector(newGuard(t), metrics.WithNamespace("other"))}, true},
		{"the same collector twice", []prometheus.Collector{metrics.NewCollector(g), metrics.NewCollector(g)}, false},
		{"a constant label that is one of the collector's", []prometheus.Collector{
			metrics.NewCollector(g, metrics.WithConstLabels(prometheus.Labels{"resource": "x"}))}, false},
		{"a constant label called key, as the key families' own", []prometheus.Collector{
			metrics.NewCollector(g, metrics.WithConstLabels(prometheus.Labels{"key": "x"}))}, false},
		{"a constant label called quantile, as the summaries' own", []prometheus.Collector{
			metrics.NewCollector(g, metrics.WithConstLabels(prometheus.Labels{"quantile": "x"}))}, false},
		{"a constant label called le, as the histograms' own", []prometheus.Collector{
			metrics.NewCollector(g, metrics.WithConstLabels(prometheus.Labels{"le": "x"}))}, false},
		{"an invalid constant label", []prometheus.Collector{
			metrics.NewCollector(g, metrics.WithConstLabels(prometheus.Labels{"__reserved": "x"}))}, false},
	} {
		reg := prometheus.NewPedanticRegistry()
		var err error
		for _, col := range c.cs {
			if err = reg.Register(col); err != nil {
				break
			}
		}
		if (err == nil) != c.ok {
			t.Errorf("%s: register: %v, want ok %v", c.name, err, c.ok)
		}
	}
}

func TestDescribeSendsTheFixedSet(t *testing.T) {
	describe := func(c prometheus.Collector) []string {
		ch := make(chan *prometheus.Desc, 64)
		c.Describe(ch)
		close(ch)
		var out []string
		for d := range ch {
			out = append(out, d.String())
		}
		slices.Sort(out)
		return out
	}
	busy, _ := knownTraffic(t)
	empty := describe(metrics.NewCollector(newGuard(t)))
	if got := describe(metrics.NewCollector(busy)); !slices.Equal(got, empty) {
		t.Errorf("a guard's rules and traffic change the descriptors:\n%q\n%q", got, empty)
	}
	if n := len(allFamilies) + len(clusterFamilies) + len(keyFamilies) + len(overloadFamilies) + len(retryFamilies) + len(shadowFamilies); len(empty) != n || len(slices.Compact(slices.Clone(empty))) != len(empty) {
		t.Errorf("%d descriptors, want %d distinct", len(empty), n)
	}
}
