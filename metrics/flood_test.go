package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/flood"
	"github.com/slidegate/slidegate/metrics"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// TestAScrapeAfterAFloodStaysSmall floods a guarded server, as an attacker
// would, with new long methods and paths, then scrapes its metrics: their
// size follows the server's routes, not the flood.
func TestAScrapeAfterAFloodStaysSmall(t *testing.T) {
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/static/", func(http.ResponseWriter, *http.Request) {})
	srv := httptest.NewServer(httpguard.Middleware(g)(mux))
	defer srv.Close()
	s := newScraper(t, metrics.NewCollector(g))

	size := func() int {
		resp, err := http.Get(s.srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	if err := flood.HTTP(srv.URL+"/static", 1, 8, 8, 0); err != nil {
		t.Fatal(err)
	}
	one := size() // the scrape once the flood's two resources exist
	for i, prefix := range []string{"", "/static"} {
		if err := flood.HTTP(srv.URL+prefix, 500, 16<<10, 1<<10, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	after := size()
	t.Logf("a scrape is %d bytes after the first request, %d after the flood", one, after)
	if after > one+one/2 {
		t.Fatalf("a scrape grew from %d bytes to %d over the flood", one, after)
	}
	if f := s.scrape(t); len(f.labelValues("slidegate_requests_allowed_total", "resource")) != 2 {
		t.Fatalf("resources in the scrape: %q, want the flood's two", f.labelValues("slidegate_requests_allowed_total", "resource"))
	}
}
