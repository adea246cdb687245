package slidegate

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/bounds"
)

func TestRulesWithoutNamesAreNamedAfterTheirType(t *testing.T) {
	r := Rules{
		Flow: []FlowRule{
			{Resource: "a", Limit: 1},
			{Resource: "a", Limit: 2},
			{Resource: "a", Name: "qps_2", Type: ConcurrencyRule, Limit: 3}, // takes the name the second would get
			{Resource: "a", Limit: 4},
			{Resource: "b", Limit: 5}, // another resource: names of its own
			{Resource: "a", Limit: 6, PerKey: true},
			{Resource: "a", Type: ThrottleRule, Limit: 7},
		},
		Breakers: []BreakerRule{
			{Resource: "a", Strategy: SREBreaker},
			{Resource: "a", Strategy: ErrorCountBreaker, Count: 1},
			{Resource: "b", Name: "db", Strategy: SREBreaker},
		},
	}
	got := r.Named()
	var flows, breakers []string
	for _, f := range got.Flow {
		flows = append(flows, f.Name)
	}
	for _, b := range got.Breakers {
		breakers = append(breakers, b.Name)
	}
	if want := []string{"qps", "qps_3", "qps_2", "qps_4", "qps", "qps_per_key", "throttle"}; !reflect.DeepEqual(flows, want) {
		t.Errorf("flow rules named %q, want %q", flows, want)
	}
	if want := []string{"breaker", "breaker_2", "db"}; !reflect.DeepEqual(breakers, want) {
		t.Errorf("breakers named %q, want %q", breakers, want)
	}
	if r.Flow[0].Name != "" || r.Flow[0].Type != "" {
		t.Error("Named changed the rules it was called on")
	}
	if got.Flow[0].Type != QPSRule || got.Flow[2].Type != ConcurrencyRule {
		t.Errorf("types %q and %q, want qps written out and concurrency kept", got.Flow[0].Type, got.Flow[2].Type)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the named rules are not valid: %v", err)
	}
}

func TestRuleNamesAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules Rules
		want  string // in the problem of the field name
	}{
		{"too long", Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, Name: strings.Repeat("x", bounds.MaxRuleNameLength+1)}}}, "65 bytes long; at most 64"},
		{"control character", Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, Name: "a\nb"}}}, "does not print"},
		{"not UTF-8", Rules{Breakers: []BreakerRule{{Resource: "a", Strategy: SREBreaker, Name: "a\xff"}}}, "not valid UTF-8"},
		{"space around", Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, Name: " burst"}}}, "begins or ends with a space"},
		{"twice on a resource", Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, Name: "x"}}, Breakers: []BreakerRule{{Resource: "a", Strategy: SREBreaker, Name: "x"}}},
			`"x" is the name of flow[0] too`},
	} {
		err := tc.rules.Validate()
		var re *RulesError
		if !errors.As(err, &re) || len(re.Problems) != 1 || re.Problems[0].Field != "name" || !strings.Contains(re.Problems[0].Reason, tc.want) {
			t.Errorf("%s: %v, want one problem of the field name saying %q", tc.name, err, tc.want)
		}
	}
	ok := Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, Name: "burst per user"}, {Resource: "b", Limit: 1, Name: "burst per user"}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("one name on two resources: %v", err)
	}
}

func TestABlockNamesTheRuleByItsName(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 100}, {Resource: "a", Name: "burst", Limit: 1}}})
	mustEnter(t, g, "a").Exit(nil)
	be := mustBlock(t, g, "a", "burst", flow.RateLimited)
	if !strings.Contains(be.Error(), "a blocked by burst: rate limited") {
		t.Errorf("Error() = %q", be.Error())
	}
}

func TestRenamingARuleKeepsItsCounts(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 2}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}}})
	mustEnter(t, g, "a").Exit(nil)
	mustEnter(t, g, "a").Exit(errors.New("boom")) // opens the breaker
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Name: "two a second", Limit: 2}},
		Breakers: []BreakerRule{{Resource: "a", Name: "db", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}}}); err != nil {
		t.Fatal(err)
	}
	if bs := g.Breakers(); len(bs) != 1 || bs[0].Rule != "db" || bs[0].State.String() != "open" {
		t.Fatalf("Breakers() = %+v, want the breaker named db, still open", bs)
	}
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Name: "two a second", Limit: 2}}}); err != nil {
		t.Fatal(err)
	}
	mustBlock(t, g, "a", "two a second", flow.RateLimited) // its two places were taken under its old name
}

func TestReorderingRulesOfTheSameSettingsKeepsEachItsOwnState(t *testing.T) {
	a := BreakerRule{Resource: "db", Name: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}
	b := a
	b.Name = "b"
	qa := FlowRule{Resource: "api", Name: "a", Limit: 2}
	qb := qa
	qb.Name = "b"
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{a}, Flow: []FlowRule{qa}})
	mustEnter(t, g, "db").Exit(errors.New("boom")) // a opens
	mustEnter(t, g, "api").Exit(nil)
	mustEnter(t, g, "api").Exit(nil) // a's two places taken
	if err := g.SetRules(Rules{Breakers: []BreakerRule{b, a}, Flow: []FlowRule{qb, qa}}); err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for _, s := range g.Breakers() {
		state[s.Rule] = s.State.String()
	}
	if state["a"] != "open" || state["b"] != "closed" {
		t.Errorf("after b was put before a: %v, want a still open and b closed", state)
	}
	mustBlock(t, g, "api", "a", flow.RateLimited) // b, new, allows; a has no place left
}

func TestABreakersNameFromItsResourceAloneIsItsName(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	for range 500 {
		var r Rules
		for range rng.IntN(6) {
			r.Flow = append(r.Flow, FlowRule{Resource: pick("a", "b"), Name: pick("", "", "breaker", "breaker_2", "x"), Limit: 1})
		}
		for range 1 + rng.IntN(5) {
			r.Breakers = append(r.Breakers, BreakerRule{Resource: pick("a", "b"), Name: pick("", "", "", "breaker_2", "y"), Strategy: SREBreaker})
		}
		_, want := r.names()
		for i := range r.Breakers {
			if got := r.breakerName(i); got != want[i] {
				t.Fatalf("rules %+v: breaker %d named %q alone, %q with the others", r, i, got, want[i])
			}
		}
	}
}
