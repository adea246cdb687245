package grpcguard

import (
	"context"

	"google.golang.org/grpc"

	"github.com/slidegate/slidegate"
)

// UnaryServerInterceptor returns an interceptor that guards the unary RPCs
// a server serves with g. A nil g means [slidegate.Default]. Each RPC
// enters its resource as inbound traffic ([slidegate.WithInbound]) before
// the handler runs.
//
// An RPC that a rule blocks is not handled. It ends with the block status
// ([BlockStatus], or [WithBlockStatus]). If the RPC's context ended while a
// throttle made it wait, it ends with the status of the context's error.
//
// An RPC that is let through exits when the handler returns. It exits with
// the handler's error if the error's code is in the error set
// ([DefaultErrorCodes], or [WithErrorCodes]), and as a success otherwise.
// If the handler panics, the RPC exits with an error and the panic goes
// on.
func UnaryServerInterceptor(g *slidegate.Guard, opts ...Option) grpc.UnaryServerInterceptor {
	g, o := build(g, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		err = o.do(ctx, g, o.name(ctx, info.FullMethod), func() error {
			resp, err = handler(ctx, req)
			return err
		}, slidegate.WithInbound(), slidegate.WithKey(o.keyOf(ctx, info.FullMethod, true)))
		return resp, err
	}
}

// StreamServerInterceptor returns an interceptor that guards the streaming
// RPCs a server serves with g, as [UnaryServerInterceptor] guards unary
// ones. A nil g means [slidegate.Default]. The stream enters its resource
// before the handler runs. It exits when the handler returns, with its
// error as UnaryServerInterceptor records it. The resource is named from
// the stream's context. The time the handler spends in RecvMsg and SendMsg
// waits on the client. It is left out of the stream's response time (see
// [slidegate.Entry.Pause]).
//
// The RPCs a server's [grpc.UnknownServiceHandler] serves are named by
// [UnknownMethod], not by the method the client sent, which could be any
// string. The interceptor tells them by the nil service grpc-go passes for
// them. So a service registered with a nil implementation is taken for an
// unknown one too.
func StreamServerInterceptor(g *slidegate.Guard, opts ...Option) grpc.StreamServerInterceptor {
	g, o := build(g, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		method := info.FullMethod
		if srv == nil {
			method = UnknownMethod
		}
		e, err := g.Enter(ctx, o.name(ctx, method), slidegate.WithInbound(), slidegate.WithKey(o.keyOf(ctx, method, true)))
		if err != nil {
			return o.blocked(err)
		}
		ended := false
		defer func() {
			if !ended {
				e.Exit(errPanicked) // and the panic goes on
			}
		}()
		err = handler(srv, &pausingStream{ServerStream: ss, e: e})
		ended = true
		e.Exit(o.outcome(err))
		return err
	}
}

// A pausingStream is a server stream whose receives and sends wait on the
// client: each is a pause of the stream's entry (slidegate.Entry.Pause),
// so that a client that sends or reads slowly does not make the service
// look slow to the rules that learn from response times.
type pausingStream struct {
	grpc.ServerStream
	e slidegate.Entry
}

func (s *pausingStream) RecvMsg(m any) error {
	s.e.Pause()
	defer s.e.Resume()
	return s.ServerStream.RecvMsg(m)
}

func (s *pausingStream) SendMsg(m any) error {
	s.e.Pause()
	defer s.e.Resume()
	return s.ServerStream.SendMsg(m)
}

// UnknownMethod is the full method under which a server's interceptors
// name the RPCs of methods it does not know, served by a
// [grpc.UnknownServiceHandler]. A client can send any method name, as long
// as the server's header limit. Each would otherwise be a resource of its
// own.
const UnknownMethod = "(unknown method)"
