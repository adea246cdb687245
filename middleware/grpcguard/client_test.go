package grpcguard_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/grpcguard"
)

func TestUnaryClientBlockedCallNeverReachesTheNetwork(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 1}}})
	svc, c := serve(t, nil, withClient(g)...)

	if err := unary(context.Background(), c, codes.OK); err != nil {
		t.Fatal(err)
	}
	err := unary(context.Background(), c, codes.OK)
	wantCode(t, err, codes.ResourceExhausted)
	var be *slidegate.BlockError
	if !errors.As(err, &be) || be.Resource != unaryMethod || be.Reason != flow.RateLimited || be.Rule != "qps" {
		t.Errorf("errors.As: %+v; want the BlockError of %s", be, unaryMethod)
	}
	if !errors.Is(err, flow.ErrBlocked) {
		t.Error("the error is not flow.ErrBlocked")
	}
	if d := retryDelay(err); d <= 0 {
		t.Errorf("retry delay %v; want a positive one", d)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("server got %d calls; want 1", n)
	}
	wantOutcomes(t, g, unaryMethod, 1, 1, 1, 0)
	if in, _ := g.Stats(slidegate.InboundResource); in.Allowed != 0 || in.Blocked != 0 {
		t.Errorf("inbound pass %d block %d; want none (client calls are outbound)", in.Allowed, in.Blocked)
	}
}

func TestUnaryClientOpenBreakerFailsFast(t *testing.T) {
	g, c := guarded(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{{
		Resource: unaryMethod, Strategy: slidegate.ErrorCountBreaker, Count: 2, MinRequests: ptr(int64(1)),
	}}})
	svc, client := serve(t, nil, withClient(g)...)

	wantCode(t, unary(context.Background(), client, codes.Unavailable), codes.Unavailable)
	wantCode(t, unary(context.Background(), client, codes.NotFound), codes.NotFound) // the caller's mistake
	wantCode(t, unary(context.Background(), client, codes.DataLoss), codes.DataLoss)
	err := unary(context.Background(), client, codes.OK)
	wantCode(t, err, codes.Unavailable)
	var be *slidegate.BlockError
	if !errors.As(err, &be) || be.Reason != flow.BreakerOpen {
		t.Errorf("errors.As: %+v; want a BreakerOpen BlockError", be)
	}
	if n := svc.calls.Load(); n != 3 {
		t.Errorf("server got %d calls; want 3", n)
	}
	wantOutcomes(t, g, unaryMethod, 3, 1, 1, 2)

	c.Advance(time.Minute)
	if err := unary(context.Background(), client, codes.OK); err != nil {
		t.Fatalf("probe after the open timeout: %v", err)
	}
}

// TestUnaryClientThrottleWait checks a call that a throttle makes wait:
// cancelling its context ends it with codes.Canceled, unsent; otherwise it
// is sent when its place comes.
func TestUnaryClientThrottleWait(t *testing.T) {
	g, c := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: unaryMethod, Limit: 1, Type: slidegate.ThrottleRule, MaxWait: slidegate.Duration(10 * time.Second),
	}}})
	svc, client := serve(t, nil, withClient(g)...)
	if err := unary(context.Background(), client, codes.OK); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { errc <- unary(ctx, client, codes.OK) }()
	eventually(t, "the call waits", func() bool { return c.Sleepers() == 1 })
	cancel()
	wantCode(t, <-errc, codes.Canceled)
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("server got %d calls; want 1 (the cancelled call is not sent)", n)
	}

	go func() { errc <- unary(context.Background(), client, codes.OK) }()
	eventually(t, "the call waits", func() bool { return c.Sleepers() == 1 })
	c.Advance(time.Second)
	if err := <-errc; err != nil {
		t.Fatalf("after its wait: %v", err)
	}
	if n := svc.calls.Load(); n != 2 {
		t.Errorf("server got %d calls; want 2", n)
	}
}

func TestUnaryClientRecordsErrorsByCode(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	_, c := serve(t, nil, withClient(g, grpcguard.WithErrorCodes(codes.PermissionDenied))...)

	wantCode(t, unary(context.Background(), c, codes.PermissionDenied), codes.PermissionDenied)
	wantCode(t, unary(context.Background(), c, codes.Internal), codes.Internal)
	if err := unary(context.Background(), c, codes.OK); err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, g, unaryMethod, 3, 0, 2, 1)
}

func TestUnaryClientWithResourceAndBlockStatus(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "backend", Limit: 0}}})
	svc, c := serve(t, nil, withClient(g,
		grpcguard.WithResource(func(context.Context, string) string { return "backend" }),
		grpcguard.WithBlockStatus(func(be *slidegate.BlockError) *status.Status {
			return status.New(codes.Unavailable, "backend: "+be.Reason.String())
		}),
	)...)

	err := unary(context.Background(), c, codes.OK)
	wantCode(t, err, codes.Unavailable)
	if msg := status.Convert(err).Message(); msg != "backend: exceeds limit" {
		t.Errorf("message %q; want the custom one", msg)
	}
	var be *slidegate.BlockError
	if !errors.As(err, &be) || be.Resource != "backend" {
		t.Errorf("errors.As: %+v; want the BlockError of backend", be)
	}
	if n := svc.calls.Load(); n != 0 {
		t.Errorf("server got %d calls; want none", n)
	}
	wantOutcomes(t, g, "backend", 0, 1, 0, 0)
}

func TestStreamClientServerStreamExitsAtItsEnd(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	_, c := serve(t, nil, withClient(g)...)

	for i, tc := range []struct {
		code          codes.Code
		success, errs int64 // the counts after the stream
	}{
		{codes.OK, 1, 0},
		{codes.Internal, 1, 1},
		{codes.Aborted, 2, 1}, // not an error by default
	} {
		code := tc.code
		st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{
			ResponseParameters: make([]*testpb.ResponseParameters, 2),
			ResponseStatus:     &testpb.EchoStatus{Code: int32(code)},
		})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := st.Recv(); err != nil {
				t.Fatal(err)
			}
		}
		if s := stats(t, g, serverStreamMethod); s.InFlight != 1 {
			t.Fatalf("in flight %d before the stream ends; want 1", s.InFlight)
		}
		_, err = st.Recv()
		if code == codes.OK && err != io.EOF {
			t.Fatalf("last Recv: %v; want io.EOF", err)
		} else if code != codes.OK {
			wantCode(t, err, code)
		}
		// Exited by the time Recv returns.
		wantOutcomes(t, g, serverStreamMethod, int64(i+1), 0, tc.success, tc.errs)
	}
}

func TestStreamClientClientStreamExitsWithItsReply(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	_, c := serve(t, nil, withClient(g)...)

	st, err := c.StreamingInputCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := st.Send(&testpb.StreamingInputCallRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := st.CloseAndRecv()
	if err != nil || resp.GetAggregatedPayloadSize() != 3 {
		t.Fatalf("CloseAndRecv: %v, %v; want 3 requests counted", resp, err)
	}
	// The reply of a client-streaming RPC ends it: no further Recv needed.
	wantOutcomes(t, g, clientStreamMethod, 1, 0, 1, 0)
}

func TestStreamClientBidiStreamError(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	_, c := serve(t, nil, withClient(g)...)

	st, err := c.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&testpb.StreamingOutputCallRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&testpb.StreamingOutputCallRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.Unavailable)}}); err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	wantCode(t, err, codes.Unavailable)
	wantOutcomes(t, g, bidiMethod, 1, 0, 0, 1)
}

func TestStreamClientBlockedStreamIsNotCreated(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: bidiMethod, Type: slidegate.ConcurrencyRule, Limit: 1}}})
	svc, c := serve(t, nil, withClient(g)...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.FullDuplexCall(context.Background())
	wantCode(t, err, codes.ResourceExhausted)
	var be *slidegate.BlockError
	if !errors.As(err, &be) || be.Reason != flow.ConcurrencyLimited {
		t.Errorf("errors.As: %+v; want a ConcurrencyLimited BlockError", be)
	}
	if err := first.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); err != io.EOF {
		t.Fatalf("Recv: %v; want io.EOF", err)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("server got %d calls; want 1", n)
	}
	wantOutcomes(t, g, bidiMethod, 1, 1, 1, 0)

	// The first stream's end gave its place back.
	st, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatalf("after the first stream ended: %v", err)
	}
	st.CloseSend()
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("Recv: %v; want io.EOF", err)
	}
}

// TestStreamClientAbandonedStreamExitsWhenItsContextEnds checks that a
// stream its caller abandons by cancelling the context does not stay in
// flight, and holds no concurrency place.
func TestStreamClientAbandonedStreamExitsWhenItsContextEnds(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: bidiMethod, Type: slidegate.ConcurrencyRule, Limit: 1}}})
	_, c := serve(t, nil, withClient(g)...)

	ctx, cancel := context.WithCancel(context.Background())
	if _, err := c.FullDuplexCall(ctx); err != nil {
		t.Fatal(err)
	}
	cancel() // never read
	eventually(t, "the abandoned stream exits", func() bool { return stats(t, g, bidiMethod).InFlight == 0 })
	wantOutcomes(t, g, bidiMethod, 1, 0, 1, 0) // Canceled is not an error by default
	st, err := c.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatalf("the abandoned stream still holds its place: %v", err)
	}
	st.CloseSend()
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("Recv: %v; want io.EOF", err)
	}
}

func TestStreamClientContextDeadlineIsAnError(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	ctx := newExpiringContext()
	in := grpcguard.StreamClientInterceptor(g)
	cs, err := in(ctx, &grpc.StreamDesc{ServerStreams: true}, nil, bidiMethod, fakeStreamer(&fakeClientStream{}, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx.expire()
	eventually(t, "the stream exits", func() bool { return stats(t, g, bidiMethod).InFlight == 0 })
	wantOutcomes(t, g, bidiMethod, 1, 0, 0, 1)
	// A late end of the stream records nothing more.
	if err := cs.RecvMsg(nil); err != io.EOF {
		t.Fatal(err)
	}
	wantOutcomes(t, g, bidiMethod, 1, 0, 0, 1)
}

func TestStreamClientStreamerErrorExits(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	in := grpcguard.StreamClientInterceptor(g)
	want := status.Error(codes.Unavailable, "no connection")
	cs, err := in(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, bidiMethod, fakeStreamer(nil, want))
	if cs != nil || err != want {
		t.Fatalf("got %v, %v; want the streamer's error", cs, err)
	}
	wantOutcomes(t, g, bidiMethod, 1, 0, 0, 1)
}

func TestStreamClientSendMsgErrorExitsOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sendErr  error
		inFlight int64
	}{
		{"io.EOF leaves the end to RecvMsg", io.EOF, 1},
		{"an error ends the stream", status.Error(codes.Internal, "marshal"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := guarded(t, slidegate.Rules{})
			ctx, cancel := context.WithCancel(context.Background())
			in := grpcguard.StreamClientInterceptor(g)
			fake := &fakeClientStream{sendErr: tc.sendErr, recvErr: status.Error(codes.DataLoss, "lost")}
			cs, err := in(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, nil, bidiMethod, fakeStreamer(fake, nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := cs.SendMsg(nil); err != tc.sendErr {
				t.Fatalf("SendMsg: %v; want %v", err, tc.sendErr)
			}
			if s := stats(t, g, bidiMethod); s.InFlight != tc.inFlight {
				t.Fatalf("in flight %d after SendMsg; want %d", s.InFlight, tc.inFlight)
			}
			cs.RecvMsg(nil) // DataLoss: an error, if the stream had not ended
			cancel()
			wantOutcomes(t, g, bidiMethod, 1, 0, 0, 1)
		})
	}
}

// TestStreamClientExitsOnceUnderRaces ends streams by RecvMsg and by their
// context at the same time: each is recorded once.
func TestStreamClientExitsOnceUnderRaces(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	in := grpcguard.StreamClientInterceptor(g)
	const n = 200
	var wg sync.WaitGroup
	for range n {
		ctx, cancel := context.WithCancel(context.Background())
		cs, err := in(ctx, &grpc.StreamDesc{ServerStreams: true}, nil, bidiMethod, fakeStreamer(&fakeClientStream{}, nil))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() { defer wg.Done(); cs.RecvMsg(nil) }()
		go func() { defer wg.Done(); cancel() }()
	}
	wg.Wait()
	eventually(t, "every stream exits", func() bool { return stats(t, g, bidiMethod).InFlight == 0 })
	if s := stats(t, g, bidiMethod); s.Succeeded != n || s.Failed != 0 {
		t.Errorf("success %d error %d; want %d 0", s.Succeeded, s.Failed, n)
	}
}

func TestUnaryClientInvokerPanicIsRecorded(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	in := grpcguard.UnaryClientInterceptor(g)
	got := func() (v any) {
		defer func() { v = recover() }()
		in(context.Background(), unaryMethod, nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			panic("boom")
		})
		return nil
	}()
	if got != "boom" {
		t.Fatalf("recovered %v; want the invoker's panic", got)
	}
	wantOutcomes(t, g, unaryMethod, 1, 0, 0, 1)
}

// fakeStreamer returns a grpc.Streamer that returns cs and err.
func fakeStreamer(cs grpc.ClientStream, err error) grpc.Streamer {
	return func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
		if err != nil {
			return nil, err
		}
		return cs, nil
	}
}

// fakeClientStream is a grpc.ClientStream whose SendMsg and RecvMsg return
// the errors set (RecvMsg: io.EOF if none).
type fakeClientStream struct {
	grpc.ClientStream // nil: only SendMsg and RecvMsg are called
	sendErr, recvErr  error
}

func (s *fakeClientStream) SendMsg(any) error { return s.sendErr }
func (s *fakeClientStream) RecvMsg(any) error {
	if s.recvErr != nil {
		return s.recvErr
	}
	return io.EOF
}

// expiringContext is a context that ends with context.DeadlineExceeded when
// told to, not at a time.
type expiringContext struct {
	context.Context
	done chan struct{}
}

func newExpiringContext() *expiringContext {
	return &expiringContext{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiringContext) expire()               { close(c.done) }
func (c *expiringContext) Done() <-chan struct{} { return c.done }
func (c *expiringContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
