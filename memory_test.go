package slidegate

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// heapPerResource returns the heap that making n resources with make takes,
// per resource, everything made kept reachable until it is measured.
func heapPerResource(n int, make func(n int) any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := make(n)
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// TestResourceBytesIsWhatAResourceTakes measures the memory of a resource
// in the configurations the docs state: ResourceBytes for a resource entered
// once, and at most ruleBytes more with a QPS rule and an error-ratio
// breaker (their enforcers, and the rules as the guard keeps them).
func TestResourceBytesIsWhatAResourceTakes(t *testing.T) {
	const n = 1000
	names := routeNames(n)
	bare := heapPerResource(n, func(n int) any { return enteredGuard(t, names[:n], Rules{}) })
	// The rules as given are the caller's: what the guard keeps is
	// measured, not the slice that described it.
	ruled := heapPerResource(n, func(n int) any { return ruledGuard(t, names[:n], nil, nil) })
	t.Logf("bytes per resource: %.0f entered once, %.0f with a QPS rule and an error-ratio breaker", bare, ruled)
	if bare > ResourceBytes || bare < ResourceBytes*0.85 {
		t.Errorf("a resource entered once takes %.0f bytes; ResourceBytes says %d", bare, ResourceBytes)
	}
	if ruled-bare > ruleBytes {
		t.Errorf("a QPS rule and an error-ratio breaker take %.0f bytes, over the %d the docs say", ruled-bare, ruleBytes)
	}
}

// routeNames returns n names of 17 bytes, as routes might be.
func routeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("GET /orders/%05d", i)
	}
	return names
}

// enteredGuard returns a guard of rules whose resources names are each
// entered once.
func enteredGuard(t *testing.T, names []string, rules Rules) *Guard {
	t.Helper()
	g, err := New(WithMaxResources(len(names)))
	if err != nil {
		t.Fatal(err)
	}
	setRules(t, g, rules)
	for _, name := range names {
		mustEnter(t, g, name).Exit(nil)
	}
	return g
}

// qpsAndBreaker returns a QPS rule and an error-ratio breaker of
// threshold for each of names.
func qpsAndBreaker(names []string, threshold float64) Rules {
	var r Rules
	for _, name := range names {
		r.Flow = append(r.Flow, FlowRule{Resource: name, Limit: 1 << 30})
		r.Breakers = append(r.Breakers, BreakerRule{Resource: name, Strategy: ErrorRatioBreaker, Threshold: threshold})
	}
	return r
}

// ruledGuard returns a guard of the resources names, each with a QPS rule
// and an error-ratio breaker, each entered once and exited with exit. On a
// manual clock c (nil: the system's), the requests come a second after the
// rules.
func ruledGuard(t *testing.T, names []string, c *clock.Manual, exit error) *Guard {
	t.Helper()
	opts := []Option{WithMaxResources(len(names))}
	if c != nil {
		opts = append(opts, WithClock(c))
	}
	g, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	setRules(t, g, qpsAndBreaker(names, 0.5))
	if c != nil {
		c.Advance(time.Second)
	}
	for _, name := range names {
		mustEnter(t, g, name).Exit(exit)
	}
	return g
}

// ruleBytes is what ResourceBytes's doc says a QPS rule and an error-ratio
// breaker add: the limiter's 26 count words (about 400 bytes), the
// breaker's state and what it keeps of the resource's counter, its window
// being the resource's, with what it takes away from it in 10 buckets
// (about 490), the rules as the guard keeps them, a resource and a limit,
// a strategy and a threshold (under 100: keptRules), and their bindings
// (about 200).
const ruleBytes = 1350

// TestABreakerThatTookARequestAwayTakesNoMoreMemory measures a resource
// with a QPS rule and an error-ratio breaker after one canceled request a
// second after the rules: the breaker takes it away from the resource's
// counts, which must not add to what the resource takes.
func TestABreakerThatTookARequestAwayTakesNoMoreMemory(t *testing.T) {
	const n = 1000
	names := routeNames(n)
	guard := func(n int, exit error) any {
		return ruledGuard(t, names[:n], clock.NewManual(int64(time.Hour)), exit)
	}
	succeeded := heapPerResource(n, func(n int) any { return guard(n, nil) })
	canceled := heapPerResource(n, func(n int) any { return guard(n, context.Canceled) })
	t.Logf("bytes per resource with a QPS rule and an error-ratio breaker: %.0f after a success, %.0f after a canceled request", succeeded, canceled)
	// The heap is measured to a few bytes; 64 is far below what a
	// structure made for the request would take.
	if canceled-succeeded > 64 {
		t.Errorf("after a canceled request a resource takes %.0f bytes, %.0f more than after a success", canceled, canceled-succeeded)
	}
}

// TestABreakerWhoseThresholdChangedTakesNoMoreMemory measures a resource
// with a QPS rule and an error-ratio breaker after a reload that changes
// the breaker's threshold, which the breaker takes in place: it must take
// what the same rules made afresh take, within a few words, and so stay
// within ruleBytes, the bound the docs give a QPS rule and a breaker.
func TestABreakerWhoseThresholdChangedTakesNoMoreMemory(t *testing.T) {
	const n = 1000
	names := routeNames(n)
	bare := heapPerResource(n, func(n int) any { return enteredGuard(t, names[:n], Rules{}) })
	fresh := heapPerResource(n, func(n int) any { return enteredGuard(t, names[:n], qpsAndBreaker(names[:n], 0.4)) })
	reloaded := heapPerResource(n, func(n int) any {
		g := ruledGuard(t, names[:n], nil, nil) // threshold 0.5
		setRules(t, g, qpsAndBreaker(names[:n], 0.4))
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
