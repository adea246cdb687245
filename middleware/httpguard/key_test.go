package httpguard_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// keyOf returns the key with which r reaches the guard through Middleware
// with opts: a per-key rule that blocks every key hands it back in the
// *slidegate.BlockError.
func keyOf(t *testing.T, r *http.Request, opts ...httpguard.Option) string {
	t.Helper()
	g, _ := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unknownGET, Limit: 0, PerKey: true}}})
	var be *slidegate.BlockError
	opts = append(opts, httpguard.WithBlockedHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		if !errors.As(err, &be) {
			t.Fatalf("blocked by %v, want a *slidegate.BlockError", err)
		}
	}))
	h := httpguard.Middleware(g, opts...)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Fatal("a request reached the handler through a rule that blocks every key")
	}))
	h.ServeHTTP(httptest.NewRecorder(), r)
	if be == nil {
		t.Fatal("the request was not blocked")
	}
	return be.Key
}

// request returns a GET request from remoteAddr with the headers given as
// name, value pairs (a name given twice makes two lines).
func request(remoteAddr string, header ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remoteAddr
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	return r
}

// TestClientIPKeyAsAnAttackerSeesIt sends what an attacker would: forwarding
// headers it wrote itself, directly and through trusted proxies, huge,
// long, malformed, in both syntaxes. Only what a trusted proxy wrote
// counts.
func TestClientIPKeyAsAnAttackerSeesIt(t *testing.T) {
	lb := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	viaLB := httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: lb})
	forwarded := httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: lb, Header: "forwarded"})
	perNet := httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: lb, IPv6Bits: 56, IPv4Bits: 24})
	whole := httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: lb, IPv6Bits: 128})
	xff := "X-Forwarded-For"
	for _, tc := range []struct {
		name string
		opt  httpguard.Option
		r    *http.Request
		want string
	}{
		{"direct: the peer", httpguard.KeyFromClient(httpguard.ClientIP{}), request("198.51.100.7:5555"), "198.51.100.7"},
		{"direct: a spoofed header is ignored", httpguard.KeyFromClient(httpguard.ClientIP{}), request("198.51.100.7:5555", xff, "1.1.1.1", "Forwarded", "for=1.1.1.1"), "198.51.100.7"},
		{"untrusted peer: a spoofed header is ignored", viaLB, request("198.51.100.7:5555", xff, "1.1.1.1"), "198.51.100.7"},
		{"untrusted peer: even a trusted address in it", viaLB, request("198.51.100.7:5555", xff, "10.0.0.9"), "198.51.100.7"},
		{"spoof, real client, through the proxy", viaLB, request("10.0.0.1:5555", xff, "1.1.1.1, 198.51.100.7"), "198.51.100.7"},
		{"spoof in a line of its own", viaLB, request("10.0.0.1:5555", xff, "1.1.1.1", xff, "198.51.100.7"), "198.51.100.7"},
		{"through two proxies", viaLB, request("10.0.0.1:5555", xff, "1.1.1.1, 198.51.100.7, 10.0.0.2"), "198.51.100.7"},
		{"the other header is not read", viaLB, request("10.0.0.1:5555", xff, "198.51.100.7", "Forwarded", "for=1.1.1.1"), "198.51.100.7"},
		{"Forwarded: spoof, real client", forwarded, request("10.0.0.1:5555", "Forwarded", `for=1.1.1.1;proto=http, for="[2001:db8::7]:4711"`), "2001:db8::/64"},
		{"Forwarded: X-Forwarded-For is not read", forwarded, request("10.0.0.1:5555", xff, "1.1.1.1"), "10.0.0.1"},
		{"Forwarded: obfuscated", forwarded, request("10.0.0.1:5555", "Forwarded", `for=198.51.100.7, for="_hidden", for=10.0.0.2`), "10.0.0.2"},
		{"Forwarded: unknown", forwarded, request("10.0.0.1:5555", "Forwarded", `for=unknown`), "10.0.0.1"},
		{"the proxy sent no header", viaLB, request("10.0.0.1:5555"), "10.0.0.1"},
		{"garbage from the proxy", viaLB, request("10.0.0.1:5555", xff, "198.51.100.7, <script>"), "10.0.0.1"},
		{"bad IPs", viaLB, request("10.0.0.1:5555", xff, "198.51.100.7, 300.1.2.3"), "10.0.0.1"},
		{"a 10 MB header", viaLB, request("10.0.0.1:5555", xff, strings.Repeat("1", 10<<20)), "10.0.0.1"},
		{"a 10 MB header ending in the client", viaLB, request("10.0.0.1:5555", xff, strings.Repeat("1,", 5<<20)+"198.51.100.7"), "198.51.100.7"},
		{"10,000 entries", viaLB, request("10.0.0.1:5555", xff, "198.51.100.7"+strings.Repeat(", 10.0.0.3", 10_000)), "10.0.0.3"},
		{"ports", viaLB, request("10.0.0.1:5555", xff, "198.51.100.7:4711, 10.0.0.2:80"), "198.51.100.7"},
		{"IPv6 peer, port: its /64", viaLB, request("[2001:db8::7]:5555"), "2001:db8::/64"},
		{"IPv6 forwarded: its /64", viaLB, request("[2001:db8:ffff::1]:5555", xff, "2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64"},
		{"IPv6 whole, peer, port", whole, request("[2001:db8::7]:5555"), "2001:db8::7"},
		{"IPv6 whole, in brackets with a port", whole, request("[2001:db8:ffff::1]:5555", xff, "[2001:db8::7]:4711"), "2001:db8::7"},
		{"IPv6 whole, written long", whole, request("[2001:db8:ffff::1]:5555", xff, "2001:0DB8:0:0:0:0:0:7"), "2001:db8::7"},
		{"IPv6 whole, zones are dropped", whole, request("[fe80::1%eth0]:5555"), "fe80::1"},
		{"IPv6 whole, zones in the header are dropped", whole, request("10.0.0.1:5555", xff, "fe80::7%25attacker"), "fe80::7"},
		{"IPv6 zones are dropped from the /64", viaLB, request("[fe80::1%eth0]:5555"), "fe80::/64"},
		{"IPv4-mapped peer", viaLB, request("[::ffff:198.51.100.7]:5555"), "198.51.100.7"},
		{"IPv4-mapped proxy", viaLB, request("[::ffff:10.0.0.1]:5555", xff, "198.51.100.7"), "198.51.100.7"},
		{"IPv6 by its /56", perNet, request("[2001:db8:1:2:aaaa::1]:5555"), "2001:db8:1::/56"},
		{"IPv6 by its /56, forwarded", perNet, request("10.0.0.1:5555", xff, "2001:db8:1:2:bbbb::2"), "2001:db8:1::/56"},
		{"IPv4 by its /24", perNet, request("198.51.100.7:5555"), "198.51.100.0/24"},
		{"IPv4-mapped by its IPv4 /24", perNet, request("[::ffff:198.51.100.7]:5555"), "198.51.100.0/24"},
		{"IPv4 whole whatever the IPv6 bits", whole, request("198.51.100.7:5555"), "198.51.100.7"},
		{"a peer that is no IP address", viaLB, request("@", xff, "198.51.100.7"), ""},
		{"an empty peer", viaLB, request("", xff, "198.51.100.7"), ""},
		{"a 10 MB peer", viaLB, request(strings.Repeat("1", 10<<20)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keyOf(t, tc.r, tc.opt); got != tc.want {
				t.Errorf("key %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClientIPAddr(t *testing.T) {
	c := httpguard.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Header: "x-real-ip"}
	for _, tc := range []struct {
		r    *http.Request
		want netip.Addr
	}{
		{request("10.0.0.1:1", "X-Real-Ip", "198.51.100.7"), netip.MustParseAddr("198.51.100.7")},
		{request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.7"), netip.MustParseAddr("10.0.0.1")},
		{request("198.51.100.8:1", "X-Real-Ip", "198.51.100.7"), netip.MustParseAddr("198.51.100.8")},
		{request("unix"), netip.Addr{}},
	} {
		if got := c.Addr(tc.r); got != tc.want {
			t.Errorf("Addr(%s, %v) = %v, want %v", tc.r.RemoteAddr, tc.r.Header, got, tc.want)
		}
	}
}

// TestKeyFromClientCopiesItsConfiguration changes the prefixes after the
// option is made: the option keeps what it was given.
func TestKeyFromClientCopiesItsConfiguration(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	opt := httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: trusted})
	trusted[0] = netip.MustParsePrefix("198.51.100.0/24") // now the client is "trusted"
	if got := keyOf(t, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.7"), opt); got != "198.51.100.7" {
		t.Errorf("key %q after the caller changed its slice, want 198.51.100.7", got)
	}
}

func TestKeyFromHeader(t *testing.T) {
	long := strings.Repeat("k", 10<<20)
	for _, tc := range []struct {
		name string
		r    *http.Request
		want string
	}{
		{"present", request("1.1.1.1:1", "X-Api-Key", "alice"), "alice"},
		{"missing: the empty key", request("1.1.1.1:1"), ""},
		{"empty: the empty key", request("1.1.1.1:1", "X-Api-Key", ""), ""},
		{"two lines: the first", request("1.1.1.1:1", "X-Api-Key", "alice", "X-Api-Key", "bob"), "alice"},
		{"10 MB: cut", request("1.1.1.1:1", "X-Api-Key", long), long[:bounds.MaxKeyLength]},
		{"any bytes", request("1.1.1.1:1", "X-Api-Key", "a\x00b,c;d"), "a\x00b,c;d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keyOf(t, tc.r, httpguard.KeyFromHeader("x-api-key")); got != tc.want {
				t.Errorf("key %.40q (%d bytes), want %.40q (%d bytes)", got, len(got), tc.want, len(tc.want))
			}
		})
	}
}

func TestKeyFromAndWhichKeyWins(t *testing.T) {
	tenant := httpguard.KeyFrom(func(r *http.Request) string { return "tenant-" + r.URL.Query().Get("t") })
	fromOptions := httpguard.WithEntryOptions(func(r *http.Request) []slidegate.EntryOption {
		if k := r.Header.Get("X-Api-Key"); k != "" {
			return []slidegate.EntryOption{slidegate.WithKey(k)}
		}
		return nil
	})
	r := httptest.NewRequest("GET", "/?t=a", nil)
	for _, tc := range []struct {
		name string
		opts []httpguard.Option
		r    *http.Request
		want string
	}{
		{"no key option: the empty key", nil, r, ""},
		{"KeyFrom", []httpguard.Option{tenant}, r, "tenant-a"},
		{"KeyFrom nil keeps the key option", []httpguard.Option{tenant, httpguard.KeyFrom(nil)}, r, "tenant-a"},
		{"the last key option wins", []httpguard.Option{tenant, httpguard.KeyFromClient(httpguard.ClientIP{})}, r, "192.0.2.1"},
		{"WithKey among the entry options wins", []httpguard.Option{fromOptions, tenant}, request("1.1.1.1:1", "X-Api-Key", "alice"), "alice"},
		{"entry options without a key leave it", []httpguard.Option{fromOptions, tenant}, r, "tenant-a"},
		{"KeyFrom's key is cut", []httpguard.Option{httpguard.KeyFrom(func(*http.Request) string { return strings.Repeat("x", 1000) })}, r, strings.Repeat("x", bounds.MaxKeyLength)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keyOf(t, tc.r, tc.opts...); got != tc.want {
				t.Errorf("key %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBlockedResponseDoesNotEchoTheKey blocks a request whose key is markup
// and checks that the response says nothing of it.
func TestBlockedResponseDoesNotEchoTheKey(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unknownGET, Limit: 0, PerKey: true}}})
	h := httpguard.Middleware(g, httpguard.KeyFromHeader("X-Api-Key"))(http.NotFoundHandler())
	const key = `<script>alert("key")</script>`
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request("1.1.1.1:1", "X-Api-Key", key))
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", w.Code)
	}
	if body := w.Body.String(); body != "Too Many Requests\n" {
		t.Errorf("body %q, want the status text only", body)
	}
	for name, values := range w.Header() {
		for _, v := range values {
			if strings.Contains(v, "script") {
				t.Errorf("header %s: %q repeats the key", name, v)
			}
		}
	}
}

// TestPerKeyRuleThroughMiddleware runs a per-key rule end to end: one
// request per client address per second, behind a trusted proxy, on a real
// server, whose connections come from 127.0.0.1.
func TestPerKeyRuleThroughMiddleware(t *testing.T) {
	g, clk := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /login", Limit: 1, PerKey: true}}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(http.ResponseWriter, *http.Request) {})
	srv := httptest.NewServer(httpguard.Middleware(g, httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))(mux))
	defer srv.Close()
	get := func(client string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/login", nil)
		if client != "" {
			req.Header.Set("X-Forwarded-For", "6.6.6.6, "+client) // the first is the client's invention
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, step := range []struct {
		client string
		want   int
	}{
		{"198.51.100.1", 200}, {"198.51.100.1", 429}, {"198.51.100.2", 200}, {"", 200}, {"", 429},
		{"2001:db8::1", 200}, {"2001:db8::1", 429}, {"198.51.100.2", 429},
	} {
		if got := get(step.client); got != step.want {
			t.Fatalf("step %d, client %q: status %d, want %d", i, step.client, got, step.want)
		}
	}
	clk.Advance(time.Second + 100*time.Millisecond)
	if got := get("198.51.100.1"); got != 200 {
		t.Errorf("a second later: status %d, want 200", got)
	}
	if s := stats(t, g, "GET /login"); s.Allowed != 5 || s.Blocked != 4 {
		t.Errorf("stats %+v, want 5 allowed and 4 blocked", s)
	}
}

// TestTransportKeys: an outgoing request is keyed by a function or a header;
// it has no client address.
func TestTransportKeys(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET example.com", Limit: 0, PerKey: true}}})
	base := roundTripFunc(func(*http.Request) (*http.Response, error) {
		t.Fatal("a blocked request reached the network")
		return nil, nil
	})
	r := httptest.NewRequest("GET", "http://example.com/", nil)
	r.RemoteAddr = "" // as on a client's request
	r.Header.Set("X-Tenant", "acme")
	for _, tc := range []struct {
		opt  httpguard.Option
		want string
	}{
		{httpguard.KeyFromHeader("X-Tenant"), "acme"},
		{httpguard.KeyFrom(func(r *http.Request) string { return r.URL.Host }), "example.com"},
		{httpguard.KeyFromClient(httpguard.ClientIP{}), ""},
	} {
		_, err := httpguard.Transport(g, base, tc.opt).RoundTrip(r)
		var be *slidegate.BlockError
		if !errors.As(err, &be) || be.Key != tc.want {
			t.Errorf("error %v, want a block of the key %q", err, tc.want)
		}
	}
}
