package breaker_test

import (
	"errors"
	"testing"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// A request an open circuit blocks matches flow.ErrBlocked, the sentinel
// every refusal matches, as well as breaker.ErrBlocked.
func TestABreakersRefusalMatchesTheOneBlockedSentinel(t *testing.T) {
	c, err := breaker.NewCircuit(breaker.ConsecutiveFailures(1), breaker.WithClock(clock.NewManual(0)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Allow()
	if err != nil {
		t.Fatal(err)
	}
	p.Done(errors.New("down"))
	_, err = c.Allow()
	if !errors.Is(err, flow.ErrBlocked) || !errors.Is(err, breaker.ErrBlocked) {
		t.Errorf("an open circuit's refusal %v: matches flow.ErrBlocked %v, breaker.ErrBlocked %v; want both",
			err, errors.Is(err, flow.ErrBlocked), errors.Is(err, breaker.ErrBlocked))
	}
}
