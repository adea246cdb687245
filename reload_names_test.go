package slidegate

import (
	"testing"

	"github.com/slidegate/slidegate/breaker"
)

// A named rule whose strategy changes gets a new breaker (see
// BreakerRule), not the circuit of another named rule of the reload
// before, removed, that had the strategy it takes now: whether or not it
// takes just that rule's settings too.
func TestANamedBreakerWhoseStrategyChangesDoesNotTakeTheCircuitOfAnotherRemoved(t *testing.T) {
	for _, count := range []int64{3, 1} { // 1: y's own
		x := BreakerRule{Resource: "a", Name: "x", Strategy: ErrorRatioBreaker, Threshold: 0.5}
		y := BreakerRule{Resource: "a", Name: "y", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}
		g, _ := newGuard(t, Rules{Breakers: []BreakerRule{x, y}})
		mustEnter(t, g, "a").Exit(errBoom) // opens y; x is closed
		if s := breakerState(t, g, 1); s.State != breaker.Open {
			t.Fatalf("y is %v after a failure of count 1, want open", s.State)
		}
		x = BreakerRule{Resource: "a", Name: "x", Strategy: ErrorCountBreaker, Count: count, MinRequests: new(int64)}
		setRules(t, g, Rules{Breakers: []BreakerRule{x}})
		if s := breakerState(t, g, 0); s.State != breaker.Closed || s.Generation != 0 {
			t.Errorf("x, its strategy changed and its count %d, is %v in generation %d after the reload: the circuit of y, removed; want a new breaker", count, s.State, s.Generation)
		}
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

// A rule whose name the guard gave is given that name of its own, by
// Rules.Named, in the reload that changes its count: its name is the same
// ("a default name survives a change of the rule's limit"), and only its
// thresholds change, so its circuit stays, open.
func TestABreakerNamedByItsDefaultNameWhileItsCountChangesKeepsItsCircuit(t *testing.T) {
	rule := BreakerRule{Resource: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{rule}})
	mustEnter(t, g, "a").Exit(errBoom) // opens it
	named := g.Rules().Named()
	if named.Breakers[0].Name != "breaker" {
		t.Fatalf("the breaker's default name is %q, want %q", named.Breakers[0].Name, "breaker")
	}
	named.Breakers[0].Count = 2
	setRules(t, g, named)
	if s := breakerState(t, g, 0); s.State != breaker.Open {
		t.Errorf("the breaker, open before a reload that spelt out its name and changed its count, is %v: a new breaker", s.State)
	}
}

// The same for a QPS rule whose limit changes: it keeps its counts.
func TestAQPSRuleNamedByItsDefaultNameWhileItsLimitChangesKeepsItsCounts(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 2}}})
	mustEnter(t, g, "a").Exit(nil)
	mustEnter(t, g, "a").Exit(nil) // 2 of 2
	named := g.Rules().Named()
	if named.Flow[0].Name != "qps" {
		t.Fatalf("the rule's default name is %q, want %q", named.Flow[0].Name, "qps")
	}
	named.Flow[0].Limit = 3
	setRules(t, g, named)
	mustEnter(t, g, "a").Exit(nil) // 3 of 3
	if e, err := g.Enter(bg, "a"); err == nil {
		e.Exit(nil)
		t.Error("a fourth request in the window passed a limit of 3: the rule lost its counts in the reload that spelt out its name and changed its limit")
	}
}

// A named circuit rule whose count alone changes keeps its circuit (see
// BreakerRule), even when a new rule of another name takes the settings it
// had: a rule's name is what events and Breakers tell it by, and the
// event of this reload says that rule x changed its count and rule y is
// new.
func TestANamedBreakerWhoseThresholdChangesKeepsItsCircuitWhenANewRuleTakesItsOldSettings(t *testing.T) {
	x := BreakerRule{Resource: "a", Name: "x", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{x}})
	mustEnter(t, g, "a").Exit(errBoom) // opens x
	if s := breakerState(t, g, 0); s.State != breaker.Open {
		t.Fatalf("x is %v after a failure of count 1, want open", s.State)
	}
	y := x
	y.Name = "y"
	x.Count = 2
	setRules(t, g, Rules{Breakers: []BreakerRule{y, x}})
	for _, b := range g.Breakers() {
		want := breaker.Closed // y: new
		if b.Rule == "x" {
			want = breaker.Open // its own circuit, open until its timeout
		}
		if b.Stats.State != want {
			t.Errorf("rule %s is %v after the reload, want %v", b.Rule, b.Stats.State, want)
		}
	}
}

// Two named flow rules that swap their limits keep each its own limiter,
// taking the other's limit in place: neither takes the other's counts.
func TestNamedFlowRulesThatSwapTheirLimitsKeepEachItsOwnLimiter(t *testing.T) {
	x := FlowRule{Resource: "a", Name: "x", Limit: 5}
	y := FlowRule{Resource: "a", Name: "y", Limit: 10}
	g, _ := newGuard(t, Rules{Flow: []FlowRule{x, y}})
	was := g.snap.Load().flows
	x.Limit, y.Limit = 10, 5
	setRules(t, g, Rules{Flow: []FlowRule{x, y}})
	now := g.snap.Load().flows
	if now[0] != was[0] || now[1] != was[1] {
		t.Errorf("after the swap x holds the limiter of %s, y that of %s; want each its own", whose(was, now[0]), whose(was, now[1]))
	}
}

// whose names the rule of was, x or y, whose enforcer r is.
func whose(was []rule, r rule) string {
	switch r {
	case was[0]:
		return "x"
	case was[1]:
		return "y"
	}
	return "neither"
}
