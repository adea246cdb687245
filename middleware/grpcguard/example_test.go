package grpcguard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/grpcguard"
)

// listen starts srv on a loopback port and returns a connection to it.
func listen(srv *grpc.Server, dopts ...grpc.DialOption) *grpc.ClientConn {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(lis) //nolint:errcheck // returns when stopped
	dopts = append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), dopts...)
	if err != nil {
		panic(err)
	}
	return conn
}

func ExampleUnaryServerInterceptor() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "/grpc.health.v1.Health/Check", Limit: 2, Interval: slidegate.Duration(time.Minute)},
	}})
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpcguard.UnaryServerInterceptor(g)),
		grpc.ChainStreamInterceptor(grpcguard.StreamServerInterceptor(g)),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	defer srv.Stop()
	conn := listen(srv)
	defer conn.Close()

	client := healthpb.NewHealthClient(conn)
	for range 3 {
		resp, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			st := status.Convert(err)
			msg, _, _ := strings.Cut(st.Message(), ", retry after")
			_, hasRetryInfo := st.Details()[0].(*errdetails.RetryInfo)
			fmt.Printf("%v: %s (RetryInfo: %v)\n", st.Code(), msg, hasRetryInfo)
			continue
		}
		fmt.Println(resp.GetStatus())
	}
	s, _ := g.Stats("/grpc.health.v1.Health/Check")
	fmt.Println("passed", s.Allowed, "blocked", s.Blocked)
	// Output:
	// SERVING
	// SERVING
	// ResourceExhausted: slidegate: /grpc.health.v1.Health/Check blocked by qps: rate limited (RetryInfo: true)
	// passed 2 blocked 1
}

func ExampleUnaryClientInterceptor() {
	// A dependency that fails.
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
			return nil, status.Error(codes.Internal, "database down")
		},
	))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	defer srv.Stop()

	// After 3 failures, fail fast for 5 seconds without calling it.
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	minRequests := int64(1)
	_ = g.SetRules(slidegate.Rules{Breakers: []slidegate.BreakerRule{{
		Resource: "/grpc.health.v1.Health/Check", Strategy: slidegate.ErrorCountBreaker, Count: 3,
		MinRequests: &minRequests,
	}}})
	conn := listen(srv,
		grpc.WithChainUnaryInterceptor(grpcguard.UnaryClientInterceptor(g)),
		grpc.WithChainStreamInterceptor(grpcguard.StreamClientInterceptor(g)),
	)
	defer conn.Close()

	client := healthpb.NewHealthClient(conn)
	for range 4 {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		var be *slidegate.BlockError
		fmt.Println(status.Code(err), errors.As(err, &be))
	}
	// Output:
	// Internal false
	// Internal false
	// Internal false
	// Unavailable true
}

func ExampleWithErrorCodes() {
	// Count Aborted (a lost transaction race) as a failure too.
	failures := append(grpcguard.DefaultErrorCodes(), codes.Aborted)
	in := grpcguard.UnaryServerInterceptor(nil, grpcguard.WithErrorCodes(failures...))
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(in))
}

func ExampleWithResource() {
	// One resource per service, not per method: "/shop.Orders/Create" and
	// "/shop.Orders/List" share "shop.Orders".
	perService := grpcguard.WithResource(func(_ context.Context, fullMethod string) string {
		return fullMethod[1:strings.LastIndex(fullMethod, "/")]
	})
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(grpcguard.UnaryServerInterceptor(nil, perService)))
}

func ExampleWithBlockStatus() {
	// Tell clients to back off with Unavailable, which their retry
	// policies may treat as transient, whatever rule refused them.
	backOff := func(be *slidegate.BlockError) *status.Status {
		p := grpcguard.BlockStatus(be).Proto() // keep the message and the RetryInfo
		p.Code = int32(codes.Unavailable)
		return status.FromProto(p)
	}
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(
		grpcguard.UnaryServerInterceptor(nil, grpcguard.WithBlockStatus(backOff)),
	))

	st := backOff(&slidegate.BlockError{Resource: "/shop.Orders/Create", Rule: "qps", Reason: flow.RateLimited, RetryAfter: time.Second})
	fmt.Println(st.Code(), "-", st.Message())
	fmt.Println(st.Details()[0].(*errdetails.RetryInfo).GetRetryDelay().AsDuration())
	// Output:
	// Unavailable - slidegate: /shop.Orders/Create blocked by qps: rate limited, retry after 1s
	// 1s
}
