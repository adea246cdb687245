package slidegate

import (
	"reflect"
	"testing"
	"time"
)

// nonZero sets the settable value v to a value that is not its zero.
func nonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(0.25)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf(int64(3)))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		nonZero(t, v.Elem())
	default:
		t.Fatalf("no value for a field of kind %v", v.Kind())
	}
}

// TestKeptRulesComeBackAsGiven keeps rules that set each field of a flow
// rule and of a breaker rule in turn, beside rules of a resource and a
// limit alone, and reads them back: every rule must come back as given.
func TestKeptRulesComeBackAsGiven(t *testing.T) {
	plainFlow := FlowRule{Resource: "a", Limit: 5}
	plainBreaker := BreakerRule{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, Count: 3}
	var given Rules
	for i := range reflect.TypeFor[FlowRule]().NumField() {
		f := plainFlow
		nonZero(t, reflect.ValueOf(&f).Elem().Field(i))
		given.Flow = append(given.Flow, plainFlow, f)
	}
	for i := range reflect.TypeFor[BreakerRule]().NumField() {
		b := plainBreaker
		nonZero(t, reflect.ValueOf(&b).Elem().Field(i))
		given.Breakers = append(given.Breakers, plainBreaker, b)
	}
	given.Shadow = true
	k := keep(given)
	if got := k.rules(); !reflect.DeepEqual(got, given) {
		t.Fatalf("kept rules read back:\n%+v\nwant\n%+v", got, given)
	}
	for i := 0; i < len(k.flow); i += 2 {
		if k.flow[i].whole != nil {
			t.Errorf("flow rule %d, %+v, a resource and a limit: kept whole", i, given.Flow[i])
		}
	}
	for i := 0; i < len(k.breakers); i += 2 {
		if k.breakers[i].whole != nil {
			t.Errorf("breaker rule %d, %+v, a resource, a strategy, a threshold and a count: kept whole", i, given.Breakers[i])
		}
	}
	for _, r := range []Rules{{}, {Flow: []FlowRule{}, Breakers: []BreakerRule{}}} {
		k := keep(r)
		if got := k.rules(); !reflect.DeepEqual(got, r) {
			t.Errorf("kept %#v read back as %#v", r, got)
		}
	}
}

// TestAGuardReturnsItsRulesAsGiven sets rules that a guard keeps in a few
// words and rules it keeps whole, and reads them back.
func TestAGuardReturnsItsRulesAsGiven(t *testing.T) {
	minimum := int64(4)
	given := Rules{
		Flow: []FlowRule{
			{Resource: "a", Limit: 10},
			{Resource: "b", Limit: 3, Interval: Duration(2 * time.Second), Name: "slow"},
			{Resource: "c", Limit: 3, PerKey: true, Overrides: map[string]int64{"vip": 30}},
		},
		Breakers: []BreakerRule{
			{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5},
			{Resource: "b", Strategy: ErrorCountBreaker, Count: 5, MinRequests: &minimum},
		},
	}
	g, _ := newGuard(t, given)
	got := g.Rules()
	if !reflect.DeepEqual(got, given) {
		t.Fatalf("Rules() = %+v, want %+v", got, given)
	}
	got.Flow[2].Overrides["vip"] = 1
	*got.Breakers[1].MinRequests = 1
	if again := g.Rules(); !reflect.DeepEqual(again, given) {
		t.Fatalf("changing what Rules returned changed the guard's: %+v", again)
	}
}
