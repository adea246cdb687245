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
	"github.com/slidegate/slidegate/middleware/httpguard"
	"github.com/slidegate/slidegate/middleware/internal/adapter"
)

// WithRetry makes [UnaryClientInterceptor] retry the RPCs that fail,
// within budget, as often and with the backoff policy says. The policy is
// HTTP's ([httpguard.RetryPolicy]), but its Retryable is not read. An RPC
// is retried by its status code: one of retryCodes, or codes.Unavailable
// if none are given. codes.OK is never retried. The budget counts each RPC once
// ([flow.RetryBudget.Request]). It is asked before each retry
// ([flow.RetryBudget.Retry]), and counts the retry when it decides.
// So retries waiting out their backoff are counted too. A nil budget turns
// retries off. The server and stream interceptors ignore WithRetry.
//
// Unavailable is gRPC's code for failures before the server acted on the
// RPC: a connection refused or reset, a server shutting down. gRPC
// documents it as safe to retry.
//
// Each attempt enters the guard on its own, so its rules and statistics
// count what the downstream really gets. An attempt with a retried code is
// retried, except:
//
//   - Never when the guard blocked it.
//   - Never when it was a half-open breaker's probe.
//   - Never once ctx is done.
//
// A blocked call returns the blocked status. A breaker's block
// ([flow.BreakerOpen]) counts as [flow.AttemptBreakerOpen], which the
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
func WithRetry(budget *flow.RetryBudget, policy httpguard.RetryPolicy, retryCodes ...codes.Code) Option {
	if len(retryCodes) == 0 {
		retryCodes = []codes.Code{codes.Unavailable}
	}
	rt := &retrier{budget: budget, codes: newCodeSet(retryCodes)} // a set: the caller may reuse its slice
	rt.maxRetries, rt.baseBackoff, rt.maxBackoff = adapter.RetryDefaults(policy.MaxRetries, policy.BaseBackoff, policy.MaxBackoff)
	return func(o *options) {
		if budget == nil {
			o.retry = nil
			return
		}
		o.retry = rt
	}
}

// A retrier is WithRetry's configuration, its policy's defaults filled in.
type retrier struct {
	budget                  *flow.RetryBudget
	maxRetries              int
	baseBackoff, maxBackoff time.Duration
	codes                   codeSet
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
			if block.Reason == flow.BreakerOpen {
				rt.budget.Retry(flow.AttemptBreakerOpen) // refused: nothing goes into an open breaker
			}
			return err
		}
		if err == nil || retry >= rt.maxRetries || ctx.Err() != nil {
			return err
		}
		if c := codeOf(err); c == codes.OK || !rt.codes.has(c) {
			return err
		}
		wait := flow.Backoff(retry, rt.baseBackoff, rt.maxBackoff)
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
