package grpcguard_test

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/middleware/grpcguard"
)

// The full method names of grpc-go's test service.
const (
	unaryMethod        = "/grpc.testing.TestService/UnaryCall"
	serverStreamMethod = "/grpc.testing.TestService/StreamingOutputCall"
	clientStreamMethod = "/grpc.testing.TestService/StreamingInputCall"
	bidiMethod         = "/grpc.testing.TestService/FullDuplexCall"
)

// testService implements grpc-go's test service. Each RPC counts itself in
// calls and ends with the status its request asks for.
type testService struct {
	testpb.UnimplementedTestServiceServer
	calls atomic.Int64
}

// statusOf returns the error a request's EchoStatus asks for, or nil.
func statusOf(s *testpb.EchoStatus) error {
	if s == nil || s.Code == 0 {
		return nil
	}
	return status.Error(codes.Code(s.Code), s.Message)
}

func (s *testService) UnaryCall(_ context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.calls.Add(1)
	if err := statusOf(req.GetResponseStatus()); err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{}, nil
}

// StreamingOutputCall sends one response per response parameter, then ends
// with the status asked for.
func (s *testService) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	s.calls.Add(1)
	for range req.GetResponseParameters() {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
	return statusOf(req.GetResponseStatus())
}

// StreamingInputCall counts the requests until the client closes its side.
func (s *testService) StreamingInputCall(stream grpc.ClientStreamingServer[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]) error {
	s.calls.Add(1)
	n := int32(0)
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: n})
		}
		if err != nil {
			return err
		}
		n++
	}
}

// FullDuplexCall answers each request, or ends with the status a request
// asks for; it ends when the client closes its side or goes away.
func (s *testService) FullDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	s.calls.Add(1)
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := statusOf(req.GetResponseStatus()); err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
}

// serve starts a gRPC server with the test service on a loopback port and
// returns the service and a client connected to it. The server and the
// connection are closed when the test ends.
func serve(t *testing.T, sopts []grpc.ServerOption, dopts ...grpc.DialOption) (*testService, testpb.TestServiceClient) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(sopts...)
	svc := &testService{}
	testpb.RegisterTestServiceServer(srv, svc)
	go srv.Serve(lis) //nolint:errcheck // returns when stopped
	t.Cleanup(srv.Stop)
	dopts = append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), dopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return svc, testpb.NewTestServiceClient(conn)
}

// guarded returns a guard on a manual clock with rules in force.
func guarded(t *testing.T, rules slidegate.Rules) (*slidegate.Guard, *clock.Manual) {
	t.Helper()
	c := clock.NewManual(0)
	g, err := slidegate.New(slidegate.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	return g, c
}

// withServer returns server options installing both server interceptors.
func withServer(g *slidegate.Guard, opts ...grpcguard.Option) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(grpcguard.UnaryServerInterceptor(g, opts...)),
		grpc.ChainStreamInterceptor(grpcguard.StreamServerInterceptor(g, opts...)),
	}
}

// withClient returns dial options installing both client interceptors.
func withClient(g *slidegate.Guard, opts ...grpcguard.Option) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(grpcguard.UnaryClientInterceptor(g, opts...)),
		grpc.WithChainStreamInterceptor(grpcguard.StreamClientInterceptor(g, opts...)),
	}
}

// unary asks the test service for a unary call ending with code c.
func unary(ctx context.Context, c testpb.TestServiceClient, code codes.Code) error {
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(code), Message: code.String()}})
	return err
}

// stats returns the guard's statistics of resource, failing the test if it
// keeps none.
func stats(t *testing.T, g *slidegate.Guard, resource string) slidegate.ResourceStats {
	t.Helper()
	s, ok := g.Stats(resource)
	if !ok {
		t.Fatalf("no statistics for %q", resource)
	}
	return s
}

// wantOutcomes checks a resource's counts of passed, blocked, succeeded and
// failed requests, and that none is in flight.
func wantOutcomes(t *testing.T, g *slidegate.Guard, resource string, pass, block, success, errs int64) {
	t.Helper()
	s := stats(t, g, resource)
	if s.Allowed != pass || s.Blocked != block || s.Succeeded != success || s.Failed != errs || s.InFlight != 0 {
		t.Errorf("%s: pass %d block %d success %d error %d in flight %d; want %d %d %d %d 0",
			resource, s.Allowed, s.Blocked, s.Succeeded, s.Failed, s.InFlight, pass, block, success, errs)
	}
}

// wantCode checks err's status code.
func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("code %v (err %v); want %v", got, err, want)
	}
}

// retryDelay returns the delay of err's RetryInfo detail, or -1 if it has
// none.
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return -1
}

// eventually waits, for at most 10 seconds, until cond holds: for work that
// another goroutine does, not for time to pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }
