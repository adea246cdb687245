package slidegate

import (
	"testing"

	"github.com/slidegate/slidegate/breaker"
)

// A named rule whose strategy changes gets a new breaker (see
// BreakerRule), not the circuit of another named rule of the reload
// before, removed, that had the strategy it takes now.
func TestANamedBreakerWhoseStrategyChangesDoesNotTakeTheCircuitOfAnotherRemoved(t *testing.T) {
	x := BreakerRule{Resource: "a", Name: "x", Strategy: ErrorRatioBreaker, Threshold: 0.5}
	y := BreakerRule{Resource: "a", Name: "y", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{x, y}})
	mustEnter(t, g, "a").Exit(errBoom) // opens y; x is closed
	if s := breakerState(t, g, 1); s.State != breaker.Open {
		t.Fatalf("y is %v after a failure of count 1, want open", s.State)
	}
	x = BreakerRule{Resource: "a", Name: "x", Strategy: ErrorCountBreaker, Count: 3, MinRequests: new(int64)}
	setRules(t, g, Rules{Breakers: []BreakerRule{x}})
	if s := breakerState(t, g, 0); s.State != breaker.Closed || s.Generation != 0 {
		t.Errorf("x, its strategy changed, is %v in generation %d after the reload: the circuit of y, removed; want a new breaker", s.State, s.Generation)
	}
}
