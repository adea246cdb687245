package grpcguard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/grpcguard"
)

func TestOverloadBlockIsUnavailable(t *testing.T) {
	for _, after := range []time.Duration{0, 1500 * time.Millisecond} {
		st := grpcguard.BlockStatus(&slidegate.BlockError{Resource: unaryMethod, Rule: "flow[0]", Reason: flow.Overloaded, RetryAfter: after})
		if st.Code() != codes.Unavailable {
			t.Errorf("overloaded, retry after %v: code %v, want Unavailable", after, st.Code())
		}
		want := after
		if after == 0 {
			want = -1 // no RetryInfo
		}
		if d := retryDelay(st.Err()); d != want {
			t.Errorf("overloaded, retry after %v: RetryInfo delay %v, want %v", after, d, want)
		}
	}
}

// heldToOne returns rules whose adaptive rule on resource allows one
// request in flight.
func heldToOne(resource string) slidegate.Rules {
	return slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: resource, Type: slidegate.AdaptiveRule, Limit: 1, MinLimit: 1, MaxLimit: 1,
	}}}
}

func TestUnaryServerOverloadedIsUnavailable(t *testing.T) {
	g, _ := guarded(t, heldToOne(slidegate.InboundResource))
	// A request in flight holds the one place of the (inbound) rule. (A
	// request to another method would get its share.)
	e, err := g.Enter(context.Background(), unaryMethod, slidegate.WithInbound())
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	server := grpcguard.UnaryServerInterceptor(g)
	_, err = server(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: unaryMethod},
		func(context.Context, any) (any, error) { ran = true; return nil, nil })
	wantCode(t, err, codes.Unavailable)
	var be *slidegate.BlockError
	if !errors.As(err, &be) || be.Reason != flow.Overloaded || ran {
		t.Fatalf("RPC over the (inbound) adaptive limit: %v (handled %v), want blocked as overloaded", err, ran)
	}
	e.Exit(nil)
	if _, err := server(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: unaryMethod},
		func(context.Context, any) (any, error) { ran = true; return nil, nil }); err != nil || !ran {
		t.Fatalf("after the request in flight ended: %v (handled %v), want handled", err, ran)
	}
}

// limitAfter makes 40 unary calls in a row through the client interceptor
// (opts), each taking 10 ms on the guard's clock and ending with code, and
// returns the adaptive rule's limit then. It checks that each call returns
// the invoker's own error.
func limitAfter(t *testing.T, code codes.Code, opts ...grpcguard.Option) int64 {
	t.Helper()
	g, clk := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: unaryMethod, Type: slidegate.AdaptiveRule, Limit: 100, MinLimit: 4, MaxLimit: 1000,
	}}})
	var sent error
	if code != codes.OK {
		sent = status.Error(code, "downstream says "+code.String())
	}
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		clk.Advance(10 * time.Millisecond)
		return sent
	}
	client := grpcguard.UnaryClientInterceptor(g, opts...)
	for range 40 {
		if err := client(context.Background(), unaryMethod, nil, nil, nil, invoker); err != sent {
			t.Fatalf("the call returned %v, want the invoker's own error %v", err, sent)
		}
	}
	ov := g.Overload()
	if len(ov) != 1 {
		t.Fatalf("Overload() = %+v, want the adaptive rule", ov)
	}
	return ov[0].Limit
}

func TestUnaryClientBacksOffWhenTheDownstreamIsOverloaded(t *testing.T) {
	for _, c := range []codes.Code{codes.ResourceExhausted, codes.Unavailable, codes.DeadlineExceeded} {
		if l := limitAfter(t, c); l >= 100 {
			t.Errorf("after 40 calls ending %v: adaptive limit %d, want below the 100 it started from", c, l)
		}
	}
	// Other failures, and successes, are samples of the response time:
	// calls one after another neither queue nor use the limit.
	for _, c := range []codes.Code{codes.OK, codes.Internal, codes.Unknown, codes.InvalidArgument} {
		if l := limitAfter(t, c); l != 100 {
			t.Errorf("after 40 calls ending %v: adaptive limit %d, want the 100 it started from", c, l)
		}
	}
	// A code outside the error set is a success, whatever it says.
	if l := limitAfter(t, codes.Unavailable, grpcguard.WithErrorCodes(codes.Internal)); l != 100 {
		t.Errorf("Unavailable outside the error set: adaptive limit %d, want 100", l)
	}
}

func TestUnaryServerBacksOffWhenItsHandlerSaysOverloaded(t *testing.T) {
	g, clk := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: unaryMethod, Type: slidegate.AdaptiveRule, Limit: 100, MinLimit: 4, MaxLimit: 1000,
	}}})
	sent := status.Error(codes.ResourceExhausted, "out of workers")
	server := grpcguard.UnaryServerInterceptor(g)
	info := &grpc.UnaryServerInfo{FullMethod: unaryMethod}
	for range 40 {
		_, err := server(context.Background(), nil, info, func(context.Context, any) (any, error) {
			clk.Advance(10 * time.Millisecond)
			return nil, sent
		})
		if err != sent {
			t.Fatalf("the RPC returned %v, want the handler's own error", err)
		}
	}
	if ov := g.Overload(); len(ov) != 1 || ov[0].Limit >= 100 {
		t.Errorf("after 40 handlers ending ResourceExhausted: %+v, want the adaptive limit below 100", ov)
	}
	if s := stats(t, g, unaryMethod); s.Failed != 40 {
		t.Errorf("failed %d, want 40: an overloaded RPC is still an error", s.Failed)
	}
}

// A stream that ends Unavailable is an overload signal too.
func TestStreamClientBacksOffWhenTheStreamEndsOverloaded(t *testing.T) {
	g, clk := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: bidiMethod, Type: slidegate.AdaptiveRule, Limit: 100, MinLimit: 4, MaxLimit: 1000,
	}}})
	sent := status.Error(codes.Unavailable, "shedding")
	client := grpcguard.StreamClientInterceptor(g)
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	for range 40 {
		cs, err := client(context.Background(), desc, nil, bidiMethod,
			func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
				return &failingStream{clk: clk, err: sent}, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(nil); err != sent {
			t.Fatalf("RecvMsg returned %v, want the stream's own error", err)
		}
	}
	if ov := g.Overload(); len(ov) != 1 || ov[0].Limit >= 100 {
		t.Errorf("after 40 streams ending Unavailable: %+v, want the adaptive limit below 100", ov)
	}
}

// A failingStream is a client stream whose RecvMsg takes 10 ms on clk and
// fails with err.
type failingStream struct {
	grpc.ClientStream
	clk *clock.Manual
	err error
}

func (s *failingStream) RecvMsg(any) error {
	s.clk.Advance(10 * time.Millisecond)
	return s.err
}
