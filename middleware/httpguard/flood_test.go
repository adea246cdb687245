package httpguard_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/flood"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

func TestMethodIsOneOfTen(t *testing.T) {
	for method, want := range map[string]string{
		"GET": "GET", "HEAD": "HEAD", "POST": "POST", "PUT": "PUT", "PATCH": "PATCH", "DELETE": "DELETE",
		"CONNECT": "CONNECT", "OPTIONS": "OPTIONS", "TRACE": "TRACE",
		"get": httpguard.OtherMethod, "PROPFIND": httpguard.OtherMethod, "X": httpguard.OtherMethod,
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Method = method
		if got := httpguard.Method(r); got != want {
			t.Errorf("Method(%q) = %q, want %q", method, got, want)
		}
	}
}

// TestAFloodOfNewMethodsAndPathsMakesNoResources sends a real server, as
// an attacker would, thousands of requests with methods and paths that are
// new every time and long, routed and unrouted, and checks that the guard
// keeps a few resources with short names, and that its memory does not
// grow with the flood.
func TestAFloodOfNewMethodsAndPathsMakesNoResources(t *testing.T) {
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/static/", func(http.ResponseWriter, *http.Request) {}) // any method
	srv := httptest.NewServer(httpguard.Middleware(g)(mux))
	defer srv.Close()

	before := flood.HeapInUse()
	for i, f := range []struct {
		prefix              string
		n, method, pathSize int
	}{
		{"", 2000, 4 << 10, 4 << 10},        // unrouted
		{"/static", 2000, 4 << 10, 4 << 10}, // routed by a pattern without a method
		{"/static", 20, 512 << 10, 1 << 10}, // methods of half a megabyte
	} {
		if err := flood.HTTP(srv.URL+f.prefix, f.n, f.method, f.pathSize, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	grew := int64(flood.HeapInUse()) - int64(before)

	got := map[string]int64{}
	for _, s := range g.Resources() {
		got[s.Resource] = s.Totals.Allowed
	}
	want := map[string]int64{httpguard.NoRoute: 2000, httpguard.OtherMethod + " /static/": 2020}
	if len(got) != len(want) || got[httpguard.NoRoute] != want[httpguard.NoRoute] || got["_OTHER /static/"] != want["_OTHER /static/"] {
		t.Fatalf("resources after the flood: %v, want %v", got, want)
	}
	const bound = 4 << 20
	t.Logf("the heap grew %d KiB over the flood", grew>>10)
	if grew > bound {
		t.Fatalf("the heap grew %d KiB over the flood, want at most %d KiB", grew>>10, bound>>10)
	}
}

// A request the mux redirects (to its path with a slash after it, or
// cleaned) is served by no route: it must not be named by the path it is
// redirected to, which the client chose. CONNECT requests are redirected
// too.
func TestRequestsTheMuxRedirectsMakeNoResources(t *testing.T) {
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/users/{id}/", func(http.ResponseWriter, *http.Request) {})
	h := httpguard.Middleware(g)(mux)
	for i := range 200 {
		for _, m := range []string{http.MethodGet, http.MethodConnect} {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Method, r.URL.Path = m, "/users/attacker-"+strconv.Itoa(i)
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	var names []string
	for _, s := range g.Resources() {
		names = append(names, s.Resource)
	}
	if len(names) > 2 {
		t.Fatalf("400 redirected requests made the resources %q; want them all unrouted", names)
	}
}
