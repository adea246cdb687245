package slidegate

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// setRules puts rules in force, or fails the test.
func setRules(t *testing.T, g *Guard, rules Rules) {
	t.Helper()
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
}

// breakerState returns the state of breaker rule i of g now.
func breakerState(t *testing.T, g *Guard, i int) breaker.Stats {
	t.Helper()
	bs := g.Breakers()
	if i >= len(bs) {
		t.Fatalf("%d breakers, want at least %d", len(bs), i+1)
	}
	return bs[i].Stats
}

// An open circuit whose rule changes only its thresholds stays open until
// the time set when it opened, as the same circuit: its new open timeout
// counts from its next opening.
func TestABreakerWhoseThresholdsChangeStaysOpenUntilItsTimeout(t *testing.T) {
	rule := BreakerRule{Resource: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64), OpenTimeout: Duration(10 * time.Second)}
	g, clk := newGuard(t, Rules{Breakers: []BreakerRule{rule}})
	mustEnter(t, g, "a").Exit(errBoom) // opens
	was := breakerState(t, g, 0)
	if was.State != breaker.Open {
		t.Fatalf("state %v after a failure of count 1, want open", was.State)
	}
	rule.Count, rule.OpenTimeout = 2, Duration(time.Second)
	setRules(t, g, Rules{Breakers: []BreakerRule{rule}})
	if s := breakerState(t, g, 0); s.State != breaker.Open || s.Generation != was.Generation || s.Blocked != was.Blocked {
		t.Fatalf("after the reload: %v, generation %d, %d blocked; want open, generation %d, %d blocked",
			s.State, s.Generation, s.Blocked, was.Generation, was.Blocked)
	}
	mustBlock(t, g, "a", "breaker", flow.BreakerOpen)
	clk.Advance(2 * time.Second) // past the new timeout, not the one it opened with
	mustBlock(t, g, "a", "breaker", flow.BreakerOpen)
	clk.Advance(8 * time.Second)
	mustEnter(t, g, "a").Exit(nil) // the probe, which closes it
	if s := breakerState(t, g, 0); s.State != breaker.Closed {
		t.Fatalf("state %v after its probe succeeded, want closed", s.State)
	}
	// The new count and open timeout from now on.
	mustEnter(t, g, "a").Exit(errBoom)
	if s := breakerState(t, g, 0); s.State != breaker.Closed {
		t.Fatalf("state %v after one failure of count 2, want closed", s.State)
	}
	mustEnter(t, g, "a").Exit(errBoom)
	if s := breakerState(t, g, 0); s.State != breaker.Open || s.RetryAfter != time.Second {
		t.Fatalf("after two failures: %v, retry after %v; want open for the new 1s", s.State, s.RetryAfter)
	}
}

// A closed circuit whose threshold changes judges the new one at its next
// failure, over the outcomes its window holds already: for a circuit that
// reads its resource's counter, one of a window of its own, and one that
// counts slow requests.
func TestAClosedBreakerJudgesItsNewThresholdWithTheCountsItHolds(t *testing.T) {
	slow := 200 * time.Millisecond
	for _, tc := range []struct {
		name        string
		rule        BreakerRule
		change      func(*BreakerRule)
		ok, bad     time.Duration // how long a success and a failure take
		good, fails int           // before the reload: closed
		last        time.Duration // how long the last failure takes, if not bad
	}{
		{"shared error ratio", BreakerRule{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5},
			func(r *BreakerRule) { r.Threshold = 0.3 }, 0, 0, 7, 3, 0},
		{"error ratio of its own window", BreakerRule{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, Buckets: 20},
			func(r *BreakerRule) { r.Threshold = 0.3 }, 0, 0, 7, 3, 0},
		{"error count", BreakerRule{Resource: "a", Strategy: ErrorCountBreaker, Count: 5},
			func(r *BreakerRule) { r.Count = 4 }, 0, 0, 7, 3, 0},
		{"consecutive failures", BreakerRule{Resource: "a", Strategy: ConsecutiveFailuresBreaker, Count: 5},
			func(r *BreakerRule) { r.Count = 4 }, 0, 0, 7, 3, 0},
		{"min requests", BreakerRule{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.2, MinRequests: ptr(int64(20))},
			func(r *BreakerRule) { r.MinRequests = ptr(int64(10)) }, 0, 0, 7, 3, 0},
		{"slow ratio", BreakerRule{Resource: "a", Strategy: SlowRatioBreaker, Threshold: 0.5, MaxRT: Duration(100 * time.Millisecond)},
			func(r *BreakerRule) { r.Threshold = 0.3 }, 0, slow, 7, 3, 0},
		// Slow under the new max RT only: 6 of 12.
		{"slow ratio's max rt", BreakerRule{Resource: "a", Strategy: SlowRatioBreaker, Threshold: 0.5, MaxRT: Duration(300 * time.Millisecond)},
			func(r *BreakerRule) { r.MaxRT = Duration(100 * time.Millisecond) }, 0, 2 * slow, 6, 5, slow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, clk := newGuard(t, Rules{Breakers: []BreakerRule{tc.rule}})
			last := false
			request := func(fail bool) {
				t.Helper()
				e := mustEnter(t, g, "a")
				if tc.rule.Strategy == SlowRatioBreaker {
					d := tc.ok
					switch {
					case fail && last && tc.last != 0:
						d = tc.last
					case fail:
						d = tc.bad
					}
					clk.Advance(d)
					e.Exit(nil)
					return
				}
				if fail {
					e.Exit(errBoom)
				} else {
					e.Exit(nil)
				}
			}
			for range tc.good {
				request(false)
			}
			for range tc.fails {
				request(true)
			}
			if s := breakerState(t, g, 0); s.State != breaker.Closed {
				t.Fatalf("state %v before the reload, want closed", s.State)
			}
			tc.change(&tc.rule)
			setRules(t, g, Rules{Breakers: []BreakerRule{tc.rule}})
			if s := breakerState(t, g, 0); s.State != breaker.Closed || s.Requests != int64(tc.good+tc.fails) {
				t.Fatalf("after the reload: %v, %d requests in its window; want closed, %d", s.State, s.Requests, tc.good+tc.fails)
			}
			last = true
			request(true)
			if s := breakerState(t, g, 0); s.State != breaker.Open {
				t.Fatalf("state %v after a failure that meets the new threshold with the counts before, want open (%+v)", s.State, s)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// probingGuard returns a guard whose one rule, an error-count breaker of
// count 1 on "a" with probes places, has opened on a failure and waited
// its open timeout: the next request is its first probe.
func probingGuard(t *testing.T, probes int) (BreakerRule, *Guard, *clock.Manual) {
	t.Helper()
	rule := BreakerRule{Resource: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64),
		OpenTimeout: Duration(time.Second), Probes: probes}
	g, clk := newGuard(t, Rules{Breakers: []BreakerRule{rule}})
	mustEnter(t, g, "a").Exit(errBoom)
	clk.Advance(time.Second)
	return rule, g, clk
}

// A half-open circuit whose thresholds change keeps its probes: the places
// of its spell, and the probes in flight, which decide as before. Its next
// spell has the new number of places.
func TestAHalfOpenBreakerKeepsItsProbesAcrossAReload(t *testing.T) {
	rule, g, clk := probingGuard(t, 2)
	p1 := mustEnter(t, g, "a") // the first probe: half-open
	rule.Count, rule.Probes = 3, 1
	setRules(t, g, Rules{Breakers: []BreakerRule{rule}})
	if s := breakerState(t, g, 0); s.State != breaker.HalfOpen || s.ProbesInFlight != 1 {
		t.Fatalf("after the reload: %v, %d probes in flight; want half-open, 1", s.State, s.ProbesInFlight)
	}
	p2 := mustEnter(t, g, "a") // the spell's second place
	mustBlock(t, g, "a", "breaker", flow.BreakerOpen)
	p1.Exit(nil)
	p2.Exit(nil)
	if s := breakerState(t, g, 0); s.State != breaker.Closed {
		t.Fatalf("state %v after both probes succeeded, want closed", s.State)
	}
	for range 3 { // the new count
		mustEnter(t, g, "a").Exit(errBoom)
	}
	clk.Advance(time.Second)
	p := mustEnter(t, g, "a")
	mustBlock(t, g, "a", "breaker", flow.BreakerOpen) // one place now
	p.Exit(nil)
	if s := breakerState(t, g, 0); s.State != breaker.Closed {
		t.Fatalf("state %v after its one probe succeeded, want closed", s.State)
	}
}

// A half-open circuit whose number of probes changes while it is open has
// the new number of places at its next spell, and a probe of the spell
// before, settled late, decides nothing.
func TestABreakerReopenedAfterAReloadProbesWithTheNewNumber(t *testing.T) {
	rule, g, clk := probingGuard(t, 3)
	var probes []Entry
	for range 3 {
		probes = append(probes, mustEnter(t, g, "a"))
	}
	probes[0].Exit(errBoom) // opens again; the other two are the spell's
	rule.Probes = 1
	setRules(t, g, Rules{Breakers: []BreakerRule{rule}})
	clk.Advance(time.Second)
	p := mustEnter(t, g, "a") // the new spell's one place
	mustBlock(t, g, "a", "breaker", flow.BreakerOpen)
	probes[2].Exit(errBoom) // the third place of the spell before: nothing
	probes[1].Exit(errBoom)
	if s := breakerState(t, g, 0); s.State != breaker.HalfOpen || s.ProbesInFlight != 1 {
		t.Fatalf("after late probes of the spell before: %v, %d in flight; want half-open, 1", s.State, s.ProbesInFlight)
	}
	p.Exit(nil)
	if s := breakerState(t, g, 0); s.State != breaker.Closed {
		t.Fatalf("state %v after its one probe succeeded, want closed", s.State)
	}
}

// A circuit that reads its resource's counter goes on reading it when its
// threshold changes: it is the same circuit, still the resource's.
func TestABreakerThatSharesItsResourcesCounterKeepsSharingAcrossAReload(t *testing.T) {
	rule := BreakerRule{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5}
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{rule}})
	before := g.snap.Load().by["a"].shared
	if before == nil || !shares(before.shared) {
		t.Fatal("an error-ratio breaker of the default window does not share its resource's counter")
	}
	rule.Threshold = 0.3
	setRules(t, g, Rules{Breakers: []BreakerRule{rule}})
	b := g.snap.Load().by["a"]
	if b.shared != before || !shares(before.shared) || b.res.shared.Load() != before {
		t.Fatalf("after the reload the resource's shared breaker is %p (sharing %v), want %p", b.shared, b.shared != nil && shares(b.shared.shared), before)
	}
	for range 7 {
		mustEnter(t, g, "a").Exit(nil)
	}
	for range 2 {
		mustEnter(t, g, "a").Exit(errBoom)
	}
	if s := breakerState(t, g, 0); s.Requests != 9 || s.Failures != 2 || s.State != breaker.Closed {
		t.Fatalf("%+v: want 9 requests, 2 failed, closed", s)
	}
	mustEnter(t, g, "a").Exit(errBoom) // 3 of 10
	if s := breakerState(t, g, 0); s.State != breaker.Open {
		t.Fatalf("state %v at 3 failures of 10, threshold 0.3, want open", s.State)
	}
}

// A reload refused for any reason leaves a circuit's thresholds as they
// were, and an invalid threshold is refused with the error Validate gives.
func TestARefusedReloadLeavesABreakersThresholdsAsTheyWere(t *testing.T) {
	rule := BreakerRule{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5}
	for _, tc := range []struct {
		name string
		with func(*Rules)
	}{
		// A cluster rule without a cluster: refused after the breakers.
		{"another rule refused", func(r *Rules) { r.Flow = []FlowRule{{Resource: "b", Limit: 1, Cluster: true}} }},
		// More probes than a circuit takes: only the build finds it.
		{"too many probes", func(r *Rules) { r.Breakers[0].Probes = 5000 }},
		{"a threshold out of range", func(r *Rules) { r.Breakers[0].Threshold = 1.5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newGuard(t, Rules{Breakers: []BreakerRule{rule}})
			for range 7 {
				mustEnter(t, g, "a").Exit(nil)
			}
			for range 3 {
				mustEnter(t, g, "a").Exit(errBoom)
			}
			changed := Rules{Breakers: []BreakerRule{rule}}
			changed.Breakers[0].Threshold = 0.3
			tc.with(&changed)
			err := g.SetRules(changed)
			if err == nil {
				t.Fatal("SetRules took rules it should refuse")
			}
			if verr := changed.Validate(); verr != nil && err.Error() != verr.Error() {
				t.Errorf("SetRules: %v\nValidate: %v", err, verr)
			}
			if got := g.Rules(); len(got.Breakers) != 1 || got.Breakers[0].Threshold != 0.5 || len(got.Flow) != 0 {
				t.Fatalf("rules in force %+v, want those before", got)
			}
			mustEnter(t, g, "a").Exit(errBoom) // 4 of 11: below 0.5, above 0.3
			if s := breakerState(t, g, 0); s.State != breaker.Closed {
				t.Fatalf("state %v at 4 failures of 11 after a refused reload, want closed: the threshold in force is 0.5", s.State)
			}
		})
	}
}

// Rules returns the new rules as given, and the event lists the change.
func TestAThresholdTakenInPlaceIsInTheRulesAndTheirEvent(t *testing.T) {
	rule := BreakerRule{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5}
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{rule}})
	rule.Threshold = 0.25
	setRules(t, g, Rules{Breakers: []BreakerRule{rule}})
	if got := g.Rules(); len(got.Breakers) != 1 || got.Breakers[0] != rule {
		t.Fatalf("rules in force %+v, want %+v", got.Breakers, rule)
	}
	evs := g.Events()
	last := evs[len(evs)-1]
	if last.Kind != rulesChanged || len(last.Changes) != 1 || last.Changes[0].Change != "changed" ||
		len(last.Changes[0].Fields) != 1 || last.Changes[0].Fields[0] != "threshold: 0.5 → 0.25" {
		t.Fatalf("last event %v, want the threshold changed", last)
	}
}

// A change of anything but thresholds makes a new circuit, as before: a
// new strategy, a new window.
func TestABreakerWhoseStrategyOrWindowChangesStartsAfresh(t *testing.T) {
	rule := BreakerRule{Resource: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}
	for _, tc := range []struct {
		name   string
		change func(*BreakerRule)
	}{
		{"strategy", func(r *BreakerRule) { r.Strategy = ConsecutiveFailuresBreaker }},
		{"buckets", func(r *BreakerRule) { r.Buckets = 20 }},
		{"interval", func(r *BreakerRule) { r.Interval = Duration(20 * time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newGuard(t, Rules{Breakers: []BreakerRule{rule}})
			mustEnter(t, g, "a").Exit(errBoom)
			r := rule
			tc.change(&r)
			setRules(t, g, Rules{Breakers: []BreakerRule{r}})
			if s := breakerState(t, g, 0); s.State != breaker.Closed || s.Generation != 0 {
				t.Fatalf("after a reload changing its %s: %v, generation %d; want a new circuit", tc.name, s.State, s.Generation)
			}
		})
	}
}

// Requests on several goroutines while thresholds change under them: the
// race detector watches, each reload keeps the circuit, and every request
// is settled.
func TestReloadingThresholdsUnderRequestsKeepsTheCircuit(t *testing.T) {
	rule := BreakerRule{Resource: "a", Strategy: ErrorRatioBreaker, Threshold: 0.5, MinRequests: ptr(int64(4)),
		OpenTimeout: Duration(time.Millisecond), Probes: 2}
	slowRule := BreakerRule{Resource: "a", Strategy: SlowRatioBreaker, Threshold: 0.5, MaxRT: Duration(time.Microsecond),
		OpenTimeout: Duration(time.Millisecond), Probes: 2}
	g, clk := newGuard(t, Rules{Breakers: []BreakerRule{rule, slowRule}})
	snap := g.snap.Load()
	circuits := []breaker.Breaker{snap.breakers[0].b, snap.breakers[1].b}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var settled atomic.Int64
	for w := range 2 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				e, err := g.Enter(bg, "a")
				if err != nil {
					continue
				}
				clk.Advance(time.Microsecond)
				if (i+w)%3 == 0 {
					e.Exit(errBoom)
				} else {
					e.Exit(nil)
				}
				settled.Add(1)
			}
		})
	}
	for i := range 200 {
		r, s := rule, slowRule
		r.Threshold, s.Threshold = 0.2+float64(i%8)/10, 0.2+float64(i%7)/10
		r.Probes, s.Probes = 1+i%3, 1+i%2
		r.OpenTimeout, s.MaxRT = Duration(time.Duration(1+i%4)*time.Millisecond), Duration(time.Duration(1+i%5)*time.Microsecond)
		setRules(t, g, Rules{Breakers: []BreakerRule{r, s}})
		clk.Advance(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	snap = g.snap.Load()
	for i, b := range snap.breakers {
		if b.b != circuits[i] {
			t.Errorf("breakers[%d] is a new circuit after reloads of its thresholds alone", i)
		}
	}
	if settled.Load() == 0 {
		t.Log("no request went through while reloading") // a busy machine: the race detector saw the reloads alone
	}
}
