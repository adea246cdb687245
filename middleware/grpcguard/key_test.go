package grpcguard_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/middleware/grpcguard"
)

// blockEveryKey is a per-key rule that blocks every key of the unary
// method, so that the *slidegate.BlockError shows the key the RPC reached
// the guard with.
var blockEveryKey = slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 0, PerKey: true}}}

// captureKey returns an option that stores the key of each blocked RPC in
// *key.
func captureKey(key *string) grpcguard.Option {
	return grpcguard.WithBlockStatus(func(be *slidegate.BlockError) *status.Status {
		*key = be.Key
		return nil
	})
}

// serverKeyOf returns the key with which a unary RPC with ctx reaches the
// guard through the server interceptor with opt, and checks that the
// stream interceptor gives the same.
func serverKeyOf(t *testing.T, ctx context.Context, opt grpcguard.Option) string {
	t.Helper()
	g, _ := guarded(t, blockEveryKey)
	unaryKey, streamKey := "(none)", "(none)"
	un := grpcguard.UnaryServerInterceptor(g, opt, captureKey(&unaryKey))
	_, err := un(ctx, nil, &grpc.UnaryServerInfo{FullMethod: unaryMethod}, func(context.Context, any) (any, error) {
		t.Fatal("an RPC reached the handler through a rule that blocks every key")
		return nil, nil
	})
	wantCode(t, err, codes.ResourceExhausted)
	st := grpcguard.StreamServerInterceptor(g, opt, captureKey(&streamKey))
	err = st(&testService{}, fakeServerStream{ctx}, &grpc.StreamServerInfo{FullMethod: unaryMethod}, func(any, grpc.ServerStream) error {
		t.Fatal("a stream reached the handler through a rule that blocks every key")
		return nil
	})
	wantCode(t, err, codes.ResourceExhausted)
	if unaryKey != streamKey {
		t.Errorf("unary key %q, stream key %q: want the same", unaryKey, streamKey)
	}
	return unaryKey
}

// from returns a server context of an RPC from addr carrying the metadata
// pairs given.
func from(addr net.Addr, kv ...string) context.Context {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
	if addr == nil {
		return ctx
	}
	return peer.NewContext(ctx, &peer.Peer{Addr: addr})
}

func tcp(s string) *net.TCPAddr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }

// TestPeerKeyAsAnAttackerSeesIt sends x-forwarded-for metadata an attacker
// wrote, directly and through a trusted proxy: only what the proxy wrote
// counts.
func TestPeerKeyAsAnAttackerSeesIt(t *testing.T) {
	gw := grpcguard.KeyFromPeer(netip.MustParsePrefix("10.0.0.0/8"))
	whole := grpcguard.KeyFromPeerNetwork(0, 128, netip.MustParsePrefix("10.0.0.0/8"))
	xff := "x-forwarded-for"
	for _, tc := range []struct {
		name string
		opt  grpcguard.Option
		ctx  context.Context
		want string
	}{
		{"the peer", grpcguard.KeyFromPeer(), from(tcp("198.51.100.7:5555")), "198.51.100.7"},
		{"no trusted proxy: metadata ignored", grpcguard.KeyFromPeer(), from(tcp("10.0.0.1:5555"), xff, "1.1.1.1"), "10.0.0.1"},
		{"untrusted peer: spoofed metadata ignored", gw, from(tcp("198.51.100.7:5555"), xff, "1.1.1.1"), "198.51.100.7"},
		{"spoof, real client, through the gateway", gw, from(tcp("10.0.0.1:5555"), xff, "1.1.1.1, 198.51.100.7"), "198.51.100.7"},
		{"spoof in a value of its own", gw, from(tcp("10.0.0.1:5555"), xff, "1.1.1.1", xff, "198.51.100.7"), "198.51.100.7"},
		{"the gateway sent none", gw, from(tcp("10.0.0.1:5555")), "10.0.0.1"},
		{"garbage from the gateway", gw, from(tcp("10.0.0.1:5555"), xff, "198.51.100.7, localhost"), "10.0.0.1"},
		{"a 10 MB value", gw, from(tcp("10.0.0.1:5555"), xff, strings.Repeat("1", 10<<20)), "10.0.0.1"},
		{"10,000 entries", gw, from(tcp("10.0.0.1:5555"), xff, "198.51.100.7"+strings.Repeat(",10.0.0.3", 10_000)), "10.0.0.3"},
		{"ports and brackets", gw, from(tcp("10.0.0.1:5555"), xff, "[2001:db8:1:2::7]:4711, 10.0.0.2:80"), "2001:db8:1:2::/64"},
		{"IPv6 peer: its /64", gw, from(tcp("[2001:db8::7]:5555")), "2001:db8::/64"},
		{"IPv6 zone dropped", gw, from(&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"}), "fe80::/64"},
		{"IPv6 whole: ports and brackets", whole, from(tcp("10.0.0.1:5555"), xff, "[2001:db8::7]:4711, 10.0.0.2:80"), "2001:db8::7"},
		{"IPv6 whole: peer", whole, from(tcp("[2001:db8::7]:5555")), "2001:db8::7"},
		{"IPv6 whole: zone dropped", whole, from(&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"}), "fe80::1"},
		{"IPv4-mapped peer", gw, from(tcp("[::ffff:198.51.100.7]:5555")), "198.51.100.7"},
		{"IPv4-mapped gateway", gw, from(tcp("[::ffff:10.0.0.1]:5555"), xff, "198.51.100.7"), "198.51.100.7"},
		{"a Unix socket", gw, from(&net.UnixAddr{Name: "/run/app.sock", Net: "unix"}, xff, "198.51.100.7"), ""},
		{"no peer", gw, from(nil, xff, "198.51.100.7"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := serverKeyOf(t, tc.ctx, tc.opt); got != tc.want {
				t.Errorf("key %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPeerAddr(t *testing.T) {
	ctx := from(tcp("10.0.0.1:5555"), "x-forwarded-for", "6.6.6.6, 198.51.100.7")
	if got, want := grpcguard.PeerAddr(ctx, netip.MustParsePrefix("10.0.0.0/8")), netip.MustParseAddr("198.51.100.7"); got != want {
		t.Errorf("through a trusted gateway: %v, want %v", got, want)
	}
	if got, want := grpcguard.PeerAddr(ctx), netip.MustParseAddr("10.0.0.1"); got != want {
		t.Errorf("trusting none: %v, want %v", got, want)
	}
	if got := grpcguard.PeerAddr(context.Background()); got.IsValid() {
		t.Errorf("no peer: %v, want the zero Addr", got)
	}
}

func TestKeyFromMetadata(t *testing.T) {
	long := strings.Repeat("k", 10<<20)
	opt := grpcguard.KeyFromMetadata("X-Tenant") // any case: metadata keys are lower case
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"present", from(nil, "x-tenant", "acme"), "acme"},
		{"missing: the empty key", from(nil), ""},
		{"empty: the empty key", from(nil, "x-tenant", ""), ""},
		{"two values: the first", from(nil, "x-tenant", "acme", "x-tenant", "evil"), "acme"},
		{"10 MB: cut", from(nil, "x-tenant", long), long[:bounds.MaxKeyLength]},
		{"a map built by hand, in upper case", metadata.NewIncomingContext(context.Background(), metadata.MD{"X-Tenant": {"acme"}}), "acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := serverKeyOf(t, tc.ctx, opt); got != tc.want {
				t.Errorf("key %.40q (%d bytes), want %.40q (%d bytes)", got, len(got), tc.want, len(tc.want))
			}
		})
	}
}

func TestKeyFrom(t *testing.T) {
	byMethod := grpcguard.KeyFrom(func(_ context.Context, fullMethod string) string { return "m:" + fullMethod })
	if got := serverKeyOf(t, from(nil), byMethod); got != "m:"+unaryMethod {
		t.Errorf("key %q", got)
	}
	if got := serverKeyOf(t, from(nil, "x-tenant", "acme"), grpcguard.KeyFrom(nil)); got != "" {
		t.Errorf("KeyFrom(nil): key %q, want the empty key", got)
	}
	long := grpcguard.KeyFrom(func(context.Context, string) string { return strings.Repeat("x", 1000) })
	if got := serverKeyOf(t, from(nil), long); got != strings.Repeat("x", bounds.MaxKeyLength) {
		t.Errorf("a long key: %d bytes, want %d", len(got), bounds.MaxKeyLength)
	}
}

// TestClientInterceptorsKeyByFunctionOnly: a client has neither a peer nor
// incoming metadata, so the server options give its calls the empty key,
// and KeyFrom gives them the function's.
func TestClientInterceptorsKeyByFunctionOnly(t *testing.T) {
	type tenantKey struct{}
	byTenant := grpcguard.KeyFrom(func(ctx context.Context, _ string) string { s, _ := ctx.Value(tenantKey{}).(string); return s })
	// A context that has what a server's has, to show that the client
	// does not read it.
	ctx := context.WithValue(from(tcp("198.51.100.7:1"), "x-tenant", "acme"), tenantKey{}, "globex")
	for _, tc := range []struct {
		name string
		opts []grpcguard.Option
		want string
	}{
		{"KeyFrom", []grpcguard.Option{byTenant}, "globex"},
		{"KeyFromPeer is ignored", []grpcguard.Option{grpcguard.KeyFromPeer()}, ""},
		{"KeyFromMetadata is ignored", []grpcguard.Option{grpcguard.KeyFromMetadata("x-tenant")}, ""},
		{"the last wins", []grpcguard.Option{grpcguard.KeyFromPeer(), byTenant}, "globex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := guarded(t, blockEveryKey)
			unaryKey, streamKey := "(none)", "(none)"
			un := grpcguard.UnaryClientInterceptor(g, append(tc.opts, captureKey(&unaryKey))...)
			err := un(ctx, unaryMethod, nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
				t.Fatal("a blocked call was sent")
				return nil
			})
			wantCode(t, err, codes.ResourceExhausted)
			st := grpcguard.StreamClientInterceptor(g, append(tc.opts, captureKey(&streamKey))...)
			_, err = st(ctx, &grpc.StreamDesc{}, nil, unaryMethod, func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
				t.Fatal("a blocked stream was created")
				return nil, nil
			})
			wantCode(t, err, codes.ResourceExhausted)
			if unaryKey != tc.want || streamKey != tc.want {
				t.Errorf("keys %q (unary) and %q (stream), want %q", unaryKey, streamKey, tc.want)
			}
		})
	}
}

// TestBlockStatusDoesNotCarryTheKey blocks an RPC whose key is markup: the
// status the client gets says nothing of it.
func TestBlockStatusDoesNotCarryTheKey(t *testing.T) {
	g, _ := guarded(t, blockEveryKey)
	_, c := serve(t, withServer(g, grpcguard.KeyFromMetadata("x-tenant")))
	const key = "<script>tenant</script>"
	err := unary(metadata.AppendToOutgoingContext(context.Background(), "x-tenant", key), c, codes.OK)
	wantCode(t, err, codes.ResourceExhausted)
	st := status.Convert(err)
	if strings.Contains(st.Message(), "script") {
		t.Errorf("message %q repeats the key", st.Message())
	}
	for _, d := range st.Details() {
		if strings.Contains(fmt.Sprint(d), "script") {
			t.Errorf("detail %v repeats the key", d)
		}
	}
}

// TestPerKeyRuleThroughInterceptors runs a per-key rule end to end on a
// real server: one RPC per tenant per second, and one per client address.
func TestPerKeyRuleThroughInterceptors(t *testing.T) {
	g, clk := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 1, PerKey: true}}})
	var peerKey string
	_, c := serve(t, withServer(g, grpcguard.KeyFromMetadata("x-tenant")))
	call := func(tenant string) codes.Code {
		ctx := context.Background()
		if tenant != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", tenant)
		}
		return status.Code(unary(ctx, c, codes.OK))
	}
	for i, step := range []struct {
		tenant string
		want   codes.Code
	}{
		{"acme", codes.OK}, {"acme", codes.ResourceExhausted}, {"globex", codes.OK}, {"", codes.OK}, {"", codes.ResourceExhausted},
	} {
		if got := call(step.tenant); got != step.want {
			t.Fatalf("step %d, tenant %q: %v, want %v", i, step.tenant, got, step.want)
		}
	}
	clk.Advance(time.Second + 100*time.Millisecond)
	if got := call("acme"); got != codes.OK {
		t.Errorf("a second later: %v, want OK", got)
	}
	wantOutcomes(t, g, unaryMethod, 4, 2, 4, 0)

	// By peer: every connection of this test comes from 127.0.0.1.
	g2, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 1, PerKey: true}}})
	_, c2 := serve(t, withServer(g2, grpcguard.KeyFromPeer(), captureKey(&peerKey)))
	if err := unary(context.Background(), c2, codes.OK); err != nil {
		t.Fatal(err)
	}
	wantCode(t, unary(context.Background(), c2, codes.OK), codes.ResourceExhausted)
	if peerKey != "127.0.0.1" {
		t.Errorf("the peer's key %q, want 127.0.0.1", peerKey)
	}
}
