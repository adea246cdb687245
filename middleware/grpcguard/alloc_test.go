package grpcguard_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/grpcguard"
)

// TestUnaryInterceptorsAllocateNothingWhenAdmitted checks that the unary
// interceptors add no allocation to an admitted RPC, with a QPS rule and a
// breaker in force.
func TestUnaryInterceptorsAllocateNothingWhenAdmitted(t *testing.T) {
	if raceDetector {
		t.Skip("sync.Pool drops entries under the race detector")
	}
	g, _ := guarded(t, slidegate.Rules{
		Flow:     []slidegate.FlowRule{{Resource: unaryMethod, Limit: 1 << 31}},
		Breakers: []slidegate.BreakerRule{{Resource: unaryMethod, Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5}},
	})
	ctx := context.Background()
	server := grpcguard.UnaryServerInterceptor(g)
	info := &grpc.UnaryServerInfo{FullMethod: unaryMethod}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	if n := testing.AllocsPerRun(1000, func() { server(ctx, nil, info, handler) }); n != 0 {
		t.Errorf("server interceptor: %v allocations per RPC; want 0", n)
	}
	client := grpcguard.UnaryClientInterceptor(g)
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	if n := testing.AllocsPerRun(1000, func() { client(ctx, unaryMethod, nil, nil, nil, invoker) }); n != 0 {
		t.Errorf("client interceptor: %v allocations per RPC; want 0", n)
	}
}

// TestServerKeysCost measures what each key option adds to an admitted
// unary RPC on a server: nothing for a function that allocates nothing, one
// allocation for the metadata (grpc-go copies the values it returns), one
// for an IPv4 peer's address text, and none for an IPv6 peer's /64, whose
// key is made once.
func TestServerKeysCost(t *testing.T) {
	if raceDetector {
		t.Skip("sync.Pool drops entries under the race detector")
	}
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 1 << 31, PerKey: true}}})
	ctx := from(tcp("198.51.100.7:5555"), "x-tenant", "acme")
	info := &grpc.UnaryServerInfo{FullMethod: unaryMethod}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		opt  grpcguard.Option
		want float64
	}{
		{"KeyFrom", grpcguard.KeyFrom(func(context.Context, string) string { return "acme" }), 0},
		{"KeyFromMetadata", grpcguard.KeyFromMetadata("x-tenant"), 1},
		{"KeyFromPeer", grpcguard.KeyFromPeer(), 1},
		{"KeyFromPeer, IPv6", grpcguard.KeyFromPeer(), 0},
	} {
		ctx := ctx
		if strings.HasSuffix(tc.name, "IPv6") {
			ctx = from(tcp("[2001:db8::7]:5555"))
		}
		server := grpcguard.UnaryServerInterceptor(g, tc.opt)
		if n := testing.AllocsPerRun(1000, func() { server(ctx, nil, info, handler) }); n != tc.want {
			t.Errorf("%s: %v allocations per RPC; want %v", tc.name, n, tc.want)
		}
	}
}
