package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/metrics"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// roundTripFunc is an http.RoundTripper that answers without a network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// directionFamilies are the families labelled by direction: those labelled
// by resource that describe a resource's requests.
var directionFamilies = []string{
	"slidegate_request_duration_seconds",
	"slidegate_requests_allowed_total",
	"slidegate_requests_blocked_total",
	"slidegate_requests_failed_total",
	"slidegate_requests_in_flight",
	"slidegate_requests_succeeded_total",
	"slidegate_response_time_max_seconds",
	"slidegate_response_time_seconds",
}

// TestDirectionLabelsTheResources checks, in the scrape, that the routes a
// service serves through httpguard's Middleware are inbound and the calls
// it makes through its Transport outbound, in every family of a
// resource's requests; and that no other family has the label.
func TestDirectionLabelsTheResources(t *testing.T) {
	g := newGuard(t, slidegate.WithClock(clock.NewManual(start)))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {})
	handler := httpguard.Middleware(g)(mux)
	handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/orders/7", nil))

	upstream := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	client := &http.Client{Transport: httpguard.Transport(g, upstream)}
	resp, err := client.Get("http://inventory.internal/items")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	for _, c := range []struct{ resource, direction string }{
		{"GET /orders/{id}", "inbound"},
		{"GET inventory.internal", "outbound"},
	} {
		lbl := labels("resource", c.resource, "direction", c.direction)
		if got := f.value(t, "slidegate_requests_allowed_total", lbl); got != 1 {
			t.Errorf("slidegate_requests_allowed_total%v = %v, want 1", lbl, got)
		}
		if got := f.value(t, "slidegate_requests_succeeded_total", lbl); got != 1 {
			t.Errorf("slidegate_requests_succeeded_total%v = %v, want 1", lbl, got)
		}
		if s := f.summary(t, "slidegate_response_time_seconds", lbl); s.GetSampleCount() != 1 {
			t.Errorf("slidegate_response_time_seconds%v counts %d, want 1", lbl, s.GetSampleCount())
		}
	}
	for name, mf := range f {
		want := slices.Contains(directionFamilies, name)
		for _, m := range mf.GetMetric() {
			d, has := labelsOf(m)["direction"]
			if has != want {
				t.Errorf("%s%v: has the label direction %v, want %v", name, labelsOf(m), has, want)
				continue
			}
			if !has {
				continue
			}
			if r := labelsOf(m)["resource"]; d != map[string]string{"GET /orders/{id}": "inbound", "GET inventory.internal": "outbound"}[r] {
				t.Errorf("%s%v: direction %q for %q", name, labelsOf(m), d, r)
			}
		}
	}
	if len(f.labelValues("slidegate_requests_allowed_total", "direction")) != 2 {
		t.Errorf("directions %q, want one per resource", f.labelValues("slidegate_requests_allowed_total", "direction"))
	}
}
