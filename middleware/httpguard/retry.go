package httpguard

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/internal/adapter"
)

// maxDrain is how much of a retried response's body Transport reads
// before closing it, so that the connection may serve the next attempt. A
// longer body is closed unread. That costs the connection, but never more
// than maxDrain bytes of a hostile server's reply.
const maxDrain = 4 << 10

// drainTime bounds the time Transport reads a retried response's body. A
// body that has not ended by then is closed, which closes its connection:
// a server that trickles its body cannot hold the caller. It is about what
// a new connection costs on a network that is not local, a handshake or
// two: less is spent on reading, more would be better spent on dialing.
const drainTime = 50 * time.Millisecond

// A RetryPolicy says how often a client retries and how long it waits
// between attempts. [WithRetry] gives it to [Transport]. The gRPC client
// interceptor takes it too (grpcguard.WithRetry). Every field's zero value
// stands for its default.
type RetryPolicy struct {
	// MaxRetries is the most retries of one request, after its first
	// attempt. Zero means 2; a negative value, none.
	MaxRetries int
	// BaseBackoff is the longest wait before the first retry. It doubles
	// for each retry after it, up to MaxBackoff. Each wait is drawn
	// uniformly from [0, that bound] ("full jitter"), so that clients that
	// failed together do not retry together. Zero or negative means
	// 25 ms.
	BaseBackoff time.Duration
	// MaxBackoff bounds every wait. It also bounds the longest Retry-After
	// a response may ask for and still be retried; a response that asks
	// for more is returned as it is. Zero or negative means 1 s.
	MaxBackoff time.Duration
	// Retryable says whether an HTTP attempt that reached the network may
	// be retried. The gRPC interceptor does not read it: it retries by
	// status code. It is given the attempt's response, or its error with a nil
	// response. Nil means Retryable. It is not asked about attempts the
	// guard blocked, nor about requests that are not safe to repeat (see
	// WithRetry). Nor is it asked once the request's context is done.
	Retryable func(resp *http.Response, err error) bool
}

// Retryable is [RetryPolicy]'s default Retryable. It retries a transport
// error other than a context's ([context.Canceled],
// [context.DeadlineExceeded]). It retries the statuses that say a gateway
// or server failed transiently: 502 Bad Gateway, 503 Service Unavailable
// and 504 Gateway Timeout.
//
// 429 Too Many Requests is not retried. The server asked for less traffic,
// and a retry would spend the budget on adding to it. A policy that wants
// it retried says so, and [Transport] still waits out its Retry-After.
func Retryable(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	if resp == nil {
		return false // a RoundTripper that broke its contract
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// WithRetry makes [Transport] retry the requests that fail, within budget.
// The budget counts each request once ([flow.RetryBudget.Request]). It is
// asked before each retry ([flow.RetryBudget.Retry]), and counts the
// retry when it decides. So retries waiting out their backoff are counted
// too. A nil budget turns retries off. [Middleware] ignores WithRetry.
//
// Only requests that are safe to send again are retried. Such a request
// has an idempotent method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE), or
// carries an Idempotency-Key or X-Idempotency-Key header. Its body must be
// nil, [http.NoBody], or one that can be had again from Request.GetBody.
// [http.NewRequest] sets GetBody for bytes, strings and their readers.
// Each attempt enters the guard on its own, so its rules and statistics
// count what the downstream really gets.
//
// An attempt is retried when policy.Retryable says so, except:
//
//   - Never when the guard blocked it.
//   - Never when it was a half-open breaker's probe.
//   - Never when it asks, with Retry-After in seconds, to wait past MaxBackoff.
//   - Never once the request's context is done.
//
// A blocked call returns the [*slidegate.BlockError]. A breaker's block
// ([flow.BreakerOpen]) counts as [flow.AttemptBreakerOpen], which the
// budget refuses. A flow rule's block means the local limit said no. A
// probe ([slidegate.Entry.Probe], [flow.AttemptProbe]) is not retried, for
// the breaker decides from its outcome alone. An HTTP date in Retry-After
// is not read.
//
// Before a retry, Transport reads at most 4 KiB of the failed
// response's body, for at most 50 ms, and closes it. Then it waits its
// backoff, at least the response's Retry-After, on the guard's clock. A
// context done while it waits ends the call at once with the context's
// error. When a retry is refused, the caller gets the last attempt's
// response or error as it is. So it does when the request's deadline
// leaves too little time for another attempt. That is 50 ms, the backoff,
// and as long as the attempt that failed took.
//
// The budget counts a retry when it allows it. A retry that is not sent
// after all is given back ([flow.RetryBudget.GiveBack]). That is when its
// context ended in the backoff, its body could not be had again, or the
// guard blocked it.
//
// Do not stack another retrying layer under Transport, such as a base
// transport that retries. Its retries would bypass the budget and the
// guard.
func WithRetry(budget *flow.RetryBudget, policy RetryPolicy) Option {
	return func(o *options) {
		if budget == nil {
			o.retry = nil
			return
		}
		p := policy.withDefaults()
		if p.Retryable == nil {
			p.Retryable = Retryable
		}
		o.retry = &retrier{budget: budget, policy: p}
	}
}

// A retrier is WithRetry's configuration, its policy's defaults filled in.
type retrier struct {
	budget *flow.RetryBudget
	policy RetryPolicy
}

// repeatable reports whether r may be sent more than once: an idempotent
// method or an idempotency key, and a body that can be had again.
func repeatable(r *http.Request) bool {
	if r.Body != nil && r.Body != http.NoBody && r.GetBody == nil {
		return false
	}
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	// Present, even empty, as net/http's own transport reads them.
	_, key := r.Header["Idempotency-Key"]
	_, xkey := r.Header["X-Idempotency-Key"]
	return key || xkey
}

// roundTripRetrying sends r, and retries it as WithRetry says.
func (t *transport) roundTripRetrying(r *http.Request) (*http.Response, error) {
	rt := t.o.retry
	rt.budget.Request()
	if !repeatable(r) {
		resp, _, err := t.attempt(r)
		return resp, err
	}
	ctx := r.Context()
	deadline, hasDeadline := ctx.Deadline()
	req := r
	var grant flow.Grant // the retry being sent, to give back if it is not
	for retry := 0; ; retry++ {
		var start time.Time
		if hasDeadline {
			start = time.Now()
		}
		resp, probe, err := t.attempt(req)
		if err != nil {
			var be *slidegate.BlockError
			if errors.As(err, &be) {
				rt.budget.GiveBack(grant) // the retry was not sent
				if be.Reason == flow.BreakerOpen {
					rt.budget.Retry(flow.AttemptBreakerOpen) // refused: nothing goes into an open breaker
				}
				return nil, err
			}
		}
		if retry >= rt.policy.MaxRetries || ctx.Err() != nil || !rt.policy.Retryable(resp, err) {
			return resp, err
		}
		wait := rt.policy.backoff(retry)
		if resp != nil {
			if after, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
				if after > rt.policy.MaxBackoff {
					return resp, err // the server asks for more than we wait
				}
				wait = max(wait, after)
			}
		}
		if hasDeadline && time.Until(deadline) < drainTime+wait+time.Since(start) {
			return resp, err // another attempt would not end in time
		}
		attempt := flow.AttemptFailed
		if probe {
			attempt = flow.AttemptProbe
		}
		var ok bool
		if grant, ok = rt.budget.Retry(attempt); !ok {
			return resp, err
		}
		if resp != nil {
			drain(resp, deadline, hasDeadline)
		}
		if err := clock.Sleep(ctx, t.g.Clock(), wait); err != nil {
			rt.budget.GiveBack(grant)
			return nil, err
		}
		next, err := again(r)
		if err != nil {
			rt.budget.GiveBack(grant)
			return nil, err
		}
		req = next
	}
}

// again returns a copy of r to send once more, with a new body from
// r.GetBody. The copy shares r's headers, which no RoundTripper writes to.
func again(r *http.Request) (*http.Request, error) {
	c := new(http.Request)
	*c = *r
	if r.Body != nil && r.Body != http.NoBody {
		body, err := r.GetBody()
		if err != nil {
			return nil, err
		}
		c.Body = body
	}
	return c, nil
}

// drain reads at most maxDrain bytes of resp's body, so that its
// connection can be reused, for at most drainTime or until the deadline,
// and closes it. A body known to be longer is closed at once: read in
// part, it would cost the connection all the same.
//
// The reading goroutine is left blocked in Read when the time is up: Close
// ends it, as it ends a Read of net/http's bodies.
func drain(resp *http.Response, deadline time.Time, hasDeadline bool) {
	body := resp.Body
	if body == nil || body == http.NoBody {
		return
	}
	if resp.ContentLength > maxDrain {
		_ = body.Close()
		return
	}
	d := drainTime
	if hasDeadline {
		d = min(d, time.Until(deadline))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.CopyN(io.Discard, body, maxDrain)
	}()
	timer := time.NewTimer(d)
	select {
	case <-done:
	case <-timer.C:
	}
	timer.Stop()
	_ = body.Close()
}

// withDefaults returns p with every zero field's default filled in
// (adapter.RetryDefaults), and a negative MaxRetries kept: no retry.
func (p RetryPolicy) withDefaults() RetryPolicy {
	p.MaxRetries, p.BaseBackoff, p.MaxBackoff = adapter.RetryDefaults(p.MaxRetries, p.BaseBackoff, p.MaxBackoff)
	return p
}

// backoff returns the wait before retry number retry+1 (retry counting
// from 0): flow.Backoff's full jitter up to min(MaxBackoff, BaseBackoff ×
// 2^retry).
func (p *RetryPolicy) backoff(retry int) time.Duration {
	return flow.Backoff(retry, p.BaseBackoff, p.MaxBackoff)
}

// retryAfter parses a Retry-After header in delay-seconds (RFC 9110,
// section 10.2.3), leading zeros allowed. A number of more than 9
// significant digits, which could overflow a Duration, is read as the
// longest Duration: it asks for longer than any MaxBackoff. Anything else
// (an HTTP date, a sign, a fraction, nothing) is no Retry-After.
func retryAfter(v string) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var s int64
	digits := 0 // significant digits
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if digits == 0 && c == '0' {
			continue
		}
		if digits++; digits <= 9 {
			s = s*10 + int64(c-'0')
		}
	}
	if digits > 9 {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(s) * time.Second, true
}
