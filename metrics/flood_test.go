package metrics_test

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// TestAScrapeAfterAFloodOfKeysStaysBounded sends, as an attacker would,
// 100,000 distinct keys, long and full of bytes that need escaping or are
// not UTF-8, each over its limit, to a resource with a per-key rule: the
// scrape holds at most DefaultTopKeys series per key family, and its size
// grows by no more than their lines.
func TestAScrapeAfterAFloodOfKeysStaysBounded(t *testing.T) {
	const keys, limit = 100_000, 1
	g, _ := keyedGuard(t, limit)
	s := newScraper(t, metrics.NewCollector(g))
	send(t, g, "GET /api", "first", limit+1)
	one := len(s.body(t)) // the scrape with one key in each family

	rng := rand.New(rand.NewPCG(7, 7))
	hostile := []byte("<>\"\\\n\xff\xfeé{}=, \x00")
	noise := make([]byte, 400)
	for j := range noise {
		noise[j] = hostile[rng.IntN(len(hostile))]
	}
	blocked := 0
	for i := range keys {
		// Distinct within the 64 bytes shown, 200 bytes long.
		key := strconv.Itoa(i) + string(noise[i%200:i%200+200-len(strconv.Itoa(i))])
		blocked += send(t, g, "GET /api", key, limit+1)
	}
	if blocked < keys/2 {
		t.Fatalf("%d requests blocked, want every key's second request blocked", blocked)
	}
	f := s.scrape(t)
	for _, name := range keyFamilies {
		if n := len(f["slidegate_"+name].GetMetric()); n < 1 || n > metrics.DefaultTopKeys {
			t.Errorf("slidegate_%s has %d series after %d keys, want 1 to %d", name, n, keys, metrics.DefaultTopKeys)
		}
	}
	// A line of a key family: its name, the resource, a key of at most
	// 64 bytes, escaped (each byte at most twice over: \" \\ \n; U+FFFD for an
	// invalid byte is 3), and its value.
	const line = len("slidegate_top_key_requests_blocked{resource=\"GET /api\",key=\"\"} 1e+06\n") + 3*64
	after := len(s.body(t))
	t.Logf("a scrape is %d bytes with one key, %d after %d keys; bound %d", one, after, keys, one+2*metrics.DefaultTopKeys*line)
	if after > one+2*metrics.DefaultTopKeys*line {
		t.Errorf("the scrape grew from %d bytes to %d over a flood of %d keys", one, after, keys)
	}
}
