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
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("GET /orders/%05d", i) // 17 bytes, as a route might be
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
	var rules Rules
	for _, name := range names {
		rules.Flow = append(rules.Flow, FlowRule{Resource: name, Limit: 1 << 30})
		rules.Breakers = append(rules.Breakers, BreakerRule{Resource: name, Strategy: ErrorRatioBreaker, Threshold: 0.5})
	}
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
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
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("GET /orders/%05d", i)
	}
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
