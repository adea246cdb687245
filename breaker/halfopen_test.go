package breaker

import (
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// The half-open state: at most n probes, only probes decide, timeouts.

// halfOpen trips c and lets its open timeout pass, without taking a probe.
func halfOpen(t *testing.T, c *Circuit, clk *clock.Manual) {
	t.Helper()
	trip(t, c)
	clk.Advance(c.Stats().RetryAfter)
}

func TestCircuitAllowsAtMostNProbesAndNeedsNSuccesses(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithProbes(3, time.Minute))
	halfOpen(t, c, clk)
	var probes []Promise
	for i := 0; i < 3; i++ {
		p, err := c.Allow()
		if err != nil {
			t.Fatalf("probe %d blocked: %v", i, err)
		}
		probes = append(probes, p)
	}
	if _, err := c.Allow(); !errors.Is(err, errProbesBusy) || !errors.Is(err, ErrBlocked) {
		t.Fatalf("fourth request: %v, want errProbesBusy (an ErrBlocked)", err)
	}
	if s := c.Stats(); s.ProbesInFlight != 3 || s.BlockRatio != 1 {
		t.Fatalf("stats = %+v, want 3 probes in flight, block ratio 1", s)
	}
	probes[0].settle(Success)
	probes[1].settle(Success)
	mustState(t, c, HalfOpen)
	// A success gives its place back: one more probe may start.
	p, err := c.Allow()
	if err != nil {
		t.Fatalf("probe after a success: %v", err)
	}
	probes[2].settle(Success)
	mustState(t, c, Closed)
	p.settle(Failure) // its generation has passed: ignored
	mustState(t, c, Closed)
	if s := c.Stats(); s.Requests != 0 {
		t.Fatalf("a closed circuit starts with an empty window; stats = %+v", s)
	}
}

func TestCircuitOneFailedProbeReopens(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithProbes(2, time.Minute))
	halfOpen(t, c, clk)
	p1, _ := c.Allow()
	p2, _ := c.Allow()
	p1.settle(Success)
	p2.settle(Failure)
	mustState(t, c, Open)
	if g := c.Stats().Generation; g != 3 { // closed → open → half-open → open
		t.Fatalf("generation = %d, want 3", g)
	}
}

func TestCircuitIgnoredProbeGivesItsPlaceBack(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1),
		WithOutcomeOf(excluding(func(err error) bool { return errors.Is(err, errExcluded) })))
	halfOpen(t, c, clk)
	p, _ := c.Allow()
	p.Done(errExcluded)
	mustState(t, c, HalfOpen)
	p, err := c.Allow()
	if err != nil {
		t.Fatalf("place not given back: %v", err)
	}
	p.settle(Ignored)
	mustState(t, c, HalfOpen)
	settle(t, c, Success)
	mustState(t, c, Closed)
}

var errExcluded = errors.New("excluded")

func TestCircuitProbeTimesOutExactlyAtTheTimeout(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithProbes(1, 2*time.Second))
	halfOpen(t, c, clk)
	hung, _ := c.Allow()
	started := clk.Now()
	clk.Set(started + 2*int64(time.Second) - 1)
	if _, err := c.Allow(); !errors.Is(err, errProbesBusy) {
		t.Fatalf("1 ns before the probe timeout: %v, want errProbesBusy", err)
	}
	clk.Set(started + 2*int64(time.Second))
	if _, err := c.Allow(); !errors.Is(err, ErrBlocked) || errors.Is(err, errProbesBusy) {
		t.Fatalf("at the probe timeout: %v, want ErrBlocked (the probe failed)", err)
	}
	mustState(t, c, Open)
	gen := c.Stats().Generation
	hung.settle(Success) // a result from an earlier generation: ignored
	if c.Stats().Generation != gen || c.current() != Open {
		t.Fatalf("a late probe changed the circuit: %v, generation %d → %d", c.current(), gen, c.Stats().Generation)
	}
}

func TestCircuitLateProbeResultCountsAsFailure(t *testing.T) {
	// Nobody else asked while the probe hung; its own late success fails it.
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithProbes(1, time.Second))
	halfOpen(t, c, clk)
	p, _ := c.Allow()
	clk.Advance(time.Second)
	p.recordAt(clk.Now(), Success)
	mustState(t, c, Open)

	c, clk = newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithProbes(1, time.Second))
	halfOpen(t, c, clk)
	p, _ = c.Allow()
	clk.Advance(time.Second - 1)
	p.recordAt(clk.Now(), Success)
	mustState(t, c, Closed)
}

// A probe that outlives the probe timeout has failed even if it ends
// Ignored: it hung.
func TestCircuitTimedOutProbeFailsEvenIfIgnored(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithOpenTimeout(time.Second, 0),
		WithProbes(1, time.Second))
	halfOpen(t, c, clk)
	p, err := c.Allow()
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	p.settle(Ignored)
	mustState(t, c, Open)
}

func TestCircuitSlowProbeFails(t *testing.T) {
	c, clk := newCircuit(t, SlowRatio(100*time.Millisecond, 0.5), WithMinRequests(1))
	p, _ := c.Allow()
	clk.Advance(101 * time.Millisecond)
	p.settle(Success)
	mustState(t, c, Open)
	clk.Advance(c.Stats().RetryAfter)
	p, _ = c.Allow()
	clk.Advance(101 * time.Millisecond)
	p.settle(Success)
	mustState(t, c, Open)
	clk.Advance(c.Stats().RetryAfter)
	p, _ = c.Allow()
	clk.Advance(100 * time.Millisecond)
	p.settle(Failure)
	mustState(t, c, Closed)
}

func TestCircuitProbeSettledTwiceCountsOnce(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithProbes(2, time.Minute))
	halfOpen(t, c, clk)
	p, _ := c.Allow()
	p.settle(Success)
	p.settle(Success) // a second settlement of the same probe: ignored
	mustState(t, c, HalfOpen)
	settle(t, c, Success)
	mustState(t, c, Closed)
}
