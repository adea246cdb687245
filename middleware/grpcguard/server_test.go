package grpcguard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/grpcguard"
)

func TestUnaryServerAdmitsAndRecordsSuccess(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 10}}})
	svc, c := serve(t, withServer(g))

	if err := unary(context.Background(), c, codes.OK); err != nil {
		t.Fatal(err)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times; want 1", n)
	}
	wantOutcomes(t, g, unaryMethod, 1, 0, 1, 0)
	if in, _ := g.Stats(slidegate.InboundResource); in.Allowed != 1 || in.Succeeded != 1 {
		t.Errorf("inbound pass %d success %d; want 1 1 (server RPCs are inbound)", in.Allowed, in.Succeeded)
	}
}

func TestUnaryServerOverQPSLimitIsResourceExhaustedWithRetryInfo(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 1}}})
	svc, c := serve(t, withServer(g))

	if err := unary(context.Background(), c, codes.OK); err != nil {
		t.Fatal(err)
	}
	err := unary(context.Background(), c, codes.OK)
	wantCode(t, err, codes.ResourceExhausted)
	msg := status.Convert(err).Message()
	for _, want := range []string{unaryMethod, "qps", flow.RateLimited.String()} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not name %q", msg, want)
		}
	}
	if d := retryDelay(err); d <= 0 {
		t.Errorf("retry delay %v; want a RetryInfo with a positive delay", d)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times; want 1 (the blocked RPC is not handled)", n)
	}
	wantOutcomes(t, g, unaryMethod, 1, 1, 1, 0)
}

func TestUnaryServerOpenBreakerIsUnavailable(t *testing.T) {
	g, c := guarded(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{{
		Resource: unaryMethod, Strategy: slidegate.ErrorCountBreaker, Count: 3, MinRequests: ptr(int64(1)),
		OpenTimeout: slidegate.Duration(5 * time.Second),
	}}})
	svc, client := serve(t, withServer(g))

	for range 3 {
		wantCode(t, unary(context.Background(), client, codes.Internal), codes.Internal)
	}
	err := unary(context.Background(), client, codes.OK)
	wantCode(t, err, codes.Unavailable)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "breaker") || !strings.Contains(msg, flow.BreakerOpen.String()) {
		t.Errorf("message %q does not name the breaker and the reason", msg)
	}
	if d := retryDelay(err); d != 5*time.Second {
		t.Errorf("retry delay %v; want the breaker's open timeout, 5s", d)
	}
	if n := svc.calls.Load(); n != 3 {
		t.Errorf("handler ran %d times; want 3", n)
	}
	wantOutcomes(t, g, unaryMethod, 3, 1, 0, 3)

	// After the open timeout, a probe goes through and closes the breaker.
	c.Advance(5 * time.Second)
	for range 2 {
		if err := unary(context.Background(), client, codes.OK); err != nil {
			t.Fatalf("after the open timeout: %v", err)
		}
	}
}

func TestServerRecordsErrorsByCode(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	_, c := serve(t, withServer(g))

	wantCode(t, unary(context.Background(), c, codes.Internal), codes.Internal)
	wantOutcomes(t, g, unaryMethod, 1, 0, 0, 1)
	wantCode(t, unary(context.Background(), c, codes.InvalidArgument), codes.InvalidArgument)
	wantOutcomes(t, g, unaryMethod, 2, 0, 1, 1)
}

func TestWithErrorCodesReplacesTheErrorSet(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	_, c := serve(t, withServer(g, grpcguard.WithErrorCodes(codes.InvalidArgument)))

	wantCode(t, unary(context.Background(), c, codes.Internal), codes.Internal)
	wantOutcomes(t, g, unaryMethod, 1, 0, 1, 0)
	wantCode(t, unary(context.Background(), c, codes.InvalidArgument), codes.InvalidArgument)
	wantOutcomes(t, g, unaryMethod, 2, 0, 1, 1)
}

// TestDefaultErrorCodesAreTheServiceFailures runs the interceptor on every
// code, and on errors that are not statuses, as grpc-go would send them.
func TestDefaultErrorCodesAreTheServiceFailures(t *testing.T) {
	failures := map[codes.Code]bool{
		codes.Unknown: true, codes.DeadlineExceeded: true, codes.ResourceExhausted: true,
		codes.Unimplemented: true, codes.Internal: true, codes.Unavailable: true, codes.DataLoss: true,
	}
	type outcome struct {
		err  error
		fail bool
	}
	cases := map[string]outcome{
		"plain error":               {errors.New("boom"), true}, // Unknown
		"context.Canceled":          {context.Canceled, false},
		"context.DeadlineExceeded":  {context.DeadlineExceeded, true},
		"wrapped status (Internal)": {wrap(status.Error(codes.Internal, "x")), true},
		"wrapped status (NotFound)": {wrap(status.Error(codes.NotFound, "x")), false},
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		cases["code "+c.String()] = outcome{status.Error(c, "x"), failures[c]}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g, _ := guarded(t, slidegate.Rules{})
			in := grpcguard.UnaryServerInterceptor(g)
			_, err := in(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: unaryMethod},
				func(context.Context, any) (any, error) { return nil, tc.err })
			if err != tc.err {
				t.Errorf("interceptor returned %v; want the handler's %v", err, tc.err)
			}
			s := stats(t, g, unaryMethod)
			if got := s.Failed == 1; got != tc.fail || s.Succeeded+s.Failed != 1 {
				t.Errorf("success %d error %d; want an error: %v", s.Succeeded, s.Failed, tc.fail)
			}
		})
	}
}

func wrap(err error) error { return &wrapped{err} }

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

func TestDefaultErrorCodesReturnsAFreshSlice(t *testing.T) {
	a := grpcguard.DefaultErrorCodes()
	a[0] = codes.OK
	if b := grpcguard.DefaultErrorCodes(); b[0] == codes.OK {
		t.Error("DefaultErrorCodes shares its slice")
	}
}

func TestUnaryServerPanicIsRecordedAndGoesOn(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	in := grpcguard.UnaryServerInterceptor(g)
	type boom struct{}
	got := func() (v any) {
		defer func() { v = recover() }()
		in(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: unaryMethod}, func(context.Context, any) (any, error) {
			panic(boom{})
		})
		return nil
	}()
	if got != (boom{}) {
		t.Fatalf("recovered %v; want the handler's own panic value", got)
	}
	wantOutcomes(t, g, unaryMethod, 1, 0, 0, 1)
}

func TestStreamServerPanicIsRecordedAndGoesOn(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	in := grpcguard.StreamServerInterceptor(g)
	got := func() (v any) {
		defer func() { v = recover() }()
		in(&testService{}, fakeServerStream{context.Background()}, &grpc.StreamServerInfo{FullMethod: bidiMethod}, func(any, grpc.ServerStream) error {
			panic("boom")
		})
		return nil
	}()
	if got != "boom" {
		t.Fatalf("recovered %v; want the handler's own panic value", got)
	}
	wantOutcomes(t, g, bidiMethod, 1, 0, 0, 1)
}

// fakeServerStream is a grpc.ServerStream with only a context.
type fakeServerStream struct{ ctx context.Context }

func (s fakeServerStream) Context() context.Context   { return s.ctx }
func (fakeServerStream) SetHeader(metadata.MD) error  { return nil }
func (fakeServerStream) SendHeader(metadata.MD) error { return nil }
func (fakeServerStream) SetTrailer(metadata.MD)       {}
func (fakeServerStream) SendMsg(any) error            { return nil }
func (fakeServerStream) RecvMsg(any) error            { return io.EOF }

func TestServerContextDoneBeforeEnterIsItsStatus(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, tc := range []struct {
		ctx  context.Context
		want codes.Code
	}{{cancelled, codes.Canceled}, {expired, codes.DeadlineExceeded}} {
		ran := false
		_, err := grpcguard.UnaryServerInterceptor(g)(tc.ctx, nil, &grpc.UnaryServerInfo{FullMethod: unaryMethod},
			func(context.Context, any) (any, error) { ran = true; return nil, nil })
		wantCode(t, err, tc.want)
		err = grpcguard.StreamServerInterceptor(g)(&testService{}, fakeServerStream{tc.ctx}, &grpc.StreamServerInfo{FullMethod: bidiMethod},
			func(any, grpc.ServerStream) error { ran = true; return nil })
		wantCode(t, err, tc.want)
		if ran {
			t.Error("handler ran")
		}
	}
}

// TestServerThrottleWaitEndsWithTheRPC checks that an RPC waiting for a
// throttle's place gives up when its context ends, with the context's
// status, and runs once its place comes.
func TestServerThrottleWaitEndsWithTheRPC(t *testing.T) {
	g, c := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: unaryMethod, Limit: 1, Type: slidegate.ThrottleRule, MaxWait: slidegate.Duration(10 * time.Second),
	}}})
	in := grpcguard.UnaryServerInterceptor(g)
	info := &grpc.UnaryServerInfo{FullMethod: unaryMethod}
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	if _, err := in(context.Background(), nil, info, ok); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { _, err := in(ctx, nil, info, ok); errc <- err }()
	eventually(t, "the RPC waits", func() bool { return c.Sleepers() == 1 })
	cancel()
	wantCode(t, <-errc, codes.Canceled)

	go func() { _, err := in(context.Background(), nil, info, ok); errc <- err }()
	eventually(t, "the RPC waits", func() bool { return c.Sleepers() == 1 })
	c.Advance(time.Second)
	if err := <-errc; err != nil {
		t.Fatalf("after its wait: %v", err)
	}
}

func TestStreamServer(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: serverStreamMethod, Limit: 3}}})
	svc, c := serve(t, withServer(g))
	ctx := context.Background()

	// recvAll reads a server stream to its end and returns how many
	// responses came and the error that ended it (nil for io.EOF).
	recvAll := func(code codes.Code) (int, error) {
		st, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{
			ResponseParameters: make([]*testpb.ResponseParameters, 3),
			ResponseStatus:     &testpb.EchoStatus{Code: int32(code)},
		})
		if err != nil {
			return 0, err
		}
		for n := 0; ; n++ {
			if _, err := st.Recv(); err != nil {
				if err == io.EOF {
					err = nil
				}
				return n, err
			}
		}
	}

	if n, err := recvAll(codes.OK); n != 3 || err != nil {
		t.Fatalf("%d responses, %v; want 3, nil", n, err)
	}
	wantOutcomes(t, g, serverStreamMethod, 1, 0, 1, 0)

	n, err := recvAll(codes.Internal)
	wantCode(t, err, codes.Internal)
	if n != 3 {
		t.Errorf("%d responses; want 3", n)
	}
	wantOutcomes(t, g, serverStreamMethod, 2, 0, 1, 1)

	_, err = recvAll(codes.InvalidArgument) // the caller's mistake: a success
	wantCode(t, err, codes.InvalidArgument)
	wantOutcomes(t, g, serverStreamMethod, 3, 0, 2, 1)

	n, err = recvAll(codes.OK)
	wantCode(t, err, codes.ResourceExhausted)
	if n != 0 || retryDelay(err) <= 0 {
		t.Errorf("blocked stream: %d responses, retry delay %v; want none, a positive delay", n, retryDelay(err))
	}
	if calls := svc.calls.Load(); calls != 3 {
		t.Errorf("handler ran %d times; want 3", calls)
	}
	wantOutcomes(t, g, serverStreamMethod, 3, 1, 2, 1)
	if in, _ := g.Stats(slidegate.InboundResource); in.Allowed != 3 || in.Blocked != 1 {
		t.Errorf("inbound pass %d block %d; want 3 1", in.Allowed, in.Blocked)
	}
}

func TestServerWithResource(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "svc:TestService", Limit: 1}}})
	var seen []string
	name := func(ctx context.Context, fullMethod string) string {
		if ctx == nil {
			t.Error("WithResource got a nil context")
		}
		seen = append(seen, fullMethod)
		service, _, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/grpc.testing."), "/")
		return "svc:" + service
	}
	_, c := serve(t, withServer(g, grpcguard.WithResource(name)))

	if err := unary(context.Background(), c, codes.OK); err != nil {
		t.Fatal(err)
	}
	// Another method of the same service shares the resource and its limit.
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	wantCode(t, err, codes.ResourceExhausted)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "svc:TestService") {
		t.Errorf("message %q does not name the resource", msg)
	}
	wantOutcomes(t, g, "svc:TestService", 1, 1, 1, 0)
	if _, ok := g.Stats(unaryMethod); ok {
		t.Errorf("the guard keeps statistics for %s, which no RPC entered", unaryMethod)
	}
	if len(seen) != 2 || seen[0] != unaryMethod || seen[1] != serverStreamMethod {
		t.Errorf("WithResource saw %q; want the full methods", seen)
	}
}

func TestWithBlockStatus(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 0}}})
	var got *slidegate.BlockError
	custom := grpcguard.WithBlockStatus(func(be *slidegate.BlockError) *status.Status {
		got = be
		return status.New(codes.Aborted, "busy, come back later")
	})
	_, c := serve(t, withServer(g, custom))

	err := unary(context.Background(), c, codes.OK)
	wantCode(t, err, codes.Aborted)
	if msg := status.Convert(err).Message(); msg != "busy, come back later" {
		t.Errorf("message %q; want the custom one", msg)
	}
	if got == nil || got.Resource != unaryMethod || got.Reason != flow.ExceedsLimit {
		t.Errorf("WithBlockStatus got %+v; want the block of %s", got, unaryMethod)
	}
}

func TestWithBlockStatusNilFallsBackToBlockStatus(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 0}}})
	info := &grpc.UnaryServerInfo{FullMethod: unaryMethod}
	for _, f := range []func(*slidegate.BlockError) *status.Status{
		nil,
		func(*slidegate.BlockError) *status.Status { return nil },
		func(*slidegate.BlockError) *status.Status { return status.New(codes.OK, "") },
	} {
		_, err := grpcguard.UnaryServerInterceptor(g, grpcguard.WithBlockStatus(f))(context.Background(), nil, info,
			func(context.Context, any) (any, error) { return nil, nil })
		wantCode(t, err, codes.ResourceExhausted)
	}
}

func TestBlockStatus(t *testing.T) {
	for _, tc := range []struct {
		reason flow.Reason
		want   codes.Code
	}{
		{flow.RateLimited, codes.ResourceExhausted},
		{flow.ConcurrencyLimited, codes.ResourceExhausted},
		{flow.WaitTooLong, codes.ResourceExhausted},
		{flow.RefLimited, codes.ResourceExhausted},
		{flow.BreakerOpen, codes.Unavailable},
	} {
		for _, after := range []time.Duration{0, 1500 * time.Millisecond} {
			be := &slidegate.BlockError{Resource: "r", Rule: "flow[1]", Reason: tc.reason, RetryAfter: after}
			st := grpcguard.BlockStatus(be)
			if st.Code() != tc.want || st.Message() != be.Error() {
				t.Errorf("%v: %v %q; want %v %q", tc.reason, st.Code(), st.Message(), tc.want, be.Error())
			}
			want := after
			if after == 0 {
				want = -1 // no RetryInfo
			}
			if d := retryDelay(st.Err()); d != want {
				t.Errorf("%v, retry after %v: RetryInfo delay %v; want %v", tc.reason, after, d, want)
			}
		}
	}
}

// nilGuardRuns numbers the runs of TestNilGuardIsDefault, which share the
// default guard under -count=N: each enters a resource of its own.
var nilGuardRuns atomic.Int64

func TestNilGuardIsDefault(t *testing.T) {
	method := fmt.Sprintf("/grpcguard.test.NilGuard/Call%d", nilGuardRuns.Add(1))
	_, err := grpcguard.UnaryServerInterceptor(nil)(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method},
		func(context.Context, any) (any, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := slidegate.Default().Stats(method); !ok || s.Allowed != 1 || s.Succeeded != 1 {
		t.Errorf("default guard: %+v, %v; want one success", s, ok)
	}
}

// slowClientStream is a server stream whose client sends each message and
// reads each answer a second after it is asked, on a manual clock.
type slowClientStream struct {
	fakeServerStream
	c    *clock.Manual
	left int
}

func (s *slowClientStream) RecvMsg(any) error {
	s.c.Advance(time.Second)
	if s.left == 0 {
		return io.EOF
	}
	s.left--
	return nil
}

func (s *slowClientStream) SendMsg(any) error {
	s.c.Advance(time.Second)
	return nil
}

// The time a stream's handler waits on its client, in RecvMsg and SendMsg,
// is not response time: a slow client does not make the service look slow.
func TestAStreamsWaitsOnItsClientAreNotResponseTime(t *testing.T) {
	g, c := guarded(t, slidegate.Rules{})
	in := grpcguard.StreamServerInterceptor(g)
	ss := &slowClientStream{fakeServerStream: fakeServerStream{context.Background()}, c: c, left: 3}
	err := in(&testService{}, ss, &grpc.StreamServerInfo{FullMethod: bidiMethod}, func(_ any, s grpc.ServerStream) error {
		for {
			if err := s.RecvMsg(nil); err != nil {
				return nil
			}
			c.Advance(2 * time.Millisecond) // the service's work
			if err := s.SendMsg(nil); err != nil {
				return err
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := g.Stats(bidiMethod)
	if st.Totals.Succeeded != 1 || st.MaxRT != 6*time.Millisecond {
		t.Fatalf("stats %+v: want one stream that took the 6 ms of the service's work, not the 7 s its client took", st)
	}
}
