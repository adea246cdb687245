package httpguard_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// discard is a ResponseWriter that allocates nothing.
type discard struct{ h http.Header }

func (w discard) Header() http.Header         { return w.h }
func (w discard) Write(p []byte) (int, error) { return len(p), nil }
func (w discard) WriteHeader(int)             {}

// middlewareAllocs returns the allocations per request of Middleware with
// opts, a QPS rule and a breaker in force, for r.
func middlewareAllocs(t *testing.T, r *http.Request, opts ...httpguard.Option) float64 {
	t.Helper()
	g, _ := newGuard(t, slidegate.Rules{
		Flow:     []slidegate.FlowRule{{Resource: unknownGET, Limit: 1 << 31}},
		Breakers: []slidegate.BreakerRule{{Resource: unknownGET, Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5}},
	})
	h := httpguard.Middleware(g, opts...)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := discard{h: http.Header{}}
	h.ServeHTTP(w, r) // the resource's first request makes it
	n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) })
	if s := stats(t, g, unknownGET); s.Blocked != 0 || s.Failed != 0 {
		t.Fatalf("stats %+v: the requests were not all allowed", s)
	}
	return n
}

// TestKeysCostNoAllocation checks that taking a request's key from its
// client address, through trusted proxies or not, or from a header, adds no
// allocation to the middleware's, and that the middleware's own stays at
// one (the recorder of the status). Keying clients by their network costs
// none either, once the network's key is made.
func TestKeysCostNoAllocation(t *testing.T) {
	if raceDetector {
		t.Skip("sync.Pool drops entries under the race detector")
	}
	lb := netip.MustParsePrefix("10.0.0.0/8")
	base := middlewareAllocs(t, request("198.51.100.7:5555"))
	if base > 1 {
		t.Errorf("the middleware without a key: %v allocations per request, want at most 1", base)
	}
	for _, tc := range []struct {
		name  string
		r     *http.Request
		opt   httpguard.Option
		extra float64
	}{
		{"IPv4 peer", request("198.51.100.7:5555"), httpguard.KeyFromClient(httpguard.ClientIP{}), 0},
		{"IPv6 peer: its /64", request("[2001:db8::7]:5555"), httpguard.KeyFromClient(httpguard.ClientIP{}), 0},
		{"X-Forwarded-For through a proxy", request("10.0.0.1:5555", "X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.0.0.2"), httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: []netip.Prefix{lb}}), 0},
		{"Forwarded through a proxy", request("10.0.0.1:5555", "Forwarded", `for=6.6.6.6, for="[2001:db8::7]:1";proto=https`),
			httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: []netip.Prefix{lb}, Header: "Forwarded"}), 0},
		{"header", request("198.51.100.7:5555", "X-Api-Key", "alice"), httpguard.KeyFromHeader("X-Api-Key"), 0},
		{"IPv6 by its /56", request("[2001:db8::7]:5555"), httpguard.KeyFromClient(httpguard.ClientIP{IPv6Bits: 56}), 0},
		{"IPv4 by its /24", request("198.51.100.7:5555"), httpguard.KeyFromClient(httpguard.ClientIP{IPv4Bits: 24}), 0},
		{"IPv6 whole", request("[2001:db8::7]:5555"), httpguard.KeyFromClient(httpguard.ClientIP{IPv6Bits: 128}), 0},
		{"IPv4-mapped: not canonical", request("[::ffff:198.51.100.7]:5555"), httpguard.KeyFromClient(httpguard.ClientIP{}), 1},
	} {
		if n := middlewareAllocs(t, tc.r, tc.opt); n != base+tc.extra {
			t.Errorf("%s: %v allocations per request, want %v (%v without a key, and %v)", tc.name, n, base+tc.extra, base, tc.extra)
		}
	}
}
