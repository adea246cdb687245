package grpcguard_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/middleware/grpcguard"
	"github.com/slidegate/slidegate/middleware/httpguard"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// newBudget returns a retry budget over 10 s on a manual clock of its own,
// which the tests never advance: every request and retry falls in one
// bucket, so the budget's bound is exact.
func newBudget(t *testing.T, ratio float64, minPerSecond int64) *flow.RetryBudget {
	t.Helper()
	b, err := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: ratio, MinPerSecond: minPerSecond, Interval: 10 * time.Second, Clock: clock.NewManual(0)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// unlimited is a budget that allows every retry of an RPC retried at most
// MaxRetryRatio (100) times: the same client without a budget.
func unlimited(t *testing.T) *flow.RetryBudget { return newBudget(t, flowlimits.MaxRetryRatio, 0) }

// A downstream answers each attempt with the code its codes give, the last
// one repeated, and counts the attempts.
type downstream struct {
	attempts atomic.Int64
	codes    []codes.Code
}

func (d *downstream) invoke(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
	n := int(d.attempts.Add(1))
	c := d.codes[min(n, len(d.codes))-1]
	if c == codes.OK {
		return nil
	}
	return status.Error(c, c.String())
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

// call makes one unary call of unaryMethod through in to d, its clock
// advanced as it sleeps.
func call(clk *clock.Manual, in grpc.UnaryClientInterceptor, d *downstream) error {
	var err error
	advancing(clk, time.Second, func() { err = in(context.Background(), unaryMethod, nil, nil, nil, d.invoke) })
	return err
}

// TestRetryBudgetBoundsAttemptsToAFailingService makes n calls to a service
// that fails every one, retrying up to 3 times: without a budget it gets 4n
// attempts, with a budget of 20% and a floor of 10 at most 1.2n + 10.
func TestRetryBudgetBoundsAttemptsToAFailingService(t *testing.T) {
	const n, ratio, minPerSecond = 500, 0.2, 1 // a floor of 10 retries in 10 s
	policy := httpguard.RetryPolicy{MaxRetries: 3}
	attempts := func(budget *flow.RetryBudget) int64 {
		g, clk := guarded(t, slidegate.Rules{})
		d := &downstream{codes: []codes.Code{codes.Unavailable}}
		in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(budget, policy))
		advancing(clk, time.Second, func() {
			for range n {
				if err := in(context.Background(), unaryMethod, nil, nil, nil, d.invoke); status.Code(err) != codes.Unavailable {
					t.Errorf("got %v; want the last Unavailable", err)
					return
				}
			}
		})
		if got := stats(t, g, unaryMethod).Totals; got.Allowed != d.attempts.Load() || got.Failed != d.attempts.Load() {
			t.Errorf("the guard counted %d attempts and %d failures, the service got %d", got.Allowed, got.Failed, d.attempts.Load())
		}
		return d.attempts.Load()
	}
	without := attempts(unlimited(t))
	with := attempts(newBudget(t, ratio, minPerSecond))
	bound := int64(n*(1+ratio) + minPerSecond*10)
	t.Logf("%d calls to a service failing them all, up to 3 retries each: %d attempts without a budget, %d with a budget of %v (bound %d)",
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
	g, clk := guarded(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: unaryMethod, Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: ptr(int64(1)),
			OpenTimeout: slidegate.Duration(5 * time.Second)},
	}})
	d := &downstream{codes: []codes.Code{codes.Unavailable}}
	in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(unlimited(t), httpguard.RetryPolicy{MaxBackoff: time.Millisecond}))

	err := call(clk, in, d)
	var block *slidegate.BlockError
	if !errors.As(err, &block) || block.Reason != flow.BreakerOpen {
		t.Fatalf("the retry after the failure that opened the breaker: %v, want its block", err)
	}
	if d.attempts.Load() != 1 {
		t.Fatalf("%d attempts reached the service, want 1", d.attempts.Load())
	}

	clk.Advance(5 * time.Second) // half-open: the next attempt is a probe
	err = call(clk, in, d)
	if errors.As(err, &block) || status.Code(err) != codes.Unavailable {
		t.Fatalf("the failed probe: %v; want its own Unavailable", err)
	}
	if tot := stats(t, g, unaryMethod).Totals; d.attempts.Load() != 2 || tot.BlockedBy[flow.BreakerOpen] != 1 {
		t.Errorf("%d attempts and %d blocked by the breaker, want 2 and 1: the probe was retried",
			d.attempts.Load(), tot.BlockedBy[flow.BreakerOpen])
	}
}

// TestRetryCodes: only the policy's codes are retried, Unavailable by
// default; a flow rule's block is not retried; the guard counts every
// attempt.
func TestRetryCodes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   httpguard.RetryPolicy
		retry    []codes.Code
		codes    []codes.Code
		want     codes.Code
		attempts int64
	}{
		{"Unavailable then OK", httpguard.RetryPolicy{}, nil, []codes.Code{codes.Unavailable, codes.OK}, codes.OK, 2},
		{"Unavailable thrice", httpguard.RetryPolicy{}, nil, []codes.Code{codes.Unavailable}, codes.Unavailable, 3},
		{"Internal", httpguard.RetryPolicy{}, nil, []codes.Code{codes.Internal}, codes.Internal, 1},
		{"Canceled", httpguard.RetryPolicy{}, nil, []codes.Code{codes.Canceled}, codes.Canceled, 1},
		{"Aborted listed", httpguard.RetryPolicy{}, []codes.Code{codes.Aborted}, []codes.Code{codes.Aborted, codes.Unavailable}, codes.Unavailable, 2},
		{"OK listed: never retried", httpguard.RetryPolicy{}, []codes.Code{codes.OK}, []codes.Code{codes.OK}, codes.OK, 1},
		{"no retries", httpguard.RetryPolicy{MaxRetries: -1}, nil, []codes.Code{codes.Unavailable}, codes.Unavailable, 1},
	} {
		g, clk := guarded(t, slidegate.Rules{})
		d := &downstream{codes: tc.codes}
		in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(unlimited(t), tc.policy, tc.retry...))
		err := call(clk, in, d)
		if status.Code(err) != tc.want || d.attempts.Load() != tc.attempts {
			t.Errorf("%s: %v after %d attempts, want %v after %d", tc.name, err, d.attempts.Load(), tc.want, tc.attempts)
		}
		if got := stats(t, g, unaryMethod).Totals.Allowed; got != tc.attempts {
			t.Errorf("%s: the guard counted %d attempts, want %d", tc.name, got, tc.attempts)
		}
	}

	g, clk := guarded(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 1}}})
	d := &downstream{codes: []codes.Code{codes.Unavailable}}
	in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(unlimited(t), httpguard.RetryPolicy{MaxBackoff: time.Millisecond}))
	err := call(clk, in, d)
	var block *slidegate.BlockError
	if !errors.As(err, &block) || block.Reason != flow.RateLimited || status.Code(err) != codes.ResourceExhausted {
		t.Errorf("the retry over the limit: %v, want its block", err)
	}
	if d.attempts.Load() != 1 {
		t.Errorf("%d attempts, want 1", d.attempts.Load())
	}
}

// TestRetryBackoffEndsWithTheContext: a context cancelled while a retry
// waits out its backoff ends the call at once with codes.Canceled.
func TestRetryBackoffEndsWithTheContext(t *testing.T) {
	g, clk := guarded(t, slidegate.Rules{})
	d := &downstream{codes: []codes.Code{codes.Unavailable}}
	// A backoff of an hour on a clock that never moves: only ctx ends it.
	in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(unlimited(t),
		httpguard.RetryPolicy{BaseBackoff: time.Hour, MaxBackoff: time.Hour}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- in(ctx, unaryMethod, nil, nil, nil, d.invoke) }()
	eventually(t, "the retry waits", func() bool { return clk.Sleepers() > 0 })
	cancel()
	select {
	case err := <-done:
		wantCode(t, err, codes.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end when its context was cancelled")
	}
	if d.attempts.Load() != 1 {
		t.Errorf("%d attempts, want 1", d.attempts.Load())
	}
}

// TestRetryStreamsAreNotRetried: a stream whose creation fails with a
// retryable code is not created again.
func TestRetryStreamsAreNotRetried(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{})
	var calls atomic.Int64
	streamer := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
		calls.Add(1)
		return nil, status.Error(codes.Unavailable, "down")
	}
	in := grpcguard.StreamClientInterceptor(g, grpcguard.WithRetry(unlimited(t), httpguard.RetryPolicy{}))
	if _, err := in(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, serverStreamMethod, streamer); status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
	if calls.Load() != 1 {
		t.Errorf("%d attempts to create the stream, want 1", calls.Load())
	}
}

// TestRetryCostsNoAllocationWhenTheFirstAttemptSucceeds: WithRetry adds no
// allocation to a call that succeeds at once.
func TestRetryCostsNoAllocationWhenTheFirstAttemptSucceeds(t *testing.T) {
	if raceDetector {
		t.Skip("sync.Pool drops entries under the race detector")
	}
	g, _ := guarded(t, slidegate.Rules{
		Flow:     []slidegate.FlowRule{{Resource: unaryMethod, Limit: 1 << 31}},
		Breakers: []slidegate.BreakerRule{{Resource: unaryMethod, Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5}},
	})
	ctx := context.Background()
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(newBudget(t, 0.2, 10), httpguard.RetryPolicy{}))
	if n := testing.AllocsPerRun(1000, func() { in(ctx, unaryMethod, nil, nil, nil, invoker) }); n != 0 {
		t.Errorf("%v allocations per call with WithRetry; want 0, as without", n)
	}
}

// TestARetryNotSentIsGivenBackToTheBudget: a retry the budget allowed but
// that never reached the service, because the caller gave up in its backoff
// or the guard blocked it, is not counted by the budget.
func TestARetryNotSentIsGivenBackToTheBudget(t *testing.T) {
	t.Run("cancelled in the backoff", func(t *testing.T) {
		g, clk := guarded(t, slidegate.Rules{})
		d := &downstream{codes: []codes.Code{codes.Unavailable}}
		budget := unlimited(t)
		// A backoff of an hour on a clock that never moves: only ctx ends it.
		in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(budget,
			httpguard.RetryPolicy{BaseBackoff: time.Hour, MaxBackoff: time.Hour}))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- in(ctx, unaryMethod, nil, nil, nil, d.invoke) }()
		eventually(t, "the retry waits", func() bool { return clk.Sleepers() > 0 })
		if got := flowstate.Retries(budget).Retries; got != 1 {
			t.Fatalf("the budget counts %d retries while one waits in its backoff, want 1", got)
		}
		cancel()
		wantCode(t, <-done, codes.Canceled)
		if got := flowstate.Retries(budget).Retries; got != 0 || d.attempts.Load() != 1 {
			t.Errorf("the budget counts %d retries after %d attempts, want 0 after 1", got, d.attempts.Load())
		}
	})
	for _, tc := range []struct {
		name  string
		rules slidegate.Rules
	}{
		{"blocked by a flow rule", slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unaryMethod, Limit: 1}}}},
		{"blocked by the breaker it opened", slidegate.Rules{Breakers: []slidegate.BreakerRule{
			{Resource: unaryMethod, Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: ptr(int64(1)),
				OpenTimeout: slidegate.Duration(5 * time.Second)},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, clk := guarded(t, tc.rules)
			d := &downstream{codes: []codes.Code{codes.Unavailable}}
			budget := unlimited(t)
			in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(budget, httpguard.RetryPolicy{}))
			var block *slidegate.BlockError
			if err := call(clk, in, d); !errors.As(err, &block) {
				t.Fatalf("%v, want the retry's block", err)
			}
			if st := flowstate.Retries(budget); st.Retries != 0 || d.attempts.Load() != 1 {
				t.Errorf("the budget counts %d retries after %d attempts, want 0 after 1", st.Retries, d.attempts.Load())
			}
		})
	}
}

// TestARetryTheDeadlineCannotFitIsNotTried: an attempt that fails after
// taking most of the call's deadline is not retried: the call returns its
// error at once, not the deadline's, and nothing is taken from the budget.
func TestARetryTheDeadlineCannotFitIsNotTried(t *testing.T) {
	g, _ := guarded(t, slidegate.Rules{}) // a clock that never moves: a backoff ends only with ctx
	budget := unlimited(t)
	in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(budget, httpguard.RetryPolicy{}))
	var attempts atomic.Int64
	slow := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		attempts.Add(1)
		time.Sleep(time.Second) // of the 1.5 s the caller gives
		return status.Error(codes.Unavailable, "down")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	wantCode(t, in(ctx, unaryMethod, nil, nil, nil, slow), codes.Unavailable)
	if got := flowstate.Retries(budget).Retries; got != 0 || attempts.Load() != 1 {
		t.Errorf("the budget counts %d retries after %d attempts, want 0 after 1", got, attempts.Load())
	}
}
