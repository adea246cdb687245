package slidegate

import (
	"reflect"
	"testing"
	"time"
)

// A circuit's shape is every field of its rule but those it takes in
// place, its name and its shadow, and those of an SRE breaker alone: a
// field added to BreakerRule must be put in one list or the other.
func TestACircuitsShapeCoversEveryFieldButItsThresholds(t *testing.T) {
	inPlace := map[string]bool{"Threshold": true, "Count": true, "MaxRT": true, "MinRequests": true,
		"OpenTimeout": true, "MaxOpenTimeout": true, "Probes": true, "ProbeTimeout": true,
		"Name": true, "Shadow": true, // kept by the same rule too (normal)
		"K": true, "Protection": true, "BlockPolicy": true} // an SRE breaker's, which a circuit's rule cannot set
	base := BreakerRule{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5}
	zero := reflect.ValueOf(base)
	for i := range zero.NumField() {
		name := zero.Type().Field(i).Name
		v := reflect.New(zero.Type()).Elem()
		v.Set(zero)
		setSomething(t, v.Field(i))
		r := v.Interface().(BreakerRule)
		if same := circuitShape(&r) == circuitShape(&base); same != inPlace[name] {
			t.Errorf("setting %s: shape the same %v, want %v", name, same, inPlace[name])
		}
	}
	// Defaults spelled out are the same shape.
	spelled := base
	spelled.Interval, spelled.Buckets = Duration(10*time.Second), 10
	if circuitShape(&spelled) != circuitShape(&base) {
		t.Error("the default window spelled out is another shape")
	}
}

// The matchKeys of two rules are equal if and only if their keys are:
// plain or not, whatever keyer wrote them and in whatever order.
func TestMatchKeysAreEqualWhenRuleKeysAre(t *testing.T) {
	flows := []FlowRule{
		{Resource: "a", Limit: 1}, {Resource: "a", Limit: 2}, {Resource: "b", Limit: 1},
		{Resource: "a", Limit: 1, Type: QPSRule}, {Resource: "a", Limit: 1, Interval: Duration(time.Second)},
		{Resource: "a", Limit: 1, Interval: Duration(2 * time.Second)}, {Resource: "a", Limit: 1, Name: "x"},
		{Resource: "a", Limit: 2, Buckets: 2}, {Resource: "a"}, {Resource: "a", Type: ConcurrencyRule, Limit: 1},
	}
	breakers := []BreakerRule{
		{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5}, {Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.4},
		{Resource: "b", Strategy: ErrorRatioBreaker, Threshold: 0.5}, {Resource: "a", Strategy: ErrorCountBreaker, Count: 3},
		{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, MinRequests: ptr(int64(10))},
		{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, MinRequests: ptr(int64(11))},
		{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, Shadow: true},
		{Resource: "a", Strategy: ErrorCountBreaker, Count: 4}, {Resource: "a", Strategy: SREBreaker},
	}
	var k1, k2 keyer
	for _, a := range flows {
		for _, b := range flows {
			want := ruleKey(a) == ruleKey(b)
			if got := k1.flow(&a) == k2.flow(&b); got != want {
				t.Errorf("%+v and %+v: matchKeys equal %v, rule keys %v", a, b, got, want)
			}
		}
	}
	for _, a := range breakers {
		for _, b := range breakers {
			want := ruleKey(a) == ruleKey(b)
			if got := k1.breaker(&a) == k2.breaker(&b); got != want {
				t.Errorf("%+v and %+v: matchKeys equal %v, rule keys %v", a, b, got, want)
			}
		}
	}
}
