package grpcguard

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// Defaults of a [RetryPolicy]'s zero fields.
const (
	DefaultMaxRetries  = 2
	DefaultBaseBackoff = 25 * time.Millisecond
	DefaultMaxBackoff  = time.Second
)

// A RetryPolicy says which unary RPCs [UnaryClientInterceptor] retries and
// how long it waits between attempts. Every field's zero value stands for
// its default.
type RetryPolicy struct {
	// MaxRetries is the most retries of one RPC, after its first attempt.
	// Zero means DefaultMaxRetries; a negative value, none.
	MaxRetries int
	// BaseBackoff is the longest wait before the first retry. It doubles
	// for each retry after it, up to MaxBackoff. Each wait is drawn
	// uniformly from [0, that bound] ("full jitter"), so that clients that
	// failed together do not retry together. Zero or negative means
	// DefaultBaseBackoff.
	BaseBackoff time.Duration
	// MaxBackoff bounds every wait. Zero or negative means
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Codes are the status codes of the attempts that may be retried. Nil
	// means DefaultRetryCodes; an empty, non-nil slice, none. codes.OK is
	// never retried, listed or not.
	Codes []codes.Code
}

// DefaultRetryCodes returns the codes a [RetryPolicy] retries unless its
// Codes say otherwise. That is codes.Unavailable alone. gRPC gives it to
// failures that happened before the server acted on the RPC, such as a
// connection refused or reset, or a server shutting down. gRPC documents
// it as safe to retry. The slice is new on each call.
func DefaultRetryCodes() []codes.Code { return []codes.Code{codes.Unavailable} }

// WithRetry makes [UnaryClientInterceptor] retry the RPCs that fail,
// within budget. The budget counts each RPC once
// ([flow.RetryBudget.Request]). It is asked before each retry
// ([flow.RetryBudget.Retry]), and counts the retry when it decides.
// So retries waiting out their backoff are counted too. A nil budget turns
// retries off. The server and stream interceptors ignore WithRetry.
//
// Each attempt enters the guard on its own, so its rules and statistics
// count what the downstream really gets. An attempt is retried when its
// code is in policy.Codes, except:
//
//   - Never when the guard blocked it.
//   - Never when it was a half-open breaker's probe.
//   - Never once ctx is done.
//
// A blocked call returns the blocked status. A breaker's block
// ([slidegate.BreakerOpen]) counts as [flow.AttemptBreakerOpen], which the
// budget refuses. A flow rule's block means the local limit said no. A
// probe ([slidegate.Entry.Probe], [flow.AttemptProbe]) is not retried, for
// the breaker decides from its outcome alone.
//
// Between attempts the interceptor waits its backoff on the guard's clock.
// ctx done while it waits ends the call at once with the status of ctx's
// error. When a retry is refused, the call returns the last attempt's
// error as it is. So it does when ctx's deadline leaves too little time
// for another attempt: the backoff, and as long as the attempt that failed
// took.
//
// The budget counts a retry when it allows it. A retry that is not sent
// after all is given back ([flow.RetryBudget.GiveBack]). That is when ctx
// ended in the backoff, or the guard blocked it.
//
// Streams are not retried. Their messages are sent and received by the
// caller after the interceptor has returned the stream. The interceptor
// cannot replay what it never saw.
//
// Do not turn grpc-go's own retries on as well, with a service config's
// retryPolicy or [grpc.WithDefaultServiceConfig]. They happen beneath the
// interceptor, outside the budget and the guard, and multiply with these.
func WithRetry(budget *flow.RetryBudget, policy RetryPolicy) Option {
	return func(o *options) {
		if budget == nil {
			o.retry = nil
			return
		}
		p := policy
		if p.MaxRetries == 0 {
			p.MaxRetries = DefaultMaxRetries
		}
		if p.BaseBackoff <= 0 {
			p.BaseBackoff = DefaultBaseBackoff
		}
		if p.MaxBackoff <= 0 {
			p.MaxBackoff = DefaultMaxBackoff
		}
		cs := p.Codes
		if cs == nil {
			cs = DefaultRetryCodes()
		}
		p.Codes = nil // read through codes alone: the caller may reuse its slice
		o.retry = &retrier{budget: budget, policy: p, codes: newCodeSet(cs)}
	}
}

// A retrier is WithRetry's configuration, its policy's defaults filled in.
type retrier struct {
	budget *flow.RetryBudget
	policy RetryPolicy
	codes  codeSet
}

// invoke makes the unary RPC method as UnaryClientInterceptor does, and
// retries it as WithRetry says.
func (rt *retrier) invoke(ctx context.Context, g *slidegate.Guard, o *options, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts []grpc.CallOption) error {
	rt.budget.Request()
	name, key := o.name(ctx, method), o.keyOf(ctx, method, false)
	deadline, hasDeadline := ctx.Deadline()
	var grant flow.Grant // the retry being sent, to give back if it is not
	for retry := 0; ; retry++ {
		var start time.Time
		if hasDeadline {
			start = time.Now()
		}
		probe, block, err := attempt(ctx, g, o, name, key, method, req, reply, cc, invoker, callOpts)
		if block != nil {
			rt.budget.GiveBack(grant) // the retry was not sent
			if block.Reason == slidegate.BreakerOpen {
				rt.budget.Retry(flow.AttemptBreakerOpen) // refused: nothing goes into an open breaker
			}
			return err
		}
		if err == nil || retry >= rt.policy.MaxRetries || ctx.Err() != nil {
			return err
		}
		if c := codeOf(err); c == codes.OK || !rt.codes.has(c) {
			return err
		}
		wait := rt.policy.backoff(retry)
		if hasDeadline && time.Until(deadline) < wait+time.Since(start) {
			return err // another attempt would not end in time
		}
		a := flow.AttemptFailed
		if probe {
			a = flow.AttemptProbe
		}
		var ok bool
		if grant, ok = rt.budget.Retry(a); !ok {
			return err
		}
		if err := clock.Sleep(ctx, g.Clock(), wait); err != nil {
			rt.budget.GiveBack(grant)
			return status.FromContextError(err).Err()
		}
	}
}

// attempt makes one attempt of a unary RPC through the guard. It returns
// whether the attempt was a half-open breaker's probe, the
// *slidegate.BlockError if the guard blocked it, and the attempt's error.
func attempt(ctx context.Context, g *slidegate.Guard, o *options, name, key, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts []grpc.CallOption) (probe bool, block *slidegate.BlockError, err error) {
	e, err := g.Enter(ctx, name, slidegate.WithKey(key))
	if err != nil {
		var be *slidegate.BlockError // on the heap: declared here, only blocked calls pay for it
		errors.As(err, &be)
		return false, be, o.blocked(err)
	}
	probe = e.Probe()
	returned := false
	defer func() {
		if !returned {
			e.Exit(errPanicked) // the panic goes on
		}
	}()
	err = invoker(ctx, method, req, reply, cc, callOpts...)
	returned = true
	e.Exit(o.outcome(err))
	return probe, nil, err
}

// backoff returns the wait before retry number retry+1 (retry counting
// from 0): flow.Backoff's full jitter up to min(MaxBackoff, BaseBackoff ×
// 2^retry).
func (p *RetryPolicy) backoff(retry int) time.Duration {
	return flow.Backoff(retry, p.BaseBackoff, p.MaxBackoff)
}
