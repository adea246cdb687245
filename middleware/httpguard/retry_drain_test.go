package httpguard_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// A tricklingServer answers every request 503 with a body sent one byte at
// a time: a downstream, or an attacker, that keeps a client reading. It
// counts the requests it gets.
type tricklingServer struct {
	*httptest.Server
	attempts atomic.Int64
}

// stop closes the server's listener and connections, so that every call to
// it returns.
func (s *tricklingServer) stop() {
	s.Listener.Close()
	s.CloseClientConnections()
}

// trickling starts a tricklingServer whose bodies are size bytes, one sent
// every interval.
func trickling(t *testing.T, size int, interval time.Duration) *tricklingServer {
	t.Helper()
	s := new(tricklingServer)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.attempts.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		rc := http.NewResponseController(w)
		for range size {
			if _, err := w.Write([]byte{'x'}); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(interval):
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// realGuard returns a guard on the system clock, whose backoffs pass in
// real time, as they do for a program.
func realGuard(t *testing.T) *slidegate.Guard {
	t.Helper()
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// within calls f, and fails the test if it has not returned within limit:
// it then calls unblock, which must make f return, and waits for it.
func within(t *testing.T, limit time.Duration, unblock func(), f func()) time.Duration {
	t.Helper()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return time.Since(start)
	case <-time.After(limit):
		t.Errorf("the call has not returned after %v", limit)
		unblock()
		<-done
		return time.Since(start)
	}
}

// TestARetriedResponseTrickledSlowlyIsClosedNotDrained: a downstream that
// answers 503 with 4 KiB sent a byte every 4 ms (16 s a body), or that
// sends one byte and stalls, does not hold the caller: the retried
// responses are read for a short time, then closed, and the call returns
// the last 503 well within a second or two.
func TestARetriedResponseTrickledSlowlyIsClosedNotDrained(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
	}{
		{"a byte every 4 ms", 4 * time.Millisecond},
		{"a byte, then nothing", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := trickling(t, 4<<10, tc.interval)
			budget := unlimited(t)
			client := &http.Client{Transport: httpguard.Transport(realGuard(t), srv.Client().Transport,
				httpguard.WithRetry(budget, httpguard.RetryPolicy{}))}
			var resp *http.Response
			var err error
			took := within(t, 3*time.Second, srv.stop, func() { resp, err = client.Get(srv.URL) })
			if err != nil {
				t.Fatalf("after %v: %v, want the last 503", took, err)
			}
			resp.Body.Close()
			t.Logf("a 503 of 4 KiB, %s, retried twice: the call returned after %v", tc.name, took.Round(time.Millisecond))
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("status %d, want 503", resp.StatusCode)
			}
			if got := srv.attempts.Load(); got != 1+httpguard.DefaultMaxRetries {
				t.Errorf("%d attempts, want %d", got, 1+httpguard.DefaultMaxRetries)
			}
			if got := flowstate.Retries(budget).Retries; got != srv.attempts.Load()-1 {
				t.Errorf("the budget counted %d retries; %d were sent", got, srv.attempts.Load()-1)
			}
		})
	}
}

// TestATrickledResponseUnderADeadlineReturnsTheLastResponse: the same
// downstream under a 2 s deadline: each call returns its last 503 (not a
// deadline error), and the budget counts only the retries that were sent.
func TestATrickledResponseUnderADeadlineReturnsTheLastResponse(t *testing.T) {
	const calls = 4
	srv := trickling(t, 4<<10, 4*time.Millisecond)
	budget := unlimited(t)
	client := &http.Client{Transport: httpguard.Transport(realGuard(t), srv.Client().Transport,
		httpguard.WithRetry(budget, httpguard.RetryPolicy{}))}
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		var resp *http.Response
		took := within(t, 3*time.Second, srv.stop, func() { resp, err = client.Do(r) })
		cancel()
		if err != nil {
			t.Errorf("call %d, after %v: %v; want the last 503", i, took, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("call %d: status %d, want 503", i, resp.StatusCode)
		}
	}
	if sent, charged := srv.attempts.Load()-calls, flowstate.Retries(budget).Retries; charged != sent {
		t.Errorf("the budget counted %d retries; %d were sent", charged, sent)
	}
}

// TestARetryTheDeadlineCannotFitIsNotTried: a 503 whose Retry-After asks
// for a longer wait than the caller's deadline leaves is returned at once,
// as it is, and nothing is taken from the budget.
func TestARetryTheDeadlineCannotFitIsNotTried(t *testing.T) {
	var attempts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.Header().Set("Retry-After", "3")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	budget := unlimited(t)
	client := &http.Client{Transport: httpguard.Transport(realGuard(t), srv.Client().Transport,
		httpguard.WithRetry(budget, httpguard.RetryPolicy{MaxBackoff: 10 * time.Second}))}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(r)
	if err != nil {
		t.Fatalf("%v; want the 503", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || attempts.Load() != 1 {
		t.Errorf("status %d after %d attempts, want 503 after 1", resp.StatusCode, attempts.Load())
	}
	if got := flowstate.Retries(budget).Retries; got != 0 {
		t.Errorf("the budget counted %d retries, none was sent", got)
	}
}

// TestARetryNotSentIsGivenBackToTheBudget: a retry the budget allowed but
// that never reached the network, because the caller gave up in its backoff
// or the guard blocked it, is not counted by the budget.
func TestARetryNotSentIsGivenBackToTheBudget(t *testing.T) {
	t.Run("cancelled in the backoff", func(t *testing.T) {
		g, clk := newGuard(t, slidegate.Rules{})
		be := &backend{statuses: []int{http.StatusServiceUnavailable}}
		budget := unlimited(t)
		// A backoff of an hour on a clock that never moves: only ctx ends it.
		rt := httpguard.Transport(g, be, httpguard.WithRetry(budget,
			httpguard.RetryPolicy{BaseBackoff: time.Hour, MaxBackoff: time.Hour}))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := rt.RoundTrip(get(t).WithContext(ctx))
			done <- err
		}()
		for deadline := time.Now().Add(10 * time.Second); clk.Sleepers() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the retry never waited")
			}
		}
		if got := flowstate.Retries(budget).Retries; got != 1 {
			t.Fatalf("the budget counts %d retries while one waits in its backoff, want 1", got)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("%v, want context.Canceled", err)
		}
		if got := flowstate.Retries(budget).Retries; got != 0 || be.attempts.Load() != 1 {
			t.Errorf("the budget counts %d retries after %d attempts, want 0 after 1", got, be.attempts.Load())
		}
	})
	for _, tc := range []struct {
		name  string
		rules slidegate.Rules
	}{
		{"blocked by a flow rule", slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET " + backendHost, Limit: 1}}}},
		{"blocked by the breaker it opened", slidegate.Rules{Breakers: []slidegate.BreakerRule{
			{Resource: "GET " + backendHost, Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: one(1),
				OpenTimeout: slidegate.Duration(5 * time.Second)},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, clk := newGuard(t, tc.rules)
			be := &backend{statuses: []int{http.StatusServiceUnavailable}}
			budget := unlimited(t)
			rt := httpguard.Transport(g, be, httpguard.WithRetry(budget, httpguard.RetryPolicy{}))
			var block *slidegate.BlockError
			if _, err := send(t, clk, rt, get(t)); !errors.As(err, &block) {
				t.Fatalf("%v, want the retry's block", err)
			}
			if st := flowstate.Retries(budget); st.Retries != 0 || be.attempts.Load() != 1 {
				t.Errorf("the budget counts %d retries after %d attempts, want 0 after 1", st.Retries, be.attempts.Load())
			}
		})
	}
}
