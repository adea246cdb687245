package httpguard_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// BenchmarkMiddlewareKeys measures a request through Middleware, with a QPS
// rule in force, without a key and with each way of taking one, against a
// handler that does nothing.
func BenchmarkMiddlewareKeys(b *testing.B) {
	lb := netip.MustParsePrefix("10.0.0.0/8")
	for _, bc := range []struct {
		name string
		r    *http.Request
		opt  httpguard.Option
		rule slidegate.FlowRule
	}{
		{"none", request("198.51.100.7:5555"), nil, slidegate.FlowRule{Limit: 1 << 31}},
		{"client-ip", request("198.51.100.7:5555"), httpguard.KeyFromClient(httpguard.ClientIP{}), slidegate.FlowRule{Limit: 1 << 31}},
		{"client-ip/xff-3-hops", request("10.0.0.1:5555", "X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.0.0.2"), httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: []netip.Prefix{lb}}), slidegate.FlowRule{Limit: 1 << 31}},
		{"header", request("198.51.100.7:5555", "X-Api-Key", "alice"), httpguard.KeyFromHeader("X-Api-Key"), slidegate.FlowRule{Limit: 1 << 31}},
		{"client-ip/per-key-rule", request("198.51.100.7:5555"), httpguard.KeyFromClient(httpguard.ClientIP{}), slidegate.FlowRule{Limit: 1 << 31, PerKey: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rule := bc.rule
			rule.Resource = unknownGET
			g, err := slidegate.New()
			if err != nil {
				b.Fatal(err)
			}
			if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{rule}}); err != nil {
				b.Fatal(err)
			}
			h := httpguard.Middleware(g, bc.opt)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			w := discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, bc.r)
			}
		})
	}
}
