package httpguard_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// backendHost is the host of the requests these tests send: their
// resource is "GET backend.test" (the method and host).
const backendHost = "backend.test"

// newBudget returns a retry budget over 10 s on a manual clock of its own,
// which the tests never advance: every request and retry falls in one
// bucket, so the budget's bound is exact.
func newBudget(t *testing.T, ratio float64, minPerSecond int64) *flow.RetryBudget {
	t.Helper()
	b, err := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: ratio, MinPerSecond: minPerSecond, Interval: 10 * time.Second, Clock: clock.NewManual(int64(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// unlimited is a budget that allows every retry of a request retried at
// most MaxRetryRatio (100) times: the same client without a budget.
func unlimited(t *testing.T) *flow.RetryBudget { return newBudget(t, flowlimits.MaxRetryRatio, 0) }

// A backend answers each attempt with the status its statuses give, the
// last one repeated, and counts the attempts and the bodies it read.
type backend struct {
	attempts atomic.Int64
	statuses []int
	header   http.Header // of every response
	bodies   []string    // the request bodies, one per attempt
	sent     []*countingBody
}

func (b *backend) RoundTrip(r *http.Request) (*http.Response, error) {
	n := int(b.attempts.Add(1))
	if r.Body != nil {
		p, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		b.bodies = append(b.bodies, string(p))
	}
	status := b.statuses[min(n, len(b.statuses))-1]
	body := &countingBody{left: 1 << 20} // a hostile server's megabyte
	b.sent = append(b.sent, body)
	return &http.Response{StatusCode: status, Header: b.header, Body: body, Request: r}, nil
}

// A countingBody is a response body of left bytes that counts what is read
// of it and whether it was closed. It may be closed during a Read, as
// net/http's bodies may.
type countingBody struct {
	mu         sync.Mutex
	left, read int
	closed     bool
}

func (c *countingBody) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, errors.New("read after close")
	}
	if c.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.left)
	c.left -= n
	c.read += n
	return n, nil
}

func (c *countingBody) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

// state returns the bytes read of c and whether it was closed.
func (c *countingBody) state() (read int, closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read, c.closed
}

// advancing runs f in a goroutine and, until it returns, advances clk by
// step whenever something sleeps on it: the backoffs of f's retries pass at
// once on the guard's clock, however long the jitter made them.
func advancing(clk *clock.Manual, step time.Duration, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		if clk.Sleepers() > 0 {
			clk.Advance(step)
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// send sends one request through rt, its clock advanced as it sleeps, and
// closes the body of the response it returns.
func send(t *testing.T, clk *clock.Manual, rt http.RoundTripper, r *http.Request) (*http.Response, error) {
	t.Helper()
	var resp *http.Response
	var err error
	advancing(clk, time.Second, func() { resp, err = rt.RoundTrip(r) })
	if resp != nil {
		resp.Body.Close()
	}
	return resp, err
}

func get(t *testing.T) *http.Request {
	t.Helper()
	r, err := http.NewRequest("GET", "http://"+backendHost+"/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func totals(t *testing.T, g *slidegate.Guard) slidegate.Totals {
	t.Helper()
	return stats(t, g, "GET "+backendHost).Totals
}

// TestRetryBudgetBoundsAttemptsToAFailingDownstream sends n requests to a
// downstream that fails every one, retrying up to 3 times: without a budget
// it gets 4n attempts, with a budget of 20% and a floor of 10 at most
// 1.2n + 10.
func TestRetryBudgetBoundsAttemptsToAFailingDownstream(t *testing.T) {
	const n, ratio, minPerSecond = 500, 0.2, 1 // a floor of 10 retries in 10 s
	policy := httpguard.RetryPolicy{MaxRetries: 3}
	attempts := func(budget *flow.RetryBudget) int64 {
		g, clk := newGuard(t, slidegate.Rules{})
		be := &backend{statuses: []int{http.StatusServiceUnavailable}}
		rt := httpguard.Transport(g, be, httpguard.WithRetry(budget, policy))
		advancing(clk, time.Second, func() {
			for range n {
				resp, err := rt.RoundTrip(get(t))
				if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("got %v, %v; want the last 503", resp, err)
					return
				}
				resp.Body.Close()
			}
		})
		if got := totals(t, g).Allowed; got != be.attempts.Load() {
			t.Errorf("the guard counted %d attempts, the downstream got %d", got, be.attempts.Load())
		}
		return be.attempts.Load()
	}
	without := attempts(unlimited(t))
	with := attempts(newBudget(t, ratio, minPerSecond))
	bound := int64(n*(1+ratio) + minPerSecond*10)
	t.Logf("%d requests to a downstream failing them all, up to 3 retries each: %d attempts without a budget, %d with a budget of %v (bound %d)",
		n, without, with, ratio, bound)
	if without != 4*n {
		t.Errorf("without a budget: %d attempts, want %d", without, 4*n)
	}
	if with > bound {
		t.Errorf("with a budget: %d attempts, want at most %d", with, bound)
	}
	if with < bound-2 {
		t.Errorf("with a budget: %d attempts, want close to %d: the budget was not spent", with, bound)
	}
}

// TestRetryNeverIntoAnOpenBreakerNorOfAProbe: a failure that opens the
// breaker is not retried past it, and a half-open breaker's probe that
// fails is returned as it is, not retried.
func TestRetryNeverIntoAnOpenBreakerNorOfAProbe(t *testing.T) {
	g, clk := newGuard(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "GET " + backendHost, Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: one(1),
			OpenTimeout: slidegate.Duration(5 * time.Second)},
	}})
	be := &backend{statuses: []int{http.StatusServiceUnavailable}}
	rt := httpguard.Transport(g, be, httpguard.WithRetry(unlimited(t), httpguard.RetryPolicy{MaxBackoff: time.Millisecond}))

	_, err := send(t, clk, rt, get(t))
	var block *slidegate.BlockError
	if !errors.As(err, &block) || block.Reason != flow.BreakerOpen {
		t.Fatalf("the retry after the failure that opened the breaker: %v, want its block", err)
	}
	if be.attempts.Load() != 1 {
		t.Fatalf("%d attempts reached the downstream, want 1", be.attempts.Load())
	}

	clk.Advance(5 * time.Second) // half-open: the next attempt is a probe
	resp, err := send(t, clk, rt, get(t))
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the failed probe: %v, %v; want its 503 as it is", resp, err)
	}
	if tot := totals(t, g); be.attempts.Load() != 2 || tot.BlockedBy[flow.BreakerOpen] != 1 {
		t.Errorf("%d attempts and %d blocked by the breaker, want 2 and 1: the probe was retried",
			be.attempts.Load(), tot.BlockedBy[flow.BreakerOpen])
	}
}

// TestRetryNotPastAFlowRule: an attempt a flow rule blocks is not retried:
// the local limit said no, and the caller gets its block.
func TestRetryNotPastAFlowRule(t *testing.T) {
	g, clk := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET " + backendHost, Limit: 1}}})
	be := &backend{statuses: []int{http.StatusServiceUnavailable}}
	rt := httpguard.Transport(g, be, httpguard.WithRetry(unlimited(t), httpguard.RetryPolicy{MaxBackoff: time.Millisecond}))
	_, err := send(t, clk, rt, get(t))
	var block *slidegate.BlockError
	if !errors.As(err, &block) || block.Reason != flow.RateLimited {
		t.Fatalf("the retry over the limit: %v, want its block", err)
	}
	if tot := totals(t, g); be.attempts.Load() != 1 || tot.BlockedBy[flow.RateLimited] != 1 {
		t.Errorf("%d attempts, %d blocked; want 1 and 1", be.attempts.Load(), tot.BlockedBy[flow.RateLimited])
	}
}

// TestRetryOnlyWhatIsSafeToRepeat: a POST without an idempotency key, and a
// body that cannot be had again, are sent once; a POST with a key is
// retried with its body intact each time.
func TestRetryOnlyWhatIsSafeToRepeat(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		body     io.Reader
		header   string
		attempts int64
	}{
		{"POST", "POST", strings.NewReader("payload"), "", 1},
		{"PATCH", "PATCH", nil, "", 1},
		{"POST with Idempotency-Key", "POST", strings.NewReader("payload"), "Idempotency-Key", 3},
		{"POST with X-Idempotency-Key", "POST", strings.NewReader("payload"), "X-Idempotency-Key", 3},
		{"PUT", "PUT", strings.NewReader("payload"), "", 3},
		{"PUT whose body cannot be had again", "PUT", io.MultiReader(strings.NewReader("payload")), "", 1},
		{"DELETE", "DELETE", nil, "", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, clk := newGuard(t, slidegate.Rules{})
			be := &backend{statuses: []int{http.StatusBadGateway}}
			rt := httpguard.Transport(g, be, httpguard.WithRetry(unlimited(t), httpguard.RetryPolicy{}))
			r, err := http.NewRequest(tc.method, "http://"+backendHost+"/x", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				r.Header.Set(tc.header, "k1")
			}
			resp, err := send(t, clk, rt, r)
			if err != nil || resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("got %v, %v; want the last 502", resp, err)
			}
			if got := be.attempts.Load(); got != tc.attempts {
				t.Errorf("%d attempts, want %d", got, tc.attempts)
			}
			for i, b := range be.bodies {
				if tc.body != nil && b != "payload" {
					t.Errorf("attempt %d sent the body %q, want %q", i+1, b, "payload")
				}
			}
		})
	}
}

// TestRetryClosesTheRetriedResponses: the body of a response that is
// retried is read at most MaxDrain bytes and closed; the last is the
// caller's.
func TestRetryClosesTheRetriedResponses(t *testing.T) {
	g, clk := newGuard(t, slidegate.Rules{})
	be := &backend{statuses: []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK}}
	rt := httpguard.Transport(g, be, httpguard.WithRetry(unlimited(t), httpguard.RetryPolicy{}))
	var resp *http.Response
	var err error
	advancing(clk, time.Second, func() { resp, err = rt.RoundTrip(get(t)) })
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("got %v, %v; want the 200 of the third attempt", resp, err)
	}
	if len(be.sent) != 3 {
		t.Fatalf("%d attempts, want 3", len(be.sent))
	}
	for i, b := range be.sent[:2] {
		if read, closed := b.state(); !closed || read > httpguard.MaxDrain {
			t.Errorf("retried response %d: closed %v, %d bytes read; want closed, at most %d read", i+1, closed, read, httpguard.MaxDrain)
		}
	}
	if _, closed := be.sent[2].state(); closed {
		t.Error("the response returned to the caller was closed")
	}
	resp.Body.Close()
	if tot := totals(t, g); tot.Allowed != 3 || tot.Failed != 2 || tot.Succeeded != 1 {
		t.Errorf("the guard counted %+v; want 3 attempts allowed, 2 failed, 1 succeeded", tot)
	}
}

// TestRetryBackoffEndsWithTheContext: a context cancelled while a retry
// waits out its backoff ends the call at once with the context's error.
func TestRetryBackoffEndsWithTheContext(t *testing.T) {
	g, clk := newGuard(t, slidegate.Rules{})
	be := &backend{statuses: []int{http.StatusServiceUnavailable}}
	// A backoff of an hour on a clock that never moves: only ctx ends it.
	rt := httpguard.Transport(g, be, httpguard.WithRetry(unlimited(t),
		httpguard.RetryPolicy{BaseBackoff: time.Hour, MaxBackoff: time.Hour}))
	be.header = http.Header{"Retry-After": {"3600"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := get(t).WithContext(ctx)
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(r)
		done <- result{resp, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); clk.Sleepers() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the retry never waited")
		}
	}
	cancel()
	select {
	case res := <-done:
		if res.resp != nil || !errors.Is(res.err, context.Canceled) {
			t.Errorf("got %v, %v; want context.Canceled", res.resp, res.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end when its context was cancelled")
	}
	if _, closed := be.sent[0].state(); be.attempts.Load() != 1 || !closed {
		t.Errorf("%d attempts, the first closed: %v; want 1, closed", be.attempts.Load(), closed)
	}
}

// TestRetryAfter: a Retry-After within MaxBackoff is waited out in full; one
// beyond it, however written, is not retried; one that is not a number of
// seconds is ignored.
func TestRetryAfter(t *testing.T) {
	policy := httpguard.RetryPolicy{MaxRetries: 1, BaseBackoff: time.Millisecond, MaxBackoff: 2 * time.Second}
	for _, tc := range []struct {
		value    string
		attempts int64
	}{
		{"3", 1},
		{"0000000001", 2}, // leading zeros: 1 s
		{"00", 2},
		{"99999999999999999999999999", 1},
		{"-1", 2},
		{"1.5", 2},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 2},
		{"", 2},
	} {
		g, clk := newGuard(t, slidegate.Rules{})
		be := &backend{statuses: []int{http.StatusServiceUnavailable}, header: http.Header{"Retry-After": {tc.value}}}
		rt := httpguard.Transport(g, be, httpguard.WithRetry(unlimited(t), policy))
		if _, err := send(t, clk, rt, get(t)); err != nil {
			t.Fatal(err)
		}
		if got := be.attempts.Load(); got != tc.attempts {
			t.Errorf("Retry-After %q: %d attempts, want %d", tc.value, got, tc.attempts)
		}
	}

	// "2" is waited out in full, longer than the backoff.
	g, clk := newGuard(t, slidegate.Rules{})
	be := &backend{statuses: []int{http.StatusServiceUnavailable}, header: http.Header{"Retry-After": {"2"}}}
	rt := httpguard.Transport(g, be, httpguard.WithRetry(unlimited(t), policy))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := rt.RoundTrip(get(t)); err == nil {
			resp.Body.Close()
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); clk.Sleepers() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the retry never waited")
		}
	}
	clk.Advance(2*time.Second - 1)
	if clk.Sleepers() != 1 || be.attempts.Load() != 1 {
		t.Errorf("the retry did not wait out Retry-After: 2")
	}
	clk.Advance(1)
	<-done
	if be.attempts.Load() != 2 {
		t.Errorf("%d attempts, want 2", be.attempts.Load())
	}
}

// TestRetryTransportErrors: a transport error is retried, a context's is
// not; a nil budget retries nothing.
func TestRetryTransportErrors(t *testing.T) {
	var calls atomic.Int64
	failing := func(err error) http.RoundTripper {
		return roundTripFunc(func(*http.Request) (*http.Response, error) { calls.Add(1); return nil, err })
	}
	for _, tc := range []struct {
		name     string
		err      error
		budget   *flow.RetryBudget
		attempts int64
	}{
		{"connection refused", errors.New("connection refused"), unlimited(t), 3},
		{"deadline", context.DeadlineExceeded, unlimited(t), 1},
		{"no budget", errors.New("connection refused"), nil, 1},
	} {
		calls.Store(0)
		g, clk := newGuard(t, slidegate.Rules{})
		rt := httpguard.Transport(g, failing(tc.err), httpguard.WithRetry(tc.budget, httpguard.RetryPolicy{}))
		if _, err := send(t, clk, rt, get(t)); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
		if calls.Load() != tc.attempts {
			t.Errorf("%s: %d attempts, want %d", tc.name, calls.Load(), tc.attempts)
		}
	}
}

// TestRetryCostsNoAllocationWhenTheFirstAttemptSucceeds: WithRetry adds no
// allocation to a request that succeeds at once.
func TestRetryCostsNoAllocationWhenTheFirstAttemptSucceeds(t *testing.T) {
	if raceDetector {
		t.Skip("sync.Pool drops entries under the race detector")
	}
	g, _ := newGuard(t, slidegate.Rules{
		Flow:     []slidegate.FlowRule{{Resource: "GET " + backendHost, Limit: 1 << 31}},
		Breakers: []slidegate.BreakerRule{{Resource: "GET " + backendHost, Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5}},
	})
	ok := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return ok, nil })
	r := get(t)
	allocs := func(rt http.RoundTripper) float64 {
		rt.RoundTrip(r) // the resource's first request makes it
		return testing.AllocsPerRun(1000, func() { rt.RoundTrip(r) })
	}
	without := allocs(httpguard.Transport(g, base))
	with := allocs(httpguard.Transport(g, base, httpguard.WithRetry(newBudget(t, 0.2, 10), httpguard.RetryPolicy{})))
	if with != without {
		t.Errorf("%v allocations per request with WithRetry, %v without", with, without)
	}
}
