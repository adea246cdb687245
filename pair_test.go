package slidegate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// A resource whose rules are a breaker and a plain QPS rule is asked by
// admitPair instead of admit's loop. These tests hold the two to the same
// decisions.

// pairRules are rule sets whose one resource, "a", admitPair asks: a
// breaker of each strategy, sharing its resource's counter or not, beside
// a QPS rule small enough to refuse, warming up or not.
func pairRules() map[string]Rules {
	two, four := int64(2), int64(4)
	open := Duration(500 * time.Millisecond)
	qps := FlowRule{Resource: "a", Limit: 3}
	warm := FlowRule{Resource: "a", Limit: 6, WarmUp: Duration(2 * time.Second)}
	return map[string]Rules{
		"shared error ratio": {Flow: []FlowRule{qps}, Breakers: []BreakerRule{
			{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, MinRequests: &two, OpenTimeout: open}}},
		"error count, a window of its own": {Flow: []FlowRule{qps}, Breakers: []BreakerRule{
			{Resource: "a", Strategy: ErrorCountBreaker, Count: 2, Interval: Duration(2 * time.Second), OpenTimeout: open, Probes: 2}}},
		"slow ratio, warming up": {Flow: []FlowRule{warm}, Breakers: []BreakerRule{
			{Resource: "a", Strategy: SlowRatioBreaker, Threshold: 0.5, MaxRT: Duration(50 * time.Millisecond), MinRequests: &four, OpenTimeout: open}}},
	}
}

func TestAPairOfABreakerAndAQPSRuleDecidesAsTheLoopDoes(t *testing.T) {
	for name, rules := range pairRules() {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(40) {
				pairDecidesAsTheLoop(t, rules, seed)
			}
		})
	}
}

// pairDecidesAsTheLoop runs random requests through two guards of the same
// rules, one asking them by admitPair and one by admit, and compares every
// decision, every probe, and the statistics after every step.
func pairDecidesAsTheLoop(t *testing.T, rules Rules, seed uint64) {
	t.Helper()
	pair, clkP := newGuard(t, rules)
	loop, clkL := newGuard(t, rules)
	if !pair.snap.Load().by["a"].checks[0].pair {
		t.Fatalf("the rules of %q are not asked as a pair", "a")
	}
	loop.snap.Load().by["a"].checks[0].pair = false

	rng := rand.New(rand.NewPCG(seed, 7))
	type open struct{ p, l Entry }
	var held []open
	for step := range 400 {
		where := fmt.Sprintf("seed %d, step %d", seed, step)
		switch op := rng.IntN(10); {
		case op < 5:
			var opts []EntryOption
			if rng.IntN(4) == 0 {
				opts = append(opts, WithCount(int64(1+rng.IntN(3))))
			}
			ep, errP := pair.Enter(bg, "a", opts...)
			el, errL := loop.Enter(bg, "a", opts...)
			if !sameBlock(errP, errL) {
				t.Fatalf("%s: admitPair returned %v, the loop %v", where, errP, errL)
			}
			if errP == nil {
				if ep.Probe() != el.Probe() {
					t.Fatalf("%s: a probe by admitPair: %v, by the loop: %v", where, ep.Probe(), el.Probe())
				}
				held = append(held, open{ep, el})
			}
		case op < 8 && len(held) > 0:
			i := rng.IntN(len(held))
			var err error
			switch rng.IntN(4) {
			case 0:
				err = errBoom
			case 1:
				err = context.Canceled
			}
			held[i].p.Exit(err)
			held[i].l.Exit(err)
			held = append(held[:i], held[i+1:]...)
		default:
			d := time.Duration(rng.IntN(300)) * time.Millisecond
			clkP.Advance(d)
			clkL.Advance(d)
		}
		sp, _ := pair.Stats("a")
		sl, _ := loop.Stats("a")
		if sp != sl {
			t.Fatalf("%s: statistics by admitPair %+v, by the loop %+v", where, sp, sl)
		}
		if bp, bl := pair.Breakers()[0].Stats, loop.Breakers()[0].Stats; bp != bl {
			t.Fatalf("%s: breaker by admitPair %+v, by the loop %+v", where, bp, bl)
		}
	}
}

// sameBlock reports whether two errors of Enter are the same refusal, or
// both nil.
func sameBlock(a, b error) bool {
	var ba, bb *BlockError
	if errors.As(a, &ba) != errors.As(b, &bb) {
		return false
	}
	if ba == nil {
		return a == nil && b == nil
	}
	return reflect.DeepEqual(*ba, *bb)
}

func TestOnlyABreakerAndAQPSRuleInForceAreAskedAsAPair(t *testing.T) {
	qps := FlowRule{Resource: "a", Limit: 3}
	br := BreakerRule{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5}
	for _, tc := range []struct {
		name  string
		rules Rules
		pair  bool
	}{
		{"a breaker and a QPS rule", Rules{Flow: []FlowRule{qps}, Breakers: []BreakerRule{br}}, true},
		{"the breaker in shadow", Rules{Flow: []FlowRule{qps}, Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, Shadow: true}}}, false},
		{"the QPS rule in shadow", Rules{Flow: []FlowRule{{Resource: "a", Limit: 3, Shadow: true}}, Breakers: []BreakerRule{br}}, false},
		{"the QPS rule borrows", Rules{Flow: []FlowRule{{Resource: "a", Limit: 3, Borrow: Duration(time.Second)}}, Breakers: []BreakerRule{br}}, false},
		{"the QPS rule per key", Rules{Flow: []FlowRule{{Resource: "a", Limit: 3, PerKey: true}}, Breakers: []BreakerRule{br}}, false},
		{"a concurrency rule", Rules{Flow: []FlowRule{{Resource: "a", Type: ConcurrencyRule, Limit: 3}}, Breakers: []BreakerRule{br}}, false},
		{"a third rule", Rules{Flow: []FlowRule{qps, {Resource: "a", Type: ConcurrencyRule, Limit: 3}}, Breakers: []BreakerRule{br}}, false},
		{"two breakers", Rules{Breakers: []BreakerRule{br, {Resource: "a", Strategy: ErrorCountBreaker, Count: 3}}}, false},
	} {
		g, _ := newGuard(t, tc.rules)
		if got := g.snap.Load().by["a"].checks[0].pair; got != tc.pair {
			t.Errorf("%s: asked as a pair %v, want %v", tc.name, got, tc.pair)
		}
	}
}
