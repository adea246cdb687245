package httpguard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

func ExampleKeyFromClient() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	// One login attempt per client address per minute.
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "POST /login", Limit: 1, Interval: slidegate.Duration(time.Minute), PerKey: true},
	}})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", func(http.ResponseWriter, *http.Request) {})
	// The load balancer, in 10.0.0.0/8, appends to X-Forwarded-For.
	lb := netip.MustParsePrefix("10.0.0.0/8")
	h := httpguard.Middleware(g, httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: []netip.Prefix{lb}}))(mux)

	login := func(peer, forwardedFor string) int {
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-For", forwardedFor)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println(login("10.0.0.1:40000", "198.51.100.7"))
	fmt.Println(login("10.0.0.1:40000", "198.51.100.7"))
	// The client wrote a header of its own: the balancer appended the
	// client's address to it, and only that counts.
	fmt.Println(login("10.0.0.1:40000", "203.0.113.99, 198.51.100.7"))
	fmt.Println(login("10.0.0.1:40000", "198.51.100.8"))
	// A client that reaches the server around the balancer is keyed by its
	// own address, whatever its header says.
	fmt.Println(login("198.51.100.7:40000", "198.51.100.9"))
	// Output:
	// 200
	// 429
	// 429
	// 200
	// 429
}

func ExampleClientIP() {
	// Behind proxies that write RFC 7239's Forwarded header, keying IPv6
	// clients by their /56 rather than their /64.
	keys := httpguard.ClientIP{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("2001:db8:ffff::/48")},
		Header:         "Forwarded",
		IPv6Bits:       56,
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8:ffff::1]:40000"
	r.Header.Set("Forwarded", `for="[2001:db8:1:2:3:4:5:6]:4711";proto=https`)
	fmt.Println(keys.Addr(r))

	_ = httpguard.Middleware(nil, httpguard.KeyFromClient(keys)) // key "2001:db8:1::/56"
	// Output:
	// 2001:db8:1:2:3:4:5:6
}

func ExampleKeyFromHeader() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	// 1 request per minute for each API key, and for all the requests
	// without one together.
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /", Limit: 1, Interval: slidegate.Duration(time.Minute), PerKey: true},
	}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(http.ResponseWriter, *http.Request) {})
	h := httpguard.Middleware(g, httpguard.KeyFromHeader("X-Api-Key"))(mux)
	for _, key := range []string{"alice", "alice", "bob", "", ""} {
		r := httptest.NewRequest("GET", "/", nil)
		if key != "" {
			r.Header.Set("X-Api-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%q %d\n", key, w.Code)
	}
	// Output:
	// "alice" 200
	// "alice" 429
	// "bob" 200
	// "" 200
	// "" 429
}

func ExampleKeyFrom() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /", Limit: 1, Interval: slidegate.Duration(time.Minute), PerKey: true},
	}})
	// The tenant that authentication, which runs first, stored in the
	// request's context.
	type tenantKey struct{}
	byTenant := httpguard.KeyFrom(func(r *http.Request) string {
		tenant, _ := r.Context().Value(tenantKey{}).(string)
		return tenant
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(http.ResponseWriter, *http.Request) {})
	guarded := httpguard.Middleware(g, byTenant)(mux)
	authenticated := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := r.URL.Query().Get("tenant") // a stand-in for a checked credential
		guarded.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	})
	for _, tenant := range []string{"acme", "acme", "globex"} {
		w := httptest.NewRecorder()
		authenticated.ServeHTTP(w, httptest.NewRequest("GET", "/?tenant="+tenant, nil))
		fmt.Println(tenant, w.Code)
	}
	// The same function keys the requests an http.Client sends.
	_ = &http.Client{Transport: httpguard.Transport(g, nil, byTenant)}
	// Output:
	// acme 200
	// acme 429
	// globex 200
}
