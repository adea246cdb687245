package slidegate

import (
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// A throttle of limit 0 has no places at all: it blocks every request at
// once, as a QPS limit of 0 does, and a reload that gives it a limit makes
// it a throttle that paces, not a QPS limit that lets a burst through.
func TestAThrottleOfLimitZeroBlocksEveryRequestAndALimitMakesItPace(t *testing.T) {
	rules := Rules{Flow: []FlowRule{{Resource: "a", Type: ThrottleRule, Limit: 0, MaxWait: Duration(time.Second)}}}
	g, clk := newGuard(t, rules)
	for range 3 {
		be := mustBlock(t, g, "a", "throttle", flow.ExceedsLimit)
		if be.RetryAfter != 0 {
			t.Fatalf("a throttle of limit 0 says retry after %v; no retry is ever allowed", be.RetryAfter)
		}
		clk.Advance(time.Second)
	}
	rules.Flow[0].Limit, rules.Flow[0].MaxWait = 10, 0 // one place every 100 ms, no wait
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "a").Exit(nil)
	// A QPS limit of 10 would allow nine more now; a throttle spaces them.
	mustBlock(t, g, "a", "throttle", flow.WaitTooLong)
	clk.Advance(100 * time.Millisecond)
	mustEnter(t, g, "a").Exit(nil)
}

// A throttle of limit 0 per key is refused: it would pace nothing, and
// overrides of 0 block keys.
func TestAPerKeyThrottleOfLimitZeroIsRefused(t *testing.T) {
	err := Rules{Flow: []FlowRule{{Resource: "a", Type: ThrottleRule, PerKey: true}}}.Validate()
	var re *RulesError
	if !errors.As(err, &re) || len(re.Problems) != 1 || re.Problems[0].Field != "limit" {
		t.Fatalf("Validate = %v, want one problem with the limit", err)
	}
}

// Every kind says what it is to the readers and exporters of rules, and a
// rule without a type is a QPS rule for them as for the guard.
func TestEveryKindIsDescribedOnce(t *testing.T) {
	want := map[FlowType]rulekind.Kind{
		QPSRule:         {Name: "qps", TopKeys: true},
		ThrottleRule:    {Name: "throttle"},
		ConcurrencyRule: {Name: "concurrency"},
		ShedRule:        {Name: "shed", Learnt: true, Sheds: true},
		AdaptiveRule:    {Name: "adaptive", Learnt: true, Baseline: true},
	}
	if len(kinds) != len(want) {
		t.Fatalf("%d kinds, want %d", len(kinds), len(want))
	}
	for typ, k := range want {
		if got := rulekind.Of(string(typ)); got != k {
			t.Errorf("rulekind.Of(%q) = %+v, want %+v", typ, got, k)
		}
		if got := kindOf(typ); got == nil || got.Kind != k {
			t.Errorf("kindOf(%q) = %+v, want %+v", typ, got, k)
		}
	}
	if got := rulekind.Of(""); got.Name != "qps" {
		t.Errorf(`rulekind.Of("") = %+v, want the QPS rule`, got)
	}
	if got := (FlowRule{}).flowType(); got != QPSRule {
		t.Errorf("the type of a rule without one is %q, want %q", got, QPSRule)
	}
	if got := rulekind.Of("leaky"); got != (rulekind.Kind{}) {
		t.Errorf(`rulekind.Of("leaky") = %+v, want no kind`, got)
	}
	// A field that applies to no kind is a field no rule can set.
	for _, x := range flowFields {
		applies := false
		for _, k := range kinds {
			for _, f := range k.fields {
				applies = applies || f == x.field
			}
		}
		if !applies {
			t.Errorf("the field %s applies to no kind", x.field)
		}
	}
	for _, k := range kinds {
		for _, f := range k.fields {
			known := false
			for _, x := range flowFields {
				known = known || x.field == f
			}
			if !known {
				t.Errorf("the %s rule lists a field %q that flowFields does not have", k.Name, f)
			}
		}
	}
}
