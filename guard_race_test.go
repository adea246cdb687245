package slidegate

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// Rules are reloaded while traffic flows: every admitted request is counted
// once, every exit once, and the limiters end with nothing in flight.
func TestReloadWhileTrafficFlows(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	sets := []Rules{
		{Flow: []FlowRule{{Resource: "a", Limit: 1 << 30}, {Resource: "a", Type: ConcurrencyRule, Limit: 1 << 20}},
			Breakers: []BreakerRule{{Resource: "a", Strategy: SREBreaker}}},
		{Flow: []FlowRule{{Resource: "a", Type: ConcurrencyRule, Limit: 1 << 20}, {Resource: "b", Limit: 5}}},
		{Flow: []FlowRule{{Resource: "a", Limit: 1 << 29}}, Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 1}}},
	}
	var admitted, failed atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	boom := errors.New("boom")
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				e, err := g.Enter(bg, "a")
				if err != nil {
					continue
				}
				admitted.Add(1)
				if i%7 == 0 {
					failed.Add(1)
					e.Exit(boom)
				} else {
					e.Exit(nil)
				}
			}
		}(w)
	}
	for i := 0; i < 300; i++ {
		if err := g.SetRules(sets[i%len(sets)]); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	s := stats(t, g, "a")
	if s.Allowed != admitted.Load() || s.Succeeded+s.Failed != s.Allowed || s.Failed != failed.Load() || s.InFlight != 0 {
		t.Fatalf("stats = %+v; admitted %d, failed %d", s, admitted.Load(), failed.Load())
	}
	for _, c := range g.snap.Load().by["a"].checks {
		if l, ok := c.rule.(*concurrencyRule); ok && l.c.InFlight("") != 0 {
			t.Fatalf("a concurrency limiter ended with %d in flight", l.c.InFlight(""))
		}
	}
}

// Enter and Exit with a QPS rule and a breaker allocate nothing, whoever
// listens to the guard's events.
func TestEnterExitDoNotAllocate(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector makes sync.Pool drop entries; make test runs this test without it (make allocs)")
	}
	g, _ := newGuard(t, Rules{
		Flow:     []FlowRule{{Resource: "a", Limit: 1 << 30}, {Resource: "a", Type: ConcurrencyRule, Limit: 1 << 20}, {Resource: "p", Limit: 1 << 30}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5}, {Resource: "a", Strategy: SREBreaker}, {Resource: "p", Strategy: ErrorRatioBreaker, Threshold: 0.5}},
	})
	defer g.OnEvent(func(Event) {})()
	mustEnter(t, g, "a").Exit(nil) // fills the pooled entry's slices
	a, b, p := g.Resource("a"), g.Resource("b"), g.Resource("p")
	for name, f := range map[string]func(){
		"rules":            func() { e, _ := g.Enter(bg, "a"); e.Exit(nil) },
		"no rules":         func() { e, _ := g.Enter(bg, "b"); e.Exit(nil) },
		"inbound":          func() { e, _ := g.Enter(bg, "a", WithInbound(), WithCount(2)); e.Exit(nil) },
		"Do":               func() { _ = g.Do(bg, "a", func() error { return nil }) },
		"handle":           func() { e, _ := a.Enter(bg); e.Exit(nil) },
		"handle, no rules": func() { e, _ := b.Enter(bg); e.Exit(nil) },
		"a pair":           func() { e, _ := g.Enter(bg, "p"); e.Exit(nil) },
		"a pair, handle":   func() { e, _ := p.Enter(bg); e.Exit(nil) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per Enter+Exit", name, n)
		}
	}
}
