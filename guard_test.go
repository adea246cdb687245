package slidegate

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/exported"
)

var bg = context.Background()

func newGuard(t *testing.T, rules Rules, opts ...Option) (*Guard, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(int64(time.Hour))
	g, err := New(append([]Option{WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	return g, clk
}

func mustEnter(t *testing.T, g *Guard, name string, opts ...EntryOption) Entry {
	t.Helper()
	e, err := g.Enter(bg, name, opts...)
	if err != nil {
		t.Fatalf("Enter(%q): %v", name, err)
	}
	return e
}

func mustBlock(t *testing.T, g *Guard, name string, rule string, reason flow.Reason, opts ...EntryOption) *BlockError {
	t.Helper()
	_, err := g.Enter(bg, name, opts...)
	var be *BlockError
	if !errors.As(err, &be) || !errors.Is(err, flow.ErrBlocked) {
		t.Fatalf("Enter(%q): %v, want a *BlockError", name, err)
	}
	if be.Resource != name || be.Rule != rule || be.Reason != reason {
		t.Fatalf("block = %+v, want resource %q, rule %s, reason %v", be, name, rule, reason)
	}
	return be
}

func stats(t *testing.T, g *Guard, name string) ResourceStats {
	t.Helper()
	s, ok := g.Stats(name)
	if !ok {
		t.Fatalf("no statistics for %q", name)
	}
	return s
}

func TestEveryResourceKeepsStatistics(t *testing.T) {
	g, clk := newGuard(t, Rules{})
	e := mustEnter(t, g, "a")
	clk.Advance(3 * time.Millisecond)
	e.Exit(nil)
	e = mustEnter(t, g, "a", WithCount(2))
	if s := stats(t, g, "a"); s.InFlight != 2 {
		t.Fatalf("in flight = %d, want 2", s.InFlight)
	}
	clk.Advance(time.Millisecond)
	e.Exit(errors.New("boom"))
	want := ResourceStats{Resource: "a", Allowed: 3, Succeeded: 1, Failed: 2, AvgRT: (3*time.Millisecond + 2*time.Millisecond) / 3,
		MaxRT: 3 * time.Millisecond, Totals: Totals{Allowed: 3, Succeeded: 1, Failed: 2, RT: 5 * time.Millisecond}}
	s := stats(t, g, "a")
	// Two response times, 3 ms and 1 ms (a batch is one): the quantiles
	// within exported.BinError.
	for _, q := range []struct {
		got  *time.Duration
		want time.Duration
	}{{&s.P50, time.Millisecond}, {&s.P90, 3 * time.Millisecond}, {&s.P99, 3 * time.Millisecond}} {
		if d := float64(*q.got - q.want); math.Abs(d) > exported.BinError*float64(q.want) {
			t.Errorf("quantile %v, want %v within %.2f%%", *q.got, q.want, exported.BinError*100)
		}
		*q.got = 0
	}
	if s != want {
		t.Fatalf("stats = %+v, want %+v", s, want)
	}
}

func TestQPSRuleBlocksAtTheLimit(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 3, Interval: Duration(time.Second), Buckets: 10}}})
	for i := 0; i < 3; i++ {
		mustEnter(t, g, "a").Exit(nil)
	}
	be := mustBlock(t, g, "a", "qps", flow.RateLimited)
	if be.RetryAfter <= 0 || be.RetryAfter > 1100*time.Millisecond { // the interval and one bucket
		t.Fatalf("RetryAfter = %v", be.RetryAfter)
	}
	if !strings.Contains(be.Error(), "a blocked by qps: rate limited, retry after") {
		t.Fatalf("Error() = %q", be.Error())
	}
	clk.Advance(be.RetryAfter)
	mustEnter(t, g, "a").Exit(nil)
	if s := stats(t, g, "a"); s.Allowed != 4 || s.Blocked != 1 {
		t.Fatalf("stats = %+v, want 4 passed, 1 blocked", s)
	}
}

func TestBatchCountsAgainstTheLimit(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 5}}})
	mustEnter(t, g, "a", WithCount(4)).Exit(nil)
	mustBlock(t, g, "a", "qps", flow.RateLimited, WithCount(2))
	mustEnter(t, g, "a").Exit(nil)
}

func TestConcurrencyRuleReleasesOnExit(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Type: ConcurrencyRule, Limit: 2}}})
	e1 := mustEnter(t, g, "a")
	e2 := mustEnter(t, g, "a")
	mustBlock(t, g, "a", "concurrency", flow.ConcurrencyLimited)
	e1.Exit(nil)
	e1.Exit(nil) // twice: harmless
	e3 := mustEnter(t, g, "a")
	mustBlock(t, g, "a", "concurrency", flow.ConcurrencyLimited)
	e2.Exit(nil)
	e3.Exit(nil)
	if s := stats(t, g, "a"); s.InFlight != 0 || s.Succeeded != 3 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestExitTwiceDoesNotEndALaterRequest(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Type: ConcurrencyRule, Limit: 1}}})
	e1 := mustEnter(t, g, "a")
	copied := e1
	e1.Exit(nil)
	e2 := mustEnter(t, g, "a") // may reuse e1's storage
	copied.Exit(nil)           // a late duplicate: must not release e2
	mustBlock(t, g, "a", "concurrency", flow.ConcurrencyLimited)
	e2.Exit(nil)
	mustEnter(t, g, "a").Exit(nil)
}

func TestExitFromAnotherGoroutine(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		e := mustEnter(t, g, "a")
		wg.Add(1)
		go func() { defer wg.Done(); e.Exit(nil) }()
	}
	wg.Wait()
	if s := stats(t, g, "a"); s.Succeeded != 100 || s.InFlight != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestBreakerRuleOpensAndTellsWhenToRetry(t *testing.T) {
	one := int64(1)
	g, clk := newGuard(t, Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorRatioBreaker,
		Threshold: 0.5, MinRequests: &one, OpenTimeout: Duration(2 * time.Second)}}})
	boom := errors.New("boom")
	if err := g.Do(bg, "db", func() error { return boom }); err != boom {
		t.Fatalf("Do returned %v, want fn's error", err)
	}
	be := mustBlock(t, g, "db", "breaker", flow.BreakerOpen)
	if be.RetryAfter != 2*time.Second {
		t.Fatalf("RetryAfter = %v, want 2s", be.RetryAfter)
	}
	clk.Advance(2 * time.Second)
	if err := g.Do(bg, "db", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "db").Exit(nil) // closed again
}

func TestARuleThatRefusesGivesBackWhatEarlierRulesTook(t *testing.T) {
	one := int64(1)
	g, clk := newGuard(t, Rules{
		Flow: []FlowRule{{Resource: "a", Type: ConcurrencyRule, Limit: 1}, {Resource: "a", Limit: 1}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: &one,
			OpenTimeout: Duration(time.Second / 2)}},
	})
	mustEnter(t, g, "a").Exit(errors.New("boom")) // trips the breaker, spends the QPS limit
	clk.Advance(time.Second / 2)                  // half-open; the QPS limit is still spent
	be := mustBlock(t, g, "a", "qps", flow.RateLimited)
	// The breaker's probe place and the concurrency place were given back:
	// once the QPS limit allows, the request is the probe, and closes the
	// breaker.
	clk.Advance(be.RetryAfter)
	mustEnter(t, g, "a", WithCount(0)).Exit(nil) // a count below 1 counts as 1
	if s := stats(t, g, "a"); s.InFlight != 0 || s.Allowed != 2 || s.Blocked != 1 {
		t.Fatalf("stats = %+v", s)
	}
	if got := g.snap.Load().breakers[0].b.Stats().State; got != breaker.Closed {
		t.Fatalf("breaker %v after its probe succeeded", got)
	}
}

// waitForSleeper returns once a goroutine sleeps on clk, failing the test if
// done reports first.
func waitForSleeper(t *testing.T, clk *clock.Manual, done <-chan error) {
	t.Helper()
	for clk.Sleepers() == 0 {
		select {
		case err := <-done:
			t.Fatalf("Enter returned without waiting: %v", err)
		default:
			time.Sleep(time.Millisecond) // until Enter sleeps on the manual clock
		}
	}
}

func TestThrottleRuleMakesEnterWait(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 10, Type: ThrottleRule,
		MaxWait: Duration(time.Second)}}})
	mustEnter(t, g, "a").Exit(nil) // the first goes at once
	done := make(chan error, 1)
	go func() {
		e, err := g.Enter(bg, "a")
		if err == nil {
			e.Exit(nil)
		}
		done <- err
	}()
	waitForSleeper(t, clk, done)
	clk.Advance(100 * time.Millisecond) // the pace: 10 per second
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Ten more take the places of the next second and wait; the eleventh's
	// place is more than MaxWait away.
	ctx, cancel := context.WithCancel(bg)
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := g.Enter(ctx, "a"); !errors.Is(err, context.Canceled) {
				t.Errorf("a waiting Enter whose context was cancelled returned %v", err)
			}
		}()
	}
	for clk.Sleepers() < 10 {
		time.Sleep(time.Millisecond)
	}
	mustBlock(t, g, "a", "throttle", flow.WaitTooLong)
	cancel()
	wg.Wait()
	if _, err := g.Enter(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter with a done context: %v", err)
	}
}

func TestRefResourceLimitsByAnotherResourcesTraffic(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "write", Limit: 3, RefResource: "read"}}})
	for i := 0; i < 2; i++ {
		mustEnter(t, g, "read").Exit(nil)
	}
	mustEnter(t, g, "write").Exit(nil)
	mustEnter(t, g, "read").Exit(nil)
	mustBlock(t, g, "write", "qps", flow.RefLimited)
}

func TestPriorityBorrowsFromTheNextBucket(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 2, Buckets: 2, Borrow: Duration(time.Second)}}})
	mustEnter(t, g, "a", WithCount(2)).Exit(nil)
	// A second later the window (3 buckets of 500 ms) still holds the two;
	// the next bucket can lend what the bucket leaving the window holds.
	clk.Advance(time.Second)
	mustBlock(t, g, "a", "qps", flow.RateLimited)
	done := make(chan error, 1)
	go func() {
		e, err := g.Enter(bg, "a", WithPriority())
		if err == nil {
			e.Exit(nil)
		}
		done <- err
	}()
	waitForSleeper(t, clk, done)
	clk.Advance(500 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDoCountsAPanicAsAnErrorAndPanicsOn(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = g.Do(bg, "a", func() error { panic("boom") })
	}()
	if s := stats(t, g, "a"); s.Failed != 1 || s.InFlight != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestInboundTrafficIsCountedForTheGuard(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	mustEnter(t, g, "a", WithInbound()).Exit(nil)
	mustEnter(t, g, "b").Exit(nil)
	if s, _ := g.Stats(InboundResource); s.Allowed != 1 || s.Succeeded != 1 {
		t.Fatalf("inbound = %+v", s)
	}
}

func TestResourceCapCountsTheRestAsOther(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "ruled", Limit: 100}}}, WithMaxResources(3))
	for _, name := range []string{"u1", "u2", "u3", "u4", "u5"} {
		mustEnter(t, g, name).Exit(nil)
	}
	if _, ok := g.Stats("u5"); ok {
		t.Fatal("a resource beyond the cap has statistics of its own")
	}
	// "ruled" takes one of the 3 places: u3, u4 and u5 have none.
	if s := stats(t, g, OtherResource); s.Allowed != 3 {
		t.Fatalf("other = %+v, want the 3 beyond the cap", s)
	}
	mustEnter(t, g, "ruled").Exit(nil) // a resource with rules always has room
	// Idle resources are evicted to make room.
	clk.Advance(statsInterval + 2*time.Second)
	mustEnter(t, g, "u6").Exit(nil)
	if _, ok := g.Stats("u6"); !ok {
		t.Fatal("no room made for a new resource after the others went idle")
	}
	if _, ok := g.Stats("ruled"); !ok {
		t.Fatal("a resource named by a rule was evicted")
	}
}

func TestReloadKeepsTheCountsOfUnchangedRules(t *testing.T) {
	rule := FlowRule{Resource: "a", Limit: 2}
	g, _ := newGuard(t, Rules{Flow: []FlowRule{rule}})
	mustEnter(t, g, "a").Exit(nil)
	mustEnter(t, g, "a").Exit(nil)
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "b", Limit: 1}, rule}}); err != nil {
		t.Fatal(err)
	}
	mustBlock(t, g, "a", "qps", flow.RateLimited) // same limiter, now the second rule
	// A rule of another shape (here a shorter interval) starts afresh.
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: 2, Interval: Duration(500 * time.Millisecond)}}}); err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "a").Exit(nil)
}

func TestReloadOfALimitKeepsTheCounts(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{
		{Resource: "a", Limit: 10},
		{Resource: "c", Type: ConcurrencyRule, Limit: 5},
	}})
	for range 5 {
		mustEnter(t, g, "a").Exit(nil)
	}
	var held []Entry
	for range 3 {
		held = append(held, mustEnter(t, g, "c"))
	}
	if err := g.SetRules(Rules{Flow: []FlowRule{
		{Resource: "a", Limit: 6},
		{Resource: "c", Type: ConcurrencyRule, Limit: 2},
	}}); err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "a").Exit(nil)
	mustBlock(t, g, "a", "qps", flow.RateLimited) // 5 + 1 of 6
	mustBlock(t, g, "c", "concurrency", flow.ConcurrencyLimited)
	held[0].Exit(nil) // entered under the old rules, released to the same limiter
	mustBlock(t, g, "c", "concurrency", flow.ConcurrencyLimited)
	held[1].Exit(nil)
	mustEnter(t, g, "c").Exit(nil)
	held[2].Exit(nil)
	if got := g.Rules().Flow[0].Limit; got != 6 {
		t.Fatalf("rules in force say %d", got)
	}

	// Raising the limit lets more in at once.
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: 8}}}); err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "a").Exit(nil)
	mustEnter(t, g, "a").Exit(nil)
	mustBlock(t, g, "a", "qps", flow.RateLimited)

	// A warming rule cannot change its limit in place: it starts afresh
	// (cold: 9/3 = 3 places).
	warm := FlowRule{Resource: "w", Limit: 9, WarmUp: Duration(10 * time.Second)}
	if err := g.SetRules(Rules{Flow: []FlowRule{warm}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	for range 3 {
		mustEnter(t, g, "w").Exit(nil)
	}
	mustBlock(t, g, "w", "qps", flow.RateLimited)
	warm.Limit = 12
	if err := g.SetRules(Rules{Flow: []FlowRule{warm}}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		mustEnter(t, g, "w").Exit(nil)
	}
	mustBlock(t, g, "w", "qps", flow.RateLimited)
}

func TestInvalidRulesKeepTheRulesInForce(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 1}}})
	err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: -1}}})
	var re *RulesError
	if !errors.As(err, &re) || len(re.Problems) != 1 {
		t.Fatalf("SetRules: %v", err)
	}
	mustEnter(t, g, "a").Exit(nil)
	mustBlock(t, g, "a", "qps", flow.RateLimited)
	if g.Rules().Flow[0].Limit != 1 {
		t.Fatal("the rules in force changed")
	}
}

func TestDefaultGuard(t *testing.T) {
	if g1, g2 := Default(), Default(); g1 != g2 {
		t.Fatal("two default guards")
	}
	before, _ := Default().Stats("default-guard-test") // the guard outlives one run of the test
	if err := Default().Do(bg, "default-guard-test", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	e, err := Default().Enter(bg, "default-guard-test")
	if err != nil {
		t.Fatal(err)
	}
	e.Exit(nil)
	if err := Default().SetRules(Rules{}); err != nil {
		t.Fatal(err)
	}
	if s, _ := Default().Stats("default-guard-test"); s.Totals.Allowed-before.Totals.Allowed != 2 {
		t.Fatalf("stats = %+v, before %+v", s, before)
	}
}

func TestLatencyQuantiles(t *testing.T) {
	g, clk := newGuard(t, Rules{})
	for i := range 100 {
		e := mustEnter(t, g, "a")
		clk.Advance(time.Duration(i+1) * time.Millisecond)
		e.Exit(nil)
	}
	s, _ := g.Stats("a")
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{{"P50", s.P50, 50 * time.Millisecond}, {"P90", s.P90, 90 * time.Millisecond}, {"P99", s.P99, 99 * time.Millisecond}, {"MaxRT", s.MaxRT, 100 * time.Millisecond}} {
		if d := float64(c.got - c.want); math.Abs(d) > exported.BinError*float64(c.want) {
			t.Errorf("%s = %v, want %v within %.2f%%", c.name, c.got, c.want, exported.BinError*100)
		}
	}
	if s.MaxRT != 100*time.Millisecond {
		t.Errorf("MaxRT = %v, want exactly 100ms", s.MaxRT)
	}
	// The 100 requests took 5.05 s; 10 s later they are gone.
	clk.Advance(10 * time.Second)
	if s, _ := g.Stats("a"); s.P99 != 0 || s.MaxRT != 0 {
		t.Errorf("10 s later: %+v", s)
	}
}

func TestTotalsCountBlocksByReason(t *testing.T) {
	one := int64(1)
	g, clk := newGuard(t, Rules{
		Flow: []FlowRule{
			{Resource: "a", Limit: 2},
			{Resource: "a", Type: ConcurrencyRule, Limit: 1},
		},
		Breakers: []BreakerRule{{Resource: "b", Strategy: ErrorCountBreaker, Count: 1, MinRequests: &one}},
	})
	e := mustEnter(t, g, "a", WithInbound())
	mustBlock(t, g, "a", "concurrency", flow.ConcurrencyLimited, WithInbound())
	e.Exit(nil)
	mustEnter(t, g, "a").Exit(nil)
	mustBlock(t, g, "a", "qps", flow.RateLimited)
	mustEnter(t, g, "b").Exit(errors.New("boom"))
	mustBlock(t, g, "b", "breaker", flow.BreakerOpen)

	// Totals outlive the window.
	clk.Advance(time.Minute)
	a, b := stats(t, g, "a"), stats(t, g, "b")
	var want [numReasons]int64
	want[flow.ConcurrencyLimited], want[flow.RateLimited] = 1, 1
	if a.Totals.Allowed != 2 || a.Totals.Succeeded != 2 || a.Totals.BlockedBy != want || a.Totals.Blocked() != 2 || a.Allowed != 0 {
		t.Errorf("a: %+v", a)
	}
	want = [numReasons]int64{}
	want[flow.BreakerOpen] = 1
	if b.Totals.Failed != 1 || b.Totals.BlockedBy != want {
		t.Errorf("b: %+v", b)
	}
	in, _ := g.Stats(InboundResource)
	want = [numReasons]int64{}
	want[flow.ConcurrencyLimited] = 1
	if in.Totals.Allowed != 1 || in.Totals.BlockedBy != want {
		t.Errorf("inbound: %+v", in)
	}
}

func TestBreakersReportTheirState(t *testing.T) {
	one := int64(1)
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{
		{Resource: "x", Strategy: SREBreaker},
		{Resource: "y", Strategy: ErrorCountBreaker, Count: 1, MinRequests: &one, OpenTimeout: Duration(3 * time.Second)},
	}})
	mustEnter(t, g, "y").Exit(errors.New("boom"))
	bs := g.Breakers()
	if len(bs) != 2 || bs[0].Resource != "x" || bs[0].Rule != "breaker" || bs[0].Strategy != SREBreaker ||
		bs[0].State != breaker.Closed {
		t.Fatalf("Breakers() = %+v", bs)
	}
	if y := bs[1]; y.Resource != "y" || y.State != breaker.Open || y.RetryAfter != 3*time.Second || y.Failures != 1 {
		t.Fatalf("breaker y: %+v", y)
	}
}

func TestEnteringOtherCountsThere(t *testing.T) {
	g, clk := newGuard(t, Rules{})
	mustEnter(t, g, OtherResource).Exit(nil)
	clk.Advance(time.Minute) // out of the window, but the totals remain
	rs := g.Resources()
	if len(rs) != 1 || rs[0].Resource != OtherResource || rs[0].Totals.Allowed != 1 {
		t.Fatalf("Resources() = %+v, want one (other) with 1 pass in its totals", rs)
	}
}

// A client asks Entry.Probe whether a failed request may be retried: a
// half-open breaker's probe must not be, and nothing else is one, even on
// an entry whose pooled storage last held a probe's promise.
func TestEntryProbeIsTrueForAHalfOpenBreakersProbeAlone(t *testing.T) {
	one := int64(1)
	g, clk := newGuard(t, Rules{
		Flow: []FlowRule{{Resource: "a", Type: ConcurrencyRule, Limit: 10}, {Resource: "c", Type: ConcurrencyRule, Limit: 10}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: &one,
			OpenTimeout: Duration(time.Second)}},
	})
	if e := mustEnter(t, g, "a"); e.Probe() {
		t.Fatal("a request through a closed breaker is a probe")
	} else {
		e.Exit(errors.New("boom")) // opens the breaker
	}
	clk.Advance(time.Second)
	probe := mustEnter(t, g, "a")
	if !probe.Probe() {
		t.Fatal("the first request after the open timeout is not a probe")
	}
	probe.Exit(nil) // closes the breaker
	if probe.Probe() {
		t.Fatal("an exited entry is still a probe")
	}
	for range 10 {
		if e := mustEnter(t, g, "c"); e.Probe() {
			t.Fatal("a request to a resource without a breaker is a probe")
		} else {
			e.Exit(nil)
		}
		if e := mustEnter(t, g, "b"); e.Probe() {
			t.Fatal("a request to a resource without rules is a probe")
		} else {
			e.Exit(nil)
		}
		if e := mustEnter(t, g, "a"); e.Probe() {
			t.Fatal("a request through a closed breaker is a probe")
		} else {
			e.Exit(nil)
		}
	}
	if (Entry{}).Probe() {
		t.Fatal("the zero Entry is a probe")
	}
}
