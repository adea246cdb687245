package breaker

import (
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// Regression tests from a review of the package.

// A Circuit that trips at a negative clock reading half-opens on time.
func TestCircuitTrippedAtANegativeTimeHalfOpensOnTime(t *testing.T) {
	clk := clock.NewManual(-int64(time.Hour))
	c, err := NewCircuit(ErrorRatio(0.5), WithClock(clk), WithMinRequests(1), WithOpenTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	trip(t, c)
	if s := c.Stats(); s.RetryAfter != time.Second {
		t.Fatalf("RetryAfter = %v, want 1s", s.RetryAfter)
	}
	clk.Advance(time.Second)
	if _, err := c.Allow(); err != nil {
		t.Fatalf("at the open timeout: %v, want a probe", err)
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
	c.notify.running.Wait()
}

// A probe that outlives the probe timeout has failed even if it ends
// Ignored: it hung.
func TestCircuitTimedOutProbeFailsEvenIfIgnored(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithOpenTimeout(time.Second),
		WithProbes(1, time.Second))
	halfOpen(t, c, clk)
	p, err := c.Allow()
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	p.Ignore()
	mustState(t, c, Open)
}

// A nil Acceptable leaves the decision to WithIsSuccessful, as its doc says.
func TestNilAcceptableUsesIsSuccessful(t *testing.T) {
	a, err := NewAdaptive(WithClock(clock.NewManual(0)), WithIsSuccessful(func(error) bool { return true }))
	if err != nil {
		t.Fatal(err)
	}
	_ = a.DoWithAcceptable(func() error { return errors.New("boom") }, nil)
	if s := a.Stats(); s.Successes != 1 {
		t.Fatalf("stats = %+v, want the error accepted by WithIsSuccessful", s)
	}
}

// Misusing the zero Circuit does not panic far from the mistake: settling
// what it admits is a no-op.
func TestZeroCircuitSettlesNothing(t *testing.T) {
	var c Circuit
	if p, err := c.Allow(); err == nil {
		p.Succeed()
		p.Done(errors.New("x"))
	}
}
