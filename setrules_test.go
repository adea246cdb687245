package slidegate

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestSetRulesRefusesWhatValidateRefusesWithItsError: SetRules judges most
// rules by building their enforcers once, not twice; a set that a
// limiter's or a breaker's constructor refuses is refused with the very
// error Validate gives (every problem, fields and constructors alike), and
// the rules in force stay, with their state.
func TestSetRulesRefusesWhatValidateRefusesWithItsError(t *testing.T) {
	inForce := Rules{
		Flow:     []FlowRule{{Resource: "a", Limit: 2}, {Resource: "b", Type: ConcurrencyRule, Limit: 5}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5}},
	}
	window := func(buckets int) (Duration, int) { return Duration(time.Second), buckets }
	iv, bk := window(3) // a second does not divide into 3 buckets of whole nanoseconds
	for _, tc := range []struct {
		name  string
		rules Rules
	}{
		{"a QPS rule's window", Rules{Flow: []FlowRule{{Resource: "a", Limit: 2, Interval: iv, Buckets: bk}}}},
		{"a breaker's window", Rules{Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, Interval: iv, Buckets: bk}}}},
		{"a throttle's window, a new rule", Rules{Flow: []FlowRule{{Resource: "c", Type: ThrottleRule, Limit: 2, Interval: iv, Buckets: bk}}}},
		{"constructors and fields together", Rules{
			Flow: []FlowRule{
				{Resource: "a", Limit: 2, Interval: iv, Buckets: bk},
				{Resource: "b", Type: ConcurrencyRule, Limit: -1},
			},
			Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, Interval: iv, Buckets: bk}},
		}},
		{"the rules in force, one of them refused", Rules{
			Flow:     []FlowRule{inForce.Flow[0], inForce.Flow[1], {Resource: "d", Limit: 1, Interval: iv, Buckets: bk}},
			Breakers: inForce.Breakers,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newGuard(t, inForce)
			e, err := g.Enter(t.Context(), "a")
			if err != nil {
				t.Fatal(err)
			}
			e.Exit(nil)
			want := tc.rules.Validate()
			if want == nil {
				t.Fatal("Validate found no problem: the case tests nothing")
			}
			got := g.SetRules(tc.rules)
			if got == nil || got.Error() != want.Error() {
				t.Fatalf("SetRules:\n%v\nValidate:\n%v", got, want)
			}
			if r := g.Rules(); !reflect.DeepEqual(r, inForce) {
				t.Errorf("rules in force after a refusal: %+v, want %+v", r, inForce)
			}
			// The QPS rule in force kept its count: one of its two places.
			if _, err := g.Enter(t.Context(), "a"); err != nil {
				t.Fatalf("the second request: %v", err)
			}
			if _, err := g.Enter(t.Context(), "a"); err == nil {
				t.Error("a third request in the second was allowed: the rule in force lost its count")
			}
		})
	}
}

// TestAResourceNoRuleNamesAnyMoreCanBeEvictedAgain: a reload unpins the
// resources the rules no longer bind or read (a RefResource), so that an
// idle one makes room for a new name, and keeps pinned those still named.
func TestAResourceNoRuleNamesAnyMoreCanBeEvictedAgain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first Rules
	}{
		{"bound", Rules{Flow: []FlowRule{{Resource: "a", Limit: 5}}, Breakers: []BreakerRule{{Resource: "r", Strategy: ErrorRatioBreaker, Threshold: 0.5}}}},
		{"read", Rules{Flow: []FlowRule{{Resource: "a", Limit: 5, RefResource: "r"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, clk := newGuard(t, tc.first, WithMaxResources(2))
			if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "c", Limit: 1}}}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(statsInterval + 2*time.Second) // a and r idle
			mustEnter(t, g, "d").Exit(nil)
			if _, ok := g.Stats("d"); !ok {
				t.Fatal("d found no room: the resources no rule names any more are still pinned")
			}
			if _, ok := g.Stats("c"); !ok {
				t.Fatal("c, which a rule names, was evicted")
			}
		})
	}
}

// TestDefaultNamesAreTheNumberedNames holds the names of rules that all
// have their default names, without a number, to the general way of
// naming rules, on random sets: of few resources (names repeat, the
// general way numbers them) and many, with names of their own or not.
func TestDefaultNamesAreTheNumberedNames(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	types := []FlowType{"", QPSRule, ThrottleRule, ConcurrencyRule, ShedRule, AdaptiveRule}
	fast := 0
	for range 2000 {
		var r Rules
		resources := 1 + rnd.IntN(8)
		for range rnd.IntN(6) {
			f := FlowRule{Resource: "r" + strconv.Itoa(rnd.IntN(resources)), Type: types[rnd.IntN(len(types))], PerKey: rnd.IntN(3) == 0}
			if rnd.IntN(10) == 0 {
				f.Name = "n" + strconv.Itoa(rnd.IntN(3))
			}
			r.Flow = append(r.Flow, f)
		}
		for range rnd.IntN(3) {
			b := BreakerRule{Resource: "r" + strconv.Itoa(rnd.IntN(resources))}
			if rnd.IntN(10) == 0 {
				b.Name = "n" + strconv.Itoa(rnd.IntN(3))
			}
			r.Breakers = append(r.Breakers, b)
		}
		wantF, wantB := r.numberedNames()
		gotF, gotB, ok := r.defaultNames()
		if !ok {
			continue
		}
		fast++
		if !slices.Equal(gotF, wantF) || !slices.Equal(gotB, wantB) {
			t.Fatalf("rules %+v: default names %q %q, numbered %q %q", r, gotF, gotB, wantF, wantB)
		}
	}
	if fast < 200 {
		t.Fatalf("only %d of 2000 sets were named by default: the test tests little", fast)
	}
}

// TestRulesGivenAgainKeepTheirStateAndComeBackAsGiven: the rules in force
// given again, equal or spelt otherwise (a default written out, overrides
// empty instead of none), keep every enforcer's state, and the guard
// returns them as last given.
func TestRulesGivenAgainKeepTheirStateAndComeBackAsGiven(t *testing.T) {
	first := Rules{
		Flow:     []FlowRule{{Resource: "a", Limit: 2}, {Resource: "b", Limit: 1, PerKey: true}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5}},
	}
	spelt := Rules{
		Flow:     []FlowRule{{Resource: "a", Limit: 2, Interval: Duration(time.Second)}, {Resource: "b", Limit: 1, PerKey: true, Overrides: map[string]int64{}}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, Interval: Duration(10 * time.Second)}},
	}
	empty := first.clone()
	empty.Flow[1].Overrides = map[string]int64{}
	for _, again := range []Rules{first, first.clone(), spelt, empty} {
		g, _ := newGuard(t, first)
		mustEnter(t, g, "a").Exit(nil)
		mustEnter(t, g, "b", WithKey("k")).Exit(nil)
		if err := g.SetRules(again); err != nil {
			t.Fatal(err)
		}
		if got := g.Rules(); !reflect.DeepEqual(got, again) {
			t.Errorf("rules in force %+v, want %+v as given", got, again)
		}
		mustEnter(t, g, "a").Exit(nil)
		if _, err := g.Enter(t.Context(), "a"); err == nil {
			t.Errorf("given %+v again: a third request on a was allowed; its QPS rule lost its count", again.Flow[0])
		}
		if _, err := g.Enter(t.Context(), "b", WithKey("k")); err == nil {
			t.Errorf("given %+v again: a second request of key k was allowed; its per-key rule lost its count", again.Flow[1])
		}
	}
}

// TestManyRulesAreBuiltAsFewAre loads enough rules that their enforcers
// and resources are made on several goroutines: every rule is in force
// and enforced, and a set the build refuses names its problems in rule
// order, nothing in force lost (run it with -race).
func TestManyRulesAreBuiltAsFewAre(t *testing.T) {
	const n = 9000
	r := qpsAndBreakers(n, 0)
	for i := range r.Flow {
		r.Flow[i].Limit = 2
	}
	g, _ := newGuard(t, r, WithMaxResources(2*n))
	if got := g.Rules(); !reflect.DeepEqual(got, r) {
		t.Fatal("the rules in force are not the rules given")
	}
	for _, i := range []int{0, n / 2, n - 1} {
		name := r.Flow[i].Resource
		mustEnter(t, g, name).Exit(nil)
		mustEnter(t, g, name).Exit(nil)
		if _, err := g.Enter(t.Context(), name); err == nil {
			t.Errorf("%s: a third request was allowed by a limit of 2", name)
		}
	}
	bad := qpsAndBreakers(n, 1)
	bad.Flow[n-1].Cluster, bad.Flow[1].Cluster = true, true // no cluster to keep their counts
	err := g.SetRules(bad)
	var re *RulesError
	if !errors.As(err, &re) || len(re.Problems) != 2 || re.Problems[0].Rule != "flow[1]" || re.Problems[1].Rule != ruleAt("flow", n-1) {
		t.Fatalf("SetRules of two cluster rules without a cluster: %v", err)
	}
	if got := g.Rules(); !reflect.DeepEqual(got, r) {
		t.Fatal("a refused set changed the rules in force")
	}
}
