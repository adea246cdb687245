package breaker

import (
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/breakerhook"
)

// Telling OnStateChange listeners of a Circuit's state changes.

func TestCircuitTellsListenersInOrder(t *testing.T) {
	got := make(chan Transition, 10)
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(2),
		OnStateChange(func(tr Transition) { got <- tr }))
	settle(t, c, Success)
	settle(t, c, Failure)
	clk.Advance(5 * time.Second)
	settle(t, c, Success)
	want := []Transition{
		{From: Closed, To: Open, At: 0, Generation: 1, OpenFor: 5 * time.Second,
			Stats: Stats{Requests: 2, Successes: 1, Failures: 1, ConsecutiveFailures: 1}},
		{From: Open, To: HalfOpen, At: 5e9, Generation: 2},
		{From: HalfOpen, To: Closed, At: 5e9, Generation: 3},
	}
	for i, w := range want {
		select {
		case tr := <-got:
			if tr != w {
				t.Fatalf("transition %d = %+v, want %+v", i, tr, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("transition %d never told", i)
		}
	}
	if s := want[0].String(); s != "closed → open (tripped: 1 of 2 requests failed, 1 in a row, 0 slow, open for 5s)" {
		t.Fatalf("String() = %q", s)
	}
}

func TestCircuitSlowListenerDoesNotBlockRequests(t *testing.T) {
	release := make(chan struct{})
	told := make(chan Transition, 1000)
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithOpenTimeout(time.Second, 0),
		OnStateChange(func(tr Transition) { <-release; told <- tr }))
	// 100 cycles of closed → open → half-open → closed while the listener
	// is stuck on its first call: requests go on, and the queue keeps the
	// newest 64 changes.
	for i := 0; i < 100; i++ {
		trip(t, c)
		clk.Advance(time.Second)
		settle(t, c, Success)
	}
	close(release)
	c.notify.Running.Wait() // the listener has told what was queued
	n := len(told)
	dropped := c.notify.Dropped()
	if dropped == 0 || int64(n)+dropped != 300 {
		t.Fatalf("told %d, dropped %d of 300 changes", n, dropped)
	}
	// The last change told says how many the listener missed.
	var last Transition
	for range n {
		last = <-told
	}
	if last.Dropped != dropped {
		t.Fatalf("the last change told says %d dropped, want %d", last.Dropped, dropped)
	}
}

func TestCircuitTellsOnTransitionAtOnceWithItself(t *testing.T) {
	var c *Circuit
	var got []Transition
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(2),
		onTransition(func(from *Circuit, tr Transition) {
			if from != c {
				t.Errorf("told of %p, want the circuit %p", from, c)
			}
			got = append(got, tr) // synchronous: no lock needed
		}))
	settle(t, c, Success)
	settle(t, c, Failure)
	if len(got) != 1 || got[0].To != Open {
		t.Fatalf("after the trip, told %+v: want closed → open at once", got)
	}
	clk.Advance(5 * time.Second)
	settle(t, c, Success)
	if len(got) != 3 || got[1].To != HalfOpen || got[2].To != Closed || got[2].Generation != 3 {
		t.Fatalf("told %+v, want open → half-open → closed", got)
	}
}

// The guard reaches onTransition through internal/breakerhook, as the type
// that package documents.
func TestBreakerhookHoldsOnTransition(t *testing.T) {
	f, ok := breakerhook.OnTransition.(func(func(*Circuit, Transition)) Option)
	if !ok {
		t.Fatalf("breakerhook.OnTransition is a %T", breakerhook.OnTransition)
	}
	told := 0
	c, _ := newCircuit(t, ErrorCount(1), WithMinRequests(1), f(func(*Circuit, Transition) { told++ }))
	settle(t, c, Failure)
	if told != 1 {
		t.Fatalf("told of %d changes, want the trip", told)
	}
}

// The guard settles promises and reads a circuit's Retry-After through
// internal/breakerhook, and the comparison module seeds an SRE breaker's
// draws through it, as the types that package documents.
func TestBreakerhookHoldsTheGuardsWaysIn(t *testing.T) {
	recordAt, ok := breakerhook.RecordAt.(func(Promise, int64, Outcome))
	if !ok {
		t.Fatalf("breakerhook.RecordAt is a %T", breakerhook.RecordAt)
	}
	retryAfterAt, ok := breakerhook.RetryAfterAt.(func(*Circuit, int64) time.Duration)
	if !ok {
		t.Fatalf("breakerhook.RetryAfterAt is a %T", breakerhook.RetryAfterAt)
	}
	withRandom, ok := breakerhook.WithRandom.(func(func() float64) Option)
	if !ok {
		t.Fatalf("breakerhook.WithRandom is a %T", breakerhook.WithRandom)
	}
	c, clk := newCircuit(t, ErrorCount(1), WithMinRequests(1))
	p, err := c.AllowAt(clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	recordAt(p, clk.Now(), Failure)
	if s := c.Stats(); s.State != Open || retryAfterAt(c, clk.Now()) != 5*time.Second {
		t.Fatalf("after a failure recorded through the hook: %+v, retry after %v", s, retryAfterAt(c, clk.Now()))
	}
	if _, err := NewSRE(withRandom(nil)); !errors.Is(err, errInvalidConfig) {
		t.Fatalf("the hook's WithRandom(nil): %v, want errInvalidConfig", err)
	}
}
