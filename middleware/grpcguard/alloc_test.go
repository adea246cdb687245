package grpcguard_test

import (
	"context"
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
