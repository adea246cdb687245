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

// A named rule whose strategy changes to just the settings of another
// named rule removed is still the rule of its name: it gets a new breaker
// (BreakerRule: a strategy changed), not the circuit of the rule removed.
func TestANamedBreakerWhoseStrategyBecomesThatOfAnotherRemovedGetsANewBreaker(t *testing.T) {
	x := BreakerRule{Resource: "a", Name: "x", Strategy: ErrorRatioBreaker, Threshold: 0.5}
	y := BreakerRule{Resource: "a", Name: "y", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{x, y}})
	mustEnter(t, g, "a").Exit(errBoom) // opens y; x is closed
	if s := breakerState(t, g, 1); s.State != breaker.Open {
		t.Fatalf("y is %v after a failure of count 1, want open", s.State)
	}
	x = BreakerRule{Resource: "a", Name: "x", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}
	setRules(t, g, Rules{Breakers: []BreakerRule{x}})
	if s := breakerState(t, g, 0); s.State != breaker.Closed || s.Generation != 0 {
		t.Errorf("x, its strategy changed to y's, is %v in generation %d after the reload: the circuit of y, removed; want a new breaker", s.State, s.Generation)
	}
}

// Two named breakers of one resource that swap their counts each keep
// their own circuit, which takes the new count: the open one stays open.
func TestNamedBreakersThatSwapTheirCountsKeepEachItsOwnCircuit(t *testing.T) {
	x := BreakerRule{Resource: "a", Name: "x", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}
	y := BreakerRule{Resource: "a", Name: "y", Strategy: ErrorCountBreaker, Count: 3, MinRequests: new(int64)}
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{x, y}})
	mustEnter(t, g, "a").Exit(errBoom) // opens x; y is closed
	if s := breakerState(t, g, 0); s.State != breaker.Open {
		t.Fatalf("x is %v after a failure of count 1, want open", s.State)
	}
	x.Count, y.Count = 3, 1
	setRules(t, g, Rules{Breakers: []BreakerRule{x, y}})
	if s := breakerState(t, g, 0); s.State != breaker.Open {
		t.Errorf("x, open before a reload that changed only its count, is %v: it took y's circuit", s.State)
	}
	if s := breakerState(t, g, 1); s.State != breaker.Closed {
		t.Errorf("y, closed before a reload that changed only its count, is %v: it took x's circuit", s.State)
	}
}
