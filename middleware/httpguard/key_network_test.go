package httpguard_test

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// randomIn returns an address of p with random bits after its prefix.
func randomIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b, bits := p.Addr().As16(), p.Bits()
	if p.Addr().Is4() {
		bits += 96 // the IPv4 address is the last 4 of the 16 bytes
	}
	for i := bits / 8; i < 16; i++ {
		b[i] |= byte(rng.Uint32()) & (0xff >> max(0, bits-8*i))
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return a.Unmap()
	}
	return a
}

// TestAClientRotatingAddressesInItsNetworkIsHeldToOneKey: a client that
// sends each request from a new address of its /64, as it may at will (and
// as privacy addresses do on their own), is held to one key's limit by
// KeyFromClient's defaults, directly and through a trusted proxy, while
// the /64 next to it keeps a limit of its own, IPv4 clients are keyed by
// their whole address, and an IPv4-mapped address is its IPv4 address.
func TestAClientRotatingAddressesInItsNetworkIsHeldToOneKey(t *testing.T) {
	const limit, sent = 5, 100
	g, _ := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /login", Limit: limit, PerKey: true}}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(http.ResponseWriter, *http.Request) {})
	h := httpguard.Middleware(g, httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))(mux)
	srv := httptest.NewServer(h)
	defer srv.Close()
	rng := rand.New(rand.NewPCG(1, 2))

	// direct sends a request as from the peer addr; forwarded, through the
	// trusted proxy on the loopback, on a real connection.
	direct := func(addr netip.Addr) int {
		r := httptest.NewRequest("GET", "/login", nil)
		r.RemoteAddr = netip.AddrPortFrom(addr, 4711).String()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	forwarded := func(addr netip.Addr) int {
		req, err := http.NewRequest("GET", srv.URL+"/login", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", addr.String())
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	allowed := func(send func(netip.Addr) int, p netip.Prefix, n int) int {
		got := 0
		for range n {
			if send(randomIn(rng, p)) == http.StatusOK {
				got++
			}
		}
		return got
	}
	for _, tc := range []struct {
		name    string
		send    func(netip.Addr) int
		network string
		n, want int
	}{
		{"direct, rotating in a /64", direct, "2001:db8:1:2::/64", sent, limit},
		{"direct, the next /64", direct, "2001:db8:1:3::/64", sent, limit},
		{"forwarded, rotating in a /64", forwarded, "2001:db8:2:2::/64", sent, limit},
		{"direct, IPv4 addresses of a /24, each its own", direct, "198.51.100.0/24", sent, sent},
	} {
		if got := allowed(tc.send, netip.MustParsePrefix(tc.network), tc.n); got != tc.want {
			t.Errorf("%s: %d of %d requests allowed, want %d", tc.name, got, tc.n, tc.want)
		}
	}

	// An IPv4-mapped address shares its IPv4 address's key.
	v4 := netip.MustParseAddr("203.0.113.9")
	mapped := netip.AddrFrom16(v4.As16())
	got := 0
	for i := range 2 * limit {
		a := v4
		if i%2 == 1 {
			a = mapped
		}
		if direct(a) == http.StatusOK {
			got++
		}
	}
	if got != limit {
		t.Errorf("203.0.113.9 and ::ffff:203.0.113.9 in turn: %d of %d allowed, want %d", got, 2*limit, limit)
	}
	keys := map[string]bool{}
	for _, k := range g.TopKeys("GET /login", 100, false) {
		keys[k.Key] = true
	}
	for _, want := range []string{"2001:db8:1:2::/64", "2001:db8:1:3::/64", "2001:db8:2:2::/64", "203.0.113.9"} {
		if !keys[want] {
			t.Errorf("no key %q among %d keys", want, len(keys))
		}
	}
}
