package grpcguard

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
)

// errPanicked is the outcome recorded for a streamer or a stream's handler
// that panicked or called runtime.Goexit. (The unary interceptors run their
// calls through Guard.Do, which records its own.)
var errPanicked = errors.New("grpcguard: the call did not return")

// UnaryClientInterceptor returns an interceptor that guards the unary RPCs
// a client makes with g. A nil g means [slidegate.Default]. Each call
// enters its resource as outbound traffic before it is sent.
//
// A call that a rule blocks is not sent. It returns the block status
// ([BlockStatus], or [WithBlockStatus]) as an error that also wraps the
// [*slidegate.BlockError]. If ctx ended while a throttle made the call
// wait, it returns the status of the context's error instead.
//
// A call that is let through exits when it returns. It exits with its
// error if the error's code is in the error set ([DefaultErrorCodes], or
// [WithErrorCodes]), and as a success otherwise. With [WithRetry], a call
// that fails may be retried, each attempt entering the guard on its own.
func UnaryClientInterceptor(g *slidegate.Guard, opts ...Option) grpc.UnaryClientInterceptor {
	g, o := build(g, opts)
	if rt := o.retry; rt != nil {
		return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
			return rt.invoke(ctx, g, o, method, req, reply, cc, invoker, callOpts)
		}
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		return o.do(ctx, g, o.name(ctx, method), func() error {
			return invoker(ctx, method, req, reply, cc, callOpts...)
		}, slidegate.WithKey(o.keyOf(ctx, method, false)))
	}
}

// StreamClientInterceptor returns an interceptor that guards the streaming
// RPCs a client makes with g. A nil g means [slidegate.Default]. Each
// stream enters its resource before it is created. A stream that a rule
// blocks is not created, and the error is as [UnaryClientInterceptor]
// returns it. If creating the stream fails, the stream exits at once with
// that error. Otherwise it exits, once, at the first of the events that
// end a gRPC stream:
//
//   - RecvMsg returns an error.
//   - RecvMsg returns the message of an RPC whose server sends only one.
//   - SendMsg returns an error other than io.EOF.
//   - ctx is done.
//
// An error of RecvMsg is recorded by its code, and io.EOF is a success.
// The one message of a unary or client-streaming RPC is a success. An
// error of SendMsg is recorded by its code; io.EOF means the stream ended,
// and RecvMsg says how. When ctx is done, the stream is recorded as the
// status of ctx's error. That is Canceled, by default a success, or
// DeadlineExceeded, by default an error. So a stream abandoned by
// cancelling its context does not stay in flight.
//
// A stream ended in none of these ways stays in flight in the guard's
// statistics and concurrency rules. That is a stream whose ClientConn
// closed, whose context is never done, or whose RecvMsg is not called to
// the end. grpc-go documents the same four ways of releasing a stream's
// resources.
//
// Streams are not retried (see [WithRetry]).
func StreamClientInterceptor(g *slidegate.Guard, opts ...Option) grpc.StreamClientInterceptor {
	g, o := build(g, opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		e, err := g.Enter(ctx, o.name(ctx, method), slidegate.WithKey(o.keyOf(ctx, method, false)))
		if err != nil {
			return nil, o.blocked(err)
		}
		returned := false
		defer func() {
			if !returned {
				e.Exit(errPanicked)
			}
		}()
		cs, err := streamer(ctx, desc, cc, method, callOpts...)
		returned = true
		if err != nil {
			e.Exit(o.outcome(err))
			return nil, err
		}
		s := &clientStream{ClientStream: cs, o: o, e: e, oneReply: desc != nil && !desc.ServerStreams}
		// The caller's ctx, not cs.Context(): grpc-go cancels the stream's
		// own context when the stream ends, successfully or not, which
		// would race with RecvMsg to record the outcome.
		s.stop = context.AfterFunc(ctx, func() {
			e.Exit(o.outcome(status.FromContextError(ctx.Err()).Err()))
		})
		return s, nil
	}
}

// A clientStream is a guarded stream. Its fields are set before the stream
// is returned and never change; the entry may be exited from the stream's
// goroutines and from the AfterFunc at once, which slidegate.Entry allows
// (the first Exit counts, the others do nothing).
type clientStream struct {
	grpc.ClientStream
	o        *options
	e        slidegate.Entry
	oneReply bool        // the server sends one message: its receipt ends the stream
	stop     func() bool // stops the AfterFunc on ctx
}

// exit ends the stream's entry with the outcome of err, if it has not ended.
func (s *clientStream) exit(err error) {
	s.stop()
	s.e.Exit(s.o.outcome(err))
}

// RecvMsg receives a message, and exits the entry if the stream has ended.
func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	switch {
	case err == io.EOF:
		s.exit(nil)
	case err != nil:
		s.exit(err)
	case s.oneReply:
		s.exit(nil) // grpc-go has read the status, OK, with the message
	}
	return err
}

// SendMsg sends a message, and exits the entry if sending failed for a
// reason other than the end of the stream.
func (s *clientStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF {
		s.exit(err)
	}
	return err
}
