package slidegate

import (
	"reflect"
	"testing"
)

// setSomething sets field v to a value other than its zero value.
func setSomething(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Map:
		v.Set(reflect.ValueOf(map[string]int64{"k": 1}))
	default:
		t.Fatalf("a field of kind %v: teach the rule keys to write it", v.Kind())
	}
}

// TestRuleKeysCoverEveryField: a rule with any one field changed has
// another key, so that no reload takes it for the rule it was; a field
// added to a rule fails here until its key writes it.
func TestRuleKeysCoverEveryField(t *testing.T) {
	flowKey := func(f FlowRule) string { return string(f.appendKey(nil, false)) }
	breakerKey := func(b BreakerRule) string { return string(b.appendKey(nil)) }
	for _, tc := range []struct {
		rule any
		key  func(v reflect.Value) string
	}{
		{FlowRule{}, func(v reflect.Value) string { return flowKey(v.Interface().(FlowRule)) }},
		{BreakerRule{}, func(v reflect.Value) string { return breakerKey(v.Interface().(BreakerRule)) }},
	} {
		zero := reflect.New(reflect.TypeOf(tc.rule)).Elem()
		base := tc.key(zero)
		seen := map[string]string{base: "none"}
		for i := range zero.NumField() {
			v := reflect.New(zero.Type()).Elem()
			setSomething(t, v.Field(i))
			k := tc.key(v)
			name := zero.Type().Field(i).Name
			if other, ok := seen[k]; ok {
				t.Errorf("%s: setting %s gives the key of setting %s", zero.Type(), name, other)
			}
			seen[k] = name
		}
	}
	// Exact keys write overrides whole: the keys of cluster groups.
	a := FlowRule{Overrides: map[string]int64{"a": 1, "b": 2}}
	b := FlowRule{Overrides: map[string]int64{"b": 2, "a": 1}}
	c := FlowRule{Overrides: map[string]int64{"a": 2, "b": 1}}
	if string(a.appendKey(nil, true)) != string(b.appendKey(nil, true)) || string(a.appendKey(nil, true)) == string(c.appendKey(nil, true)) {
		t.Fatal("exact keys of overrides depend on their order, or miss their values")
	}
	if flowKey(a) != flowKey(b) || flowKey(a) == flowKey(c) {
		t.Fatal("the keys of overrides depend on their order, or miss their values")
	}
}

// TestRulesOfOneKeyButOtherOverridesAreToldApart: two rules whose keys
// are equal (the hash of their overrides equal, forced here by comparing
// their keys without overrides) are still different rules when their
// overrides differ.
func TestRulesOfOneKeyButOtherOverridesAreToldApart(t *testing.T) {
	if sameOverrides(map[string]int64{"a": 1}, map[string]int64{"a": 2}) || !sameOverrides(nil, map[string]int64{}) {
		t.Fatal("sameOverrides")
	}
	rule := FlowRule{Resource: "api", Type: ConcurrencyRule, Limit: 1, PerKey: true, Overrides: map[string]int64{"a": 1}}
	before, after := Rules{Flow: []FlowRule{rule}}, Rules{Flow: []FlowRule{rule}}
	after.Flow[0].Overrides = map[string]int64{"a": 2}
	ruleOnly := func(f FlowRule) string { f.Overrides = nil; return ruleKey(f) }
	r := takeOnce([]string{ruleOnly(before.Flow[0])}, []int{0}, []string{""})
	_, ok := r.takeAll([]string{ruleOnly(after.Flow[0])}, []string{""}, func(i, j int) bool {
		return sameOverrides(after.Flow[i].Overrides, before.Flow[j].Overrides)
	})
	if ok[0] {
		t.Fatal("a rule of other overrides took over an enforcer by its key alone")
	}
	if ch := ruleChanges(before, after); len(ch) != 1 || ch[0].Change != "changed" {
		t.Fatalf("changes %+v", ch)
	}
}
