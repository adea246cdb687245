package breaker

import (
	"errors"
	"sync"
	"testing"
	"time"
)

func TestConsecutiveFailuresTripsOnTheNthFailureInARow(t *testing.T) {
	told := make(chan Transition, 1)
	c, _ := newCircuit(t, ConsecutiveFailures(3), OnStateChange(func(tr Transition) { told <- tr }))
	for _, o := range []Outcome{Failure, Failure, Success, Failure, Failure} {
		settle(t, c, o)
	}
	if s := c.Stats(); s.State != Closed || s.ConsecutiveFailures != 2 || s.Failures != 4 {
		t.Fatalf("stats = %+v, want closed with a run of 2 of 4 failures", s)
	}
	settle(t, c, Failure) // the third in a row; the default volume is 0, not 10
	mustState(t, c, Open)
	select {
	case tr := <-told:
		want := Stats{Requests: 6, Successes: 1, Failures: 5, ConsecutiveFailures: 3}
		if tr.From != Closed || tr.To != Open || tr.Stats != want {
			t.Fatalf("transition %+v, want tripped on %+v", tr, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the trip was never told")
	}
}

// An ignored outcome is not counted: it neither breaks a run nor adds to it.
func TestConsecutiveFailuresIgnoredOutcomesNeitherBreakNorExtendTheRun(t *testing.T) {
	c, _ := newCircuit(t, ConsecutiveFailures(3),
		WithOutcomeOf(excluding(func(err error) bool { return errors.Is(err, errExcluded) })))
	settle(t, c, Failure)
	settle(t, c, Ignored)
	p, _ := c.Allow()
	p.Done(errExcluded)
	settle(t, c, Failure)
	if s := c.Stats(); s.ConsecutiveFailures != 2 || s.Requests != 2 {
		t.Fatalf("stats = %+v, want a run of 2 in 2 requests", s)
	}
	settle(t, c, Ignored)
	mustState(t, c, Closed)
	settle(t, c, Failure)
	mustState(t, c, Open)
}

// Failures that leave the window leave the run: a run must fit in the
// window's interval.
func TestConsecutiveFailuresRunLeavesWithTheWindow(t *testing.T) {
	c, clk := newCircuit(t, ConsecutiveFailures(3), WithWindow(4, time.Second)) // buckets of 250 ms
	settle(t, c, Failure)                                                       // at 0
	clk.Set(500 * ms)
	settle(t, c, Failure)
	clk.Set(999 * ms)
	if s := c.Stats(); s.ConsecutiveFailures != 2 {
		t.Fatalf("run at 999 ms = %d, want 2", s.ConsecutiveFailures)
	}
	clk.Set(1000 * ms) // the failure at 0 has left the window, and the run
	if s := c.Stats(); s.ConsecutiveFailures != 1 || s.Failures != 1 {
		t.Fatalf("stats at 1 s = %+v, want a run of 1", s)
	}
	settle(t, c, Failure)
	mustState(t, c, Closed) // 2 in the window, though 3 in a row were counted
	settle(t, c, Failure)
	mustState(t, c, Open)
}

// A success before the window does not shorten the run within it, and a
// success within it does.
func TestConsecutiveFailuresRunStartsAfterTheLatestSuccessInTheWindow(t *testing.T) {
	c, clk := newCircuit(t, ConsecutiveFailures(10), WithWindow(4, time.Second))
	settle(t, c, Failure) // at 0: leaves at 1 s
	settle(t, c, Success) // at 0: leaves at 1 s
	clk.Set(500 * ms)
	settle(t, c, Failure)
	settle(t, c, Failure)
	clk.Set(1200 * ms)
	if s := c.Stats(); s.ConsecutiveFailures != 2 || s.Successes != 0 {
		t.Fatalf("stats = %+v, want a run of 2 after the success left", s)
	}
	settle(t, c, Success)
	settle(t, c, Failure)
	if s := c.Stats(); s.ConsecutiveFailures != 1 || s.Failures != 3 {
		t.Fatalf("stats = %+v, want a run of 1 of 3 failures", s)
	}
}

func TestConsecutiveFailuresHonoursAGivenMinimumVolume(t *testing.T) {
	c, _ := newCircuit(t, ConsecutiveFailures(2), WithMinRequests(5))
	settle(t, c, Success)
	settle(t, c, Success)
	settle(t, c, Failure)
	settle(t, c, Failure) // 2 in a row, but 4 requests
	mustState(t, c, Closed)
	settle(t, c, Failure)
	mustState(t, c, Open)
}

// Probes are not part of the run: one failed probe opens the circuit again,
// and closing starts an empty window with no run.
func TestConsecutiveFailuresProbesDecideAndClosingEndsTheRun(t *testing.T) {
	c, clk := newCircuit(t, ConsecutiveFailures(2), WithOpenTimeout(time.Second, 0))
	settle(t, c, Failure)
	settle(t, c, Failure)
	mustState(t, c, Open)
	clk.Advance(time.Second)
	settle(t, c, Failure) // a probe: one failure opens again
	mustState(t, c, Open)
	if s := c.Stats(); s.ConsecutiveFailures != 2 {
		t.Fatalf("stats = %+v: the probe counted in the run", s)
	}
	clk.Advance(2 * time.Second) // no backoff: 1 s
	settle(t, c, Success)
	mustState(t, c, Closed)
	if s := c.Stats(); s.ConsecutiveFailures != 0 || s.Requests != 0 {
		t.Fatalf("stats after closing = %+v, want an empty window", s)
	}
	settle(t, c, Failure)
	mustState(t, c, Closed)
	settle(t, c, Failure)
	mustState(t, c, Open)
}

// The condition is called on every counted failure, with counts that include
// it, and on nothing else; the circuit opens when it returns true.
func TestTripWhenIsCalledOnFailuresWithTheirCounts(t *testing.T) {
	var calls []Stats
	c, _ := newCircuit(t, TripWhen(func(n Stats) bool {
		calls = append(calls, n)
		return n.Failures >= 3 && n.Failures > n.Successes
	}))
	settle(t, c, Success)
	settle(t, c, Success)
	settle(t, c, Ignored)
	if len(calls) != 0 {
		t.Fatalf("called on a success or an ignored outcome: %+v", calls)
	}
	settle(t, c, Failure)
	settle(t, c, Failure)
	settle(t, c, Success)
	mustState(t, c, Closed)
	settle(t, c, Failure) // 3 failures, 3 successes
	mustState(t, c, Closed)
	settle(t, c, Failure) // 4 failures, 3 successes
	mustState(t, c, Open)
	want := []Stats{
		{Requests: 3, Successes: 2, Failures: 1, ConsecutiveFailures: 1},
		{Requests: 4, Successes: 2, Failures: 2, ConsecutiveFailures: 2},
		{Requests: 6, Successes: 3, Failures: 3, ConsecutiveFailures: 1},
		{Requests: 7, Successes: 3, Failures: 4, ConsecutiveFailures: 2},
	}
	if len(calls) != len(want) {
		t.Fatalf("called %d times with %+v, want %+v", len(calls), calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("call %d with %+v, want %+v", i, calls[i], want[i])
		}
	}
}

// The condition is not asked about probes: they decide by themselves.
func TestTripWhenIsNotCalledForProbes(t *testing.T) {
	calls := 0
	c, clk := newCircuit(t, TripWhen(func(Stats) bool { calls++; return true }),
		WithOpenTimeout(time.Second, 0), WithProbes(2, time.Minute))
	settle(t, c, Failure)
	mustState(t, c, Open)
	clk.Advance(time.Second)
	settle(t, c, Success)
	settle(t, c, Failure) // a probe fails: open again, without asking
	mustState(t, c, Open)
	if calls != 1 {
		t.Fatalf("condition called %d times, want once (for the trip)", calls)
	}
}

// A condition that needs more volume than the default (0) checks
// Stats.Requests itself, or is given WithMinRequests: then it is not asked
// below the volume.
func TestTripWhenIsNotAskedBelowAGivenMinimumVolume(t *testing.T) {
	calls := 0
	c, _ := newCircuit(t, TripWhen(func(Stats) bool { calls++; return true }), WithMinRequests(3))
	settle(t, c, Failure)
	settle(t, c, Failure)
	if calls != 0 {
		t.Fatalf("asked %d times below the volume", calls)
	}
	settle(t, c, Failure)
	mustState(t, c, Open)
}

// Under concurrent settling, the run counts every failure since the last
// success: with failures only, all of them; after a success, none.
func TestConsecutiveFailuresRunUnderConcurrentFailures(t *testing.T) {
	c, _ := newCircuit(t, ConsecutiveFailures(1<<40))
	const workers, per = 4, 2000
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				p, err := c.Allow()
				if err != nil {
					t.Error(err)
					return
				}
				p.settle(Failure)
			}
		}()
	}
	wg.Wait()
	if s := c.Stats(); s.ConsecutiveFailures != workers*per || s.Failures != workers*per {
		t.Fatalf("stats = %+v, want a run of all %d failures", s, workers*per)
	}
	settle(t, c, Success)
	if s := c.Stats(); s.ConsecutiveFailures != 0 {
		t.Fatalf("run after a success = %d, want 0", s.ConsecutiveFailures)
	}
}
