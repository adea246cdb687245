package breaker

import (
	"errors"
	"testing"
	"time"
)

// A circuit takes in place the thresholds of a circuit like it: the same
// kind of strategy and the same window. Anything else, or a threshold
// NewCircuit would refuse, is an error, and changes nothing.
func TestACircuitTakesOnlyThresholdsInPlace(t *testing.T) {
	c, clk := newCircuit(t, ErrorCount(5), WithMinRequests(0))
	for _, tc := range []struct {
		name string
		s    Strategy
		opts []Option
	}{
		{"another kind", ErrorRatio(0.5), nil},
		{"another window", ErrorCount(1), []Option{WithWindow(20, 0)}},
		{"a classifier", ErrorCount(1), []Option{WithOutcomeOf(func(error) Outcome { return Failure })}},
		{"a bad count", ErrorCount(0), nil},
		{"too many probes", ErrorCount(1), []Option{WithProbes(maxProbes+1, 0)}},
		{"a bad open timeout", ErrorCount(1), []Option{WithOpenTimeout(time.Second, time.Millisecond)}},
	} {
		opts := append([]Option{WithClock(clk)}, tc.opts...)
		if _, err := c.thresholdsFor(tc.s, opts...); !errors.Is(err, errInvalidConfig) {
			t.Errorf("%s: %v, want an invalid configuration", tc.name, err)
		}
	}
	th, err := c.thresholdsFor(ErrorCount(1), WithClock(clk), WithMinRequests(0))
	if err != nil {
		t.Fatal(err)
	}
	c.setThresholds(th)
	p, _ := c.Allow()
	p.settle(Failure)
	mustState(t, c, Open)
}

// A circuit that trips opens for the open timeout of the thresholds it
// judged by, even if a reload gave it others in between.
func TestATripOpensForTheTimeoutOfTheThresholdsItWasJudgedBy(t *testing.T) {
	c, clk := newCircuit(t, ErrorCount(1), WithMinRequests(0), WithOpenTimeout(time.Second, 0))
	judged := c.th.Load()
	later, err := c.thresholdsFor(ErrorCount(1), WithClock(clk), WithMinRequests(0), WithOpenTimeout(time.Minute, 0))
	if err != nil {
		t.Fatal(err)
	}
	c.setThresholds(later) // a reload between the judging and the trip
	if !c.transition(c.state.Load(), Open, clk.Now(), tripped, Stats{}, judged) {
		t.Fatal("the circuit did not open")
	}
	if got := time.Duration(c.away.Load().until.Load() - clk.Now()); got != time.Second {
		t.Errorf("open for %v, want the %v of the thresholds it was judged by", got, time.Second)
	}
}
