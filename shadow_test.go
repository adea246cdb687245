package slidegate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"
)

// A shadow rule decides as its enforcing twin does on the same traffic:
// what the twin blocks, it counts as would-block, by the same reasons, and
// blocks nothing.
func TestShadowRulesCountWhatTheirEnforcingTwinsBlock(t *testing.T) {
	one := int64(1)
	rules := func(shadow bool) Rules {
		return Rules{
			Flow: []FlowRule{
				{Resource: "a", Limit: 5, Shadow: shadow},
				{Resource: "a", Type: ConcurrencyRule, Limit: 3, Shadow: shadow},
				{Resource: "k", Limit: 2, PerKey: true, Shadow: shadow},
			},
			Breakers: []BreakerRule{{Resource: "b", Strategy: ErrorCountBreaker, Count: 1, MinRequests: &one,
				OpenTimeout: Duration(time.Second), Shadow: shadow}},
		}
	}
	enforcing, clk := newGuard(t, rules(false))
	shadow, _ := newGuard(t, rules(true), WithClock(clk))
	for _, g := range []*Guard{enforcing, shadow} {
		now := clk.Now()
		var held []Entry
		for i := range 8 { // 3 in flight at most, 5 a second
			e, err := g.EnterAt(bg, now, "a")
			if err == nil && i%2 == 0 {
				held = append(held, e) // stays in flight
			} else if err == nil {
				e.ExitAt(now, nil)
			}
		}
		for _, e := range held {
			e.ExitAt(now, nil)
		}
		for _, key := range []string{"x", "x", "x", "y"} {
			if e, err := g.EnterAt(bg, now, "k", WithKey(key)); err == nil {
				e.ExitAt(now, nil)
			}
		}
		if e, err := g.EnterAt(bg, now, "b"); err == nil {
			e.ExitAt(now, errors.New("boom")) // opens the breaker
		}
		if e, err := g.EnterAt(bg, now, "b"); err == nil {
			e.ExitAt(now, nil)
		}
	}
	for _, name := range []string{"a", "k", "b"} {
		es, _ := enforcing.Stats(name)
		ss, _ := shadow.Stats(name)
		if es.Totals.BlockedBy != ss.Totals.WouldBlockBy {
			t.Errorf("%s: enforcing blocked %v, shadow would have blocked %v", name, es.Totals.BlockedBy, ss.Totals.WouldBlockBy)
		}
		if ss.Totals.Blocked() != 0 || es.Totals.WouldBlock() != 0 {
			t.Errorf("%s: the shadow guard blocked %d, the enforcing one would have %d", name, ss.Totals.Blocked(), es.Totals.WouldBlock())
		}
		if es.Totals.Blocked() == 0 {
			t.Errorf("%s: the enforcing guard blocked nothing: the test tests nothing", name)
		}
		if ss.Allowed != es.Allowed+es.Blocked {
			t.Errorf("%s: the shadow guard allowed %d, want every request, %d", name, ss.Allowed, es.Allowed+es.Blocked)
		}
	}
}

// A rule tried in shadow and then enforced keeps what it counted.
func TestEnforcingAShadowRuleKeepsItsCounts(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 5, Shadow: true}}})
	for range 7 {
		mustEnter(t, g, "a").Exit(nil)
	}
	if s, _ := g.Stats("a"); s.Totals.WouldBlockBy[flow.RateLimited] != 2 {
		t.Fatalf("would-block %v, want 2 rate limited", s.Totals.WouldBlockBy)
	}
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: 5}}}); err != nil {
		t.Fatal(err)
	}
	be := mustBlock(t, g, "a", "qps", flow.RateLimited) // the 5 counted in shadow hold
	clk.Advance(be.RetryAfter)
	mustEnter(t, g, "a").Exit(nil)
}

// Rules.Shadow puts every rule in shadow; a throttle in shadow makes no
// request wait.
func TestGuardWideShadowBlocksNothingAndWaitsNothing(t *testing.T) {
	g, clk := newGuard(t, Rules{Shadow: true, Flow: []FlowRule{
		{Resource: "a", Limit: 1},
		{Resource: "t", Type: ThrottleRule, Limit: 1, MaxWait: Duration(time.Hour)},
	}})
	for range 3 {
		mustEnter(t, g, "a").Exit(nil)
		e, err := g.EnterAt(bg, clk.Now(), "t") // a throttle would make the 2nd and 3rd wait a second each
		if err != nil {
			t.Fatal(err)
		}
		e.Exit(nil)
	}
	if s, _ := g.Stats("a"); s.Totals.WouldBlockBy[flow.RateLimited] != 2 || s.Totals.Blocked() != 0 {
		t.Fatalf("a: %+v, want 2 would-block, none blocked", s.Totals)
	}
	if s, _ := g.Stats("t"); s.Totals.WouldBlock() != 0 || s.Allowed != 3 {
		t.Fatalf("t: %+v, want 3 allowed and nothing would-block (a throttle's wait is no block)", s)
	}
}

func TestPerKeyRulesOfAResourceAreAllInShadowOrNone(t *testing.T) {
	err := Rules{Flow: []FlowRule{
		{Resource: "k", Limit: 2, PerKey: true, Shadow: true},
		{Resource: "k", Limit: 20, Interval: Duration(time.Minute), PerKey: true},
	}}.Validate()
	var re *RulesError
	if !errors.As(err, &re) || !hasField(re, "shadow") || !strings.Contains(err.Error(), "flow[1]") {
		t.Fatalf("mixed shadow per-key rules: %v, want a problem with flow[1]'s shadow", err)
	}
}

func TestShadowRulesAllocateNothing(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector makes sync.Pool drop entries; make test runs this test without it (make allocs)")
	}
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, Shadow: true}}})
	mustEnter(t, g, "a").Exit(nil)
	if n := testing.AllocsPerRun(1000, func() { e, _ := g.Enter(bg, "a"); e.Exit(nil) }); n != 0 {
		t.Fatalf("%v allocations per Enter+Exit through a shadow rule that would block", n)
	}
}

// A pooled entry that served a request a shadow rule would have blocked
// carries nothing of it to a request to a resource without rules.
func TestWouldBlockIsCountedOnlyWhereAShadowRuleIs(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 0, Shadow: true}}})
	for range 10 {
		mustEnter(t, g, "a").Exit(nil)
		mustEnter(t, g, "norules").Exit(nil)
	}
	if s, _ := g.Stats("norules"); s.Totals.WouldBlock() != 0 {
		t.Fatalf("a resource without rules would have had %v blocked", s.Totals.WouldBlockBy)
	}
	if s, _ := g.Stats("a"); s.Totals.WouldBlockBy[flow.ExceedsLimit] != 10 {
		t.Fatalf("a: %v, want 10 exceeding the limit (of 0)", s.Totals.WouldBlockBy)
	}
}

// A breaker in shadow makes no probe a client could see: a failed request
// through it is retried as any other.
func TestAShadowBreakersProbeIsNoProbe(t *testing.T) {
	one := int64(1)
	g, clk := newGuard(t, Rules{Breakers: []BreakerRule{{Resource: "b", Strategy: ErrorCountBreaker, Count: 1,
		MinRequests: &one, OpenTimeout: Duration(time.Second), Shadow: true}}})
	mustEnter(t, g, "b").Exit(errors.New("boom")) // opens it
	clk.Advance(time.Second)                      // half-open: the next request is its probe
	e := mustEnter(t, g, "b")
	defer e.Exit(nil)
	if e.Probe() {
		t.Fatal("a shadow breaker's probe reads as a probe")
	}
	if st := g.Breakers(); len(st) != 1 || !st[0].Shadow {
		t.Fatalf("breakers %+v, want the one marked shadow", st)
	}
}
