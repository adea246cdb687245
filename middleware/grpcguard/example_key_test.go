package grpcguard_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/grpcguard"
)

func ExampleKeyFromMetadata() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	// One health check per tenant per minute.
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "/grpc.health.v1.Health/Check", Limit: 1, Interval: slidegate.Duration(time.Minute), PerKey: true},
	}})
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpcguard.UnaryServerInterceptor(g, grpcguard.KeyFromMetadata("x-tenant"))),
		grpc.ChainStreamInterceptor(grpcguard.StreamServerInterceptor(g, grpcguard.KeyFromMetadata("x-tenant"))),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	defer srv.Stop()
	conn := listen(srv)
	defer conn.Close()

	client := healthpb.NewHealthClient(conn)
	for _, tenant := range []string{"acme", "acme", "globex"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", tenant)
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		fmt.Println(tenant, status.Code(err))
	}
	// Output:
	// acme OK
	// acme ResourceExhausted
	// globex OK
}

func ExampleKeyFromPeer() {
	// Each client address on its own; behind grpc-gateway on this host,
	// which names the HTTP client in x-forwarded-for.
	byClient := grpcguard.KeyFromPeer(netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128"))
	_ = grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpcguard.UnaryServerInterceptor(nil, byClient)),
		grpc.ChainStreamInterceptor(grpcguard.StreamServerInterceptor(nil, byClient)),
	)
}

func ExampleKeyFrom() {
	// A client that limits the calls it makes for each of its own users,
	// whom it keeps in the context.
	type userKey struct{}
	byUser := grpcguard.KeyFrom(func(ctx context.Context, _ string) string {
		user, _ := ctx.Value(userKey{}).(string)
		return user
	})
	_ = []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(grpcguard.UnaryClientInterceptor(nil, byUser)),
		grpc.WithChainStreamInterceptor(grpcguard.StreamClientInterceptor(nil, byUser)),
	}
}
