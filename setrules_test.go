package slidegate

import (
	"reflect"
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
