package slidegate

import (
	"fmt"
	"testing"
)

// TestABreakerWhoseThresholdChangedTakesNoMoreMemory measures a resource
// with a QPS rule and an error-ratio breaker after a reload that changes
// the breaker's threshold, which the breaker takes in place: it must take
// what the same rules made afresh take, within a few words, and so stay
// within ruleBytes, the bound the docs give a QPS rule and a breaker.
func TestABreakerWhoseThresholdChangedTakesNoMoreMemory(t *testing.T) {
	const n = 1000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("GET /orders/%05d", i)
	}
	rules := func(threshold float64) Rules {
		var r Rules
		for _, name := range names {
			r.Flow = append(r.Flow, FlowRule{Resource: name, Limit: 1 << 30})
			r.Breakers = append(r.Breakers, BreakerRule{Resource: name, Strategy: ErrorRatioBreaker, Threshold: threshold})
		}
		return r
	}
	bare := heapPerResource(n, func(n int) any {
		g, err := New(WithMaxResources(n))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names[:n] {
			mustEnter(t, g, name).Exit(nil)
		}
		return g
	})
	fresh := heapPerResource(n, func(n int) any {
		g, err := New(WithMaxResources(n))
		if err != nil {
			t.Fatal(err)
		}
		setRules(t, g, rules(0.4))
		for _, name := range names[:n] {
			mustEnter(t, g, name).Exit(nil)
		}
		return g
	})
	reloaded := heapPerResource(n, func(n int) any {
		g := ruledGuard(t, names[:n], nil, nil) // threshold 0.5
		setRules(t, g, rules(0.4))
		return g
	})
	t.Logf("bytes per resource over one entered once: %.0f with the rules made afresh, %.0f after the threshold changed in place", fresh-bare, reloaded-bare)
	// The heap is measured to a few bytes; 64 is below what a structure
	// kept for each breaker would take.
	if reloaded-fresh > 64 {
		t.Errorf("after its threshold changed a resource takes %.0f bytes more than with the same rules made afresh", reloaded-fresh)
	}
	if reloaded-bare > ruleBytes {
		t.Errorf("after its threshold changed a QPS rule and an error-ratio breaker take %.0f bytes, over the %d the docs say", reloaded-bare, ruleBytes)
	}
}
