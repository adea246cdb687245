package grpcguard_test

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"

	"google.golang.org/grpc"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/grpcguard"
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
// makes each RPC from a new address of its /64, as it may at will, is held
// to one key's limit by KeyFromPeer, directly and through a trusted
// gateway, while the /64 next to it keeps a limit of its own; with
// KeyFromPeerNetwork, by the network it says.
func TestAClientRotatingAddressesInItsNetworkIsHeldToOneKey(t *testing.T) {
	const limit, sent = 5, 100
	gw := netip.MustParsePrefix("10.0.0.0/8")
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name    string
		opt     grpcguard.Option
		via     bool // through the gateway
		network string
		want    int
	}{
		{"direct, rotating in a /64", grpcguard.KeyFromPeer(gw), false, "2001:db8:1:2::/64", limit},
		{"through the gateway, rotating in a /64", grpcguard.KeyFromPeer(gw), true, "2001:db8:1:3::/64", limit},
		{"whole addresses", grpcguard.KeyFromPeerNetwork(0, 128, gw), false, "2001:db8:1:2::/64", sent},
		{"rotating in a /56, keyed by the /56", grpcguard.KeyFromPeerNetwork(0, 56, gw), true, "2001:db8:1:200::/56", limit},
		{"IPv4 addresses of a /24, each its own", grpcguard.KeyFromPeer(gw), false, "198.51.100.0/24", sent},
		{"IPv4 addresses of a /24, keyed by the /24", grpcguard.KeyFromPeerNetwork(24, 0, gw), true, "198.51.100.0/24", limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: limit, PerKey: true}}})
			in := grpcguard.UnaryServerInterceptor(g, tc.opt)
			info := &grpc.UnaryServerInfo{FullMethod: unaryMethod}
			handler := func(context.Context, any) (any, error) { return nil, nil }
			p := netip.MustParsePrefix(tc.network)
			allowed := 0
			for range sent {
				a := randomIn(rng, p)
				ctx := from(tcp(netip.AddrPortFrom(a, 4711).String()))
				if tc.via {
					ctx = from(tcp("10.0.0.1:5555"), "x-forwarded-for", a.String())
				}
				if _, err := in(ctx, nil, info, handler); err == nil {
					allowed++
				}
			}
			if allowed != tc.want {
				t.Errorf("%d of %d RPCs allowed, want %d", allowed, sent, tc.want)
			}
		})
	}
}
