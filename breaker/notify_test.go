package breaker

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
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
		{From: Closed, To: Open, Cause: Tripped, At: 0, Generation: 1, OpenFor: 5 * time.Second,
			Counts: Counts{Requests: 2, Successes: 1, Failures: 1, ConsecutiveFailures: 1}},
		{From: Open, To: HalfOpen, Cause: OpenTimeoutPassed, At: 5e9, Generation: 2},
		{From: HalfOpen, To: Closed, Cause: ProbesSucceeded, At: 5e9, Generation: 3},
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
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithOpenTimeout(time.Second),
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
	c.Close()
	c.notify.Running.Wait() // the listener has told what was queued
	n := len(told)
	if dropped := c.DroppedTransitions(); dropped == 0 || int64(n)+dropped > 300 {
		t.Fatalf("told %d, dropped %d of 300 changes", n, dropped)
	}
	// After Close nothing more is told, and the circuit still works.
	trip(t, c)
	c.notify.Running.Wait()
	if len(told) != n {
		t.Fatalf("a change was told after Close")
	}
}

// A listener may call Close: it does not wait for the listener.
func TestCircuitListenerMayCallClose(t *testing.T) {
	returned := make(chan struct{})
	var c *Circuit
	c, err := NewCircuit(ErrorRatio(0.5), WithClock(clock.NewManual(0)), WithMinRequests(1),
		OnStateChange(func(Transition) { c.Close(); close(returned) }))
	if err != nil {
		t.Fatal(err)
	}
	trip(t, c)
	<-returned // the test times out if Close deadlocks
	c.notify.Running.Wait()
}

// Close without a listener returns nil, every time, and the circuit goes on
// working.
func TestCircuitCloseWithoutListener(t *testing.T) {
	c, _ := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1))
	for range 2 {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	trip(t, c)
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
