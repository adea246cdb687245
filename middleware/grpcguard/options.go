package grpcguard

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
)

// An Option customises an interceptor.
type Option func(*options)

type options struct {
	resource    func(ctx context.Context, fullMethod string) string
	blockStatus func(*slidegate.BlockError) *status.Status
	errs        codeSet
	// key names an RPC's key (nil: the empty key); serverKey says it reads
	// what only a server has (the peer, incoming metadata), so that client
	// interceptors ignore it.
	key       func(ctx context.Context, fullMethod string) string
	serverKey bool
	retry     *retrier // nil: UnaryClientInterceptor makes each call once
}

// WithResource names the resource an RPC enters. fullMethod is the RPC's
// "/pkg.Service/Method", or [UnknownMethod] on a server for a method it
// does not know. The default is fullMethod itself. A nil f keeps it.
//
// A name built from request data, such as metadata or a peer address,
// makes one resource per value. The guard bounds them
// ([slidegate.WithMaxResources]) by counting the excess as
// [slidegate.OtherResource].
//
// A server and a client that share a guard name their resources alike by
// default. Give one of them a prefix if the two must be told apart.
func WithResource(f func(ctx context.Context, fullMethod string) string) Option {
	return func(o *options) {
		if f != nil {
			o.resource = f
		}
	}
}

// WithBlockStatus replaces [BlockStatus], the status of an RPC that a rule
// blocked. A nil f, or an f that returns nil or a status with codes.OK,
// leaves BlockStatus in charge.
func WithBlockStatus(f func(*slidegate.BlockError) *status.Status) Option {
	return func(o *options) {
		if f != nil {
			o.blockStatus = f
		}
	}
}

// WithErrorCodes sets the status codes that count as errors for the
// guard's statistics and breakers, replacing [DefaultErrorCodes]. An RPC
// that ends with any other code is a success. So is one that ends with
// codes.OK, listed or not. With no codes, no RPC is an error.
func WithErrorCodes(cs ...codes.Code) Option {
	return func(o *options) { o.errs = newCodeSet(cs) }
}

// DefaultErrorCodes returns the status codes that count as errors unless
// [WithErrorCodes] says otherwise. They are those that say the service
// failed: Unknown, DeadlineExceeded, ResourceExhausted, Unimplemented,
// Internal, Unavailable, DataLoss. Codes that say the caller erred or gave
// up (InvalidArgument, NotFound, PermissionDenied, Canceled, ...) are not
// the service's failures. They count as successes. The slice is new on
// each call, so it can be extended:
//
//	grpcguard.WithErrorCodes(append(grpcguard.DefaultErrorCodes(), codes.Aborted)...)
func DefaultErrorCodes() []codes.Code {
	return []codes.Code{
		codes.Unknown, codes.DeadlineExceeded, codes.ResourceExhausted,
		codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss,
	}
}

// BlockStatus is the default status of an RPC that a rule blocked. Its
// code is one of two:
//
//   - codes.Unavailable when the service cannot take the RPC.
//   - codes.ResourceExhausted when a flow rule's limit is reached.
//
// The service cannot take it when a breaker is open
// ([flow.BreakerOpen]), or when a shed or adaptive rule finds the
// service overloaded ([flow.Overloaded]). Any other reason is a
// limit, the caller's quota. Unavailable is gRPC's code for a transient
// state of the server that a retry with backoff may get past, on another
// instance or after the load eases. [WithRetry] retries it within its
// budget, and HTTP's 503 maps to it. ResourceExhausted says a quota is
// spent, and retrying it at once is futile.
//
// The message is be.Error(), which names the resource, the rule and the
// reason. It is not the RPC's key (be.Key), which the client chose. If
// be.RetryAfter is positive, the status carries a google.rpc.RetryInfo
// detail ([errdetails.RetryInfo]) with that delay.
func BlockStatus(be *slidegate.BlockError) *status.Status {
	c := codes.ResourceExhausted
	switch be.Reason {
	case flow.BreakerOpen, flow.Overloaded:
		c = codes.Unavailable
	}
	st := status.New(c, be.Error())
	if be.RetryAfter > 0 {
		if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(be.RetryAfter)}); err == nil {
			st = d
		}
	}
	return st
}

// build applies opts to the defaults.
func build(g *slidegate.Guard, opts []Option) (*slidegate.Guard, *options) {
	if g == nil {
		g = slidegate.Default()
	}
	o := &options{blockStatus: BlockStatus, errs: newCodeSet(DefaultErrorCodes())}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	return g, o
}

// name returns the resource of the RPC fullMethod.
func (o *options) name(ctx context.Context, fullMethod string) string {
	if o.resource == nil {
		return fullMethod
	}
	return o.resource(ctx, fullMethod)
}

// keyOf returns the key of the RPC fullMethod, on a server if server.
func (o *options) keyOf(ctx context.Context, fullMethod string, server bool) string {
	if o.key == nil || (o.serverKey && !server) {
		return ""
	}
	return o.key(ctx, fullMethod)
}

// blocked turns Enter's error into the RPC's: a blocked error for a
// *slidegate.BlockError, the status of a context error otherwise (Enter
// returns ctx.Err() when ctx ends before or while a throttle makes the RPC
// wait).
func (o *options) blocked(err error) error {
	var be *slidegate.BlockError
	if !errors.As(err, &be) {
		return status.FromContextError(err).Err()
	}
	st := o.blockStatus(be)
	if st == nil || st.Code() == codes.OK {
		st = BlockStatus(be)
	}
	return &blockedError{st: st, be: be}
}

// do runs call as one request to the resource name, through Guard.Do: a
// call the guard blocks is not run and do returns blocked's error; a call
// that runs exits with its outcome (and, if it panics, with an error as the
// panic goes on), and do returns the call's own error.
func (o *options) do(ctx context.Context, g *slidegate.Guard, name string, call func() error, opts ...slidegate.EntryOption) error {
	var err error
	ran := false
	notRun := g.Do(ctx, name, func() error {
		ran = true
		err = call()
		return o.outcome(err)
	}, opts...)
	if !ran {
		return o.blocked(notRun)
	}
	return err
}

// outcome returns what Exit records for an RPC that ended with err: err if
// its code is in the error set, nil (a success) otherwise; wrapped as an
// overloadedError when its code says the server was over its capacity.
// The caller gets err itself: only the guard sees the wrapping.
func (o *options) outcome(err error) error {
	if err == nil {
		return nil
	}
	c := codeOf(err)
	if !o.errs.has(c) {
		return nil
	}
	if overloadCode(c) {
		return &overloadedError{err}
	}
	return err
}

// overloadCode reports whether an RPC that ended with code c says the
// server is over its capacity: ResourceExhausted (out of workers, queue
// or quota), Unavailable (shedding, or gone), DeadlineExceeded (too slow
// to answer in time). A gRPC status error for an expired deadline does
// not wrap context.DeadlineExceeded, which slidegate.IsOverloaded reads
// as a timeout, so the code says it instead.
func overloadCode(c codes.Code) bool {
	return c == codes.ResourceExhausted || c == codes.Unavailable || c == codes.DeadlineExceeded
}

// An overloadedError is what Exit records for an RPC that ended with an
// overload code (overloadCode): an adaptive rule (slidegate.AdaptiveRule)
// backs off on it (slidegate.IsOverloaded). It wraps the RPC's error,
// whose status (status.FromError) and identity (errors.Is) it keeps.
type overloadedError struct{ err error }

func (e *overloadedError) Error() string    { return e.err.Error() }
func (e *overloadedError) Unwrap() error    { return e.err }
func (e *overloadedError) Overloaded() bool { return true }

// codeOf returns the status code of err as grpc-go sends it: the code of a
// status error (or of an error wrapping one), Canceled or DeadlineExceeded
// for context errors, Unknown for anything else.
func codeOf(err error) codes.Code {
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	return status.FromContextError(err).Code()
}

// A codeSet is a set of status codes. The codes gRPC defines (0 to 16) and
// any others below 64 are bits; larger ones, which no gRPC library sends,
// are listed.
type codeSet struct {
	bits  uint64
	other []codes.Code
}

func newCodeSet(cs []codes.Code) codeSet {
	var s codeSet
	for _, c := range cs {
		if c < 64 {
			s.bits |= 1 << c
		} else if !slices.Contains(s.other, c) {
			s.other = append(s.other, c)
		}
	}
	return s
}

func (s codeSet) has(c codes.Code) bool {
	if c < 64 {
		return s.bits&(1<<c) != 0
	}
	return slices.Contains(s.other, c)
}

// A blockedError is the error of an RPC that a rule blocked: a gRPC status
// (GRPCStatus, for status.FromError and grpc-go's server) that wraps the
// *slidegate.BlockError (for errors.As and errors.Is on the client side).
type blockedError struct {
	st *status.Status
	be *slidegate.BlockError
}

func (e *blockedError) Error() string              { return e.st.Err().Error() }
func (e *blockedError) GRPCStatus() *status.Status { return e.st }
func (e *blockedError) Unwrap() error              { return e.be }
