package grpcguard_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/grpcguard"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

func ExampleWithRetry() {
	// A service whose first call fails on the way in.
	var calls atomic.Int64
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			if calls.Add(1) == 1 {
				return nil, status.Error(codes.Unavailable, "restarting")
			}
			return next(ctx, req)
		},
	))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	defer srv.Stop()

	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	// Retries may add 20% to the calls of the last 10 s, and 10 per second
	// more: however the service fails, this client sends it at most 1.2
	// times its calls, plus 10 a second.
	budget, err := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10})
	if err != nil {
		panic(err)
	}
	conn := listen(srv, grpc.WithChainUnaryInterceptor(grpcguard.UnaryClientInterceptor(g,
		grpcguard.WithRetry(budget, httpguard.RetryPolicy{MaxRetries: 3, BaseBackoff: 10 * time.Millisecond}))))
	defer conn.Close()

	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	s, _ := g.Stats("/grpc.health.v1.Health/Check")
	fmt.Println(status.Code(err), "after", calls.Load(), "attempts;", "the guard counted", s.Allowed, "and", s.Failed, "failed")
	// Output:
	// OK after 2 attempts; the guard counted 2 and 1 failed
}
