package slidegate

import (
	"context"

	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/breakerhook"
)

// The circuit of a breaker rule of the default window reads its resource's
// counter (breakerRule.shared). These tests hold it to what a window of its
// own counts, where the resource counts otherwise.

// breakerOf returns the state and counts of the one breaker of g.
func breakerOf(t *testing.T, g *Guard) breaker.Stats {
	t.Helper()
	bs := g.Breakers()
	if len(bs) != 1 {
		t.Fatalf("%d breakers, want 1", len(bs))
	}
	return bs[0].Stats
}

// sharedGuard returns a guard, on a manual clock at the start of a second,
// whose one breaker rule, on "db", shares the resource's counter. The
// clock is a second on, past the bucket in which the breaker began: the
// breaker counts that one itself, and reads the resource's after it.
func sharedGuard(t *testing.T, b BreakerRule) (*Guard, *clock.Manual) {
	t.Helper()
	b.Resource = "db"
	g, clk := newGuard(t, Rules{Breakers: []BreakerRule{b}})
	if g.snap.Load().breakers[0].shared == nil {
		t.Fatalf("the breaker of %+v has a window of its own", b)
	}
	clk.Advance(time.Second)
	return g, clk
}

func TestASharedBreakerCountsOnlyFromWhenItLastClosed(t *testing.T) {
	four := int64(4)
	g, clk := sharedGuard(t, BreakerRule{Strategy: ErrorRatioBreaker, Threshold: 0.5, MinRequests: &four, OpenTimeout: Duration(time.Second)})
	clk.Advance(100 * time.Millisecond) // into the bucket, so that the probe closes it in the middle of one
	for range 4 {
		mustEnter(t, g, "db").Exit(errBoom)
	}
	if s := breakerOf(t, g); s.State != breaker.Open {
		t.Fatalf("after 4 failures: %v, want open", s.State)
	}
	clk.Advance(time.Second)
	mustEnter(t, g, "db").Exit(nil) // the probe, in the bucket that closes
	if s := breakerOf(t, g); s.State != breaker.Closed || s.Requests != 0 {
		t.Fatalf("just closed: %v with %d requests, want closed with none: neither the failures nor the probe count", s.State, s.Requests)
	}
	// The four failures are still in the resource's last 10 seconds: counted,
	// one more failure among three successes would make 5 of 8.
	for i := range 4 {
		clk.Advance(200 * time.Millisecond) // across the closing's bucket and the next
		var err error
		if i == 0 {
			err = errBoom
		}
		mustEnter(t, g, "db").Exit(err)
	}
	s := breakerOf(t, g)
	if s.State != breaker.Closed || s.Requests != 4 || s.Failures != 1 {
		t.Fatalf("since closing: %+v, want closed with 1 failure in 4 requests", s)
	}
	if r, _ := g.Stats("db"); r.Failed != 5 || r.Succeeded != 4 {
		t.Fatalf("the resource counted %d failed and %d succeeded, want 5 and 4", r.Failed, r.Succeeded)
	}
}

func TestASharedBreakerIgnoresCanceledRequests(t *testing.T) {
	one := int64(1)
	g, _ := sharedGuard(t, BreakerRule{Strategy: ErrorCountBreaker, Count: 2, MinRequests: &one})
	mustEnter(t, g, "db").Exit(context.Canceled)
	mustEnter(t, g, "db").Exit(fmt.Errorf("reading the reply: %w", context.Canceled))
	mustEnter(t, g, "db").Exit(errBoom)
	if s := breakerOf(t, g); s.State != breaker.Closed || s.Failures != 1 || s.Requests != 1 {
		t.Fatalf("after two canceled requests and a failure: %+v, want closed with the 1 failure", s)
	}
	if r, _ := g.Stats("db"); r.Failed != 3 {
		t.Fatalf("the resource counted %d failed, want 3: a canceled request is a failure to it", r.Failed)
	}
}

func TestASharedBreakerDropsOutcomesOfRequestsAllowedInAnEarlierState(t *testing.T) {
	one := int64(1)
	g, clk := sharedGuard(t, BreakerRule{Strategy: ErrorCountBreaker, Count: 2, MinRequests: &one, OpenTimeout: Duration(time.Second)})
	early := []Entry{mustEnter(t, g, "db"), mustEnter(t, g, "db")} // allowed while closed, before it opens
	mustEnter(t, g, "db").Exit(errBoom)
	mustEnter(t, g, "db").Exit(errBoom)
	if s := breakerOf(t, g); s.State != breaker.Open {
		t.Fatalf("after 2 failures: %v, want open", s.State)
	}
	clk.Advance(time.Second)
	mustEnter(t, g, "db").Exit(nil) // the probe
	clk.Advance(1500 * time.Millisecond)
	for _, e := range early {
		e.Exit(errBoom) // ends after the circuit closed again: not its generation's
	}
	if s := breakerOf(t, g); s.State != breaker.Closed || s.Requests != 0 {
		t.Fatalf("after requests of an earlier closed state failed: %+v, want closed, with nothing counted", s)
	}
	mustEnter(t, g, "db").Exit(errBoom)
	if s := breakerOf(t, g); s.State != breaker.Closed || s.Failures != 1 {
		t.Fatalf("after one failure of its own: %+v, want closed with 1 failure", s)
	}
}

func TestASharedBreakerCountsABatchOnceWhereItWasServed(t *testing.T) {
	one := int64(1)
	g, clk := sharedGuard(t, BreakerRule{Strategy: ErrorCountBreaker, Count: 2, MinRequests: &one})
	mustEnter(t, g, "db", WithCount(3)).Exit(errBoom)
	if s := breakerOf(t, g); s.State != breaker.Closed || s.Failures != 1 {
		t.Fatalf("after a failed batch of 3: %+v, want closed with 1 failure", s)
	}
	// A request served in one bucket that waits on its client past the
	// window's end: the circuit counted it where it was served.
	clk.Advance(2 * time.Second)
	e := mustEnter(t, g, "db")
	e.Pause()
	clk.Advance(9500 * time.Millisecond)
	e.Exit(nil)
	clk.Advance(700 * time.Millisecond) // the serving's bucket has left the window, the exit's has not
	if s := breakerOf(t, g); s.Requests != 0 {
		t.Fatalf("after the served bucket left the window: %+v, want nothing counted", s)
	}
	if r, _ := g.Stats("db"); r.Succeeded != 1 {
		t.Fatalf("the resource counted %d succeeded in its window, want 1 where it exited", r.Succeeded)
	}
}

func TestASharedBreakerIgnoresRequestsAllowedBeforeItsRule(t *testing.T) {
	one := int64(1)
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "db", Limit: 100}}})
	before := []Entry{mustEnter(t, g, "db"), mustEnter(t, g, "db")}
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "db", Limit: 100}},
		Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorCountBreaker, Count: 2, MinRequests: &one}}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1500 * time.Millisecond)
	for _, e := range before {
		e.Exit(errBoom)
	}
	if s := breakerOf(t, g); s.State != breaker.Closed || s.Requests != 0 {
		t.Fatalf("after requests allowed before the breaker failed: %+v, want closed with nothing counted", s)
	}
}

func TestOnlyABreakerOfTheResourcesWindowSharesIt(t *testing.T) {
	for _, tc := range []struct {
		rule  BreakerRule
		share bool
	}{
		{BreakerRule{Strategy: ErrorRatioBreaker, Threshold: 0.5}, true},
		{BreakerRule{Strategy: ErrorCountBreaker, Count: 3, Interval: Duration(10 * time.Second), Buckets: 10}, true},
		{BreakerRule{Strategy: ConsecutiveFailuresBreaker, Count: 3}, true},
		{BreakerRule{Strategy: ErrorRatioBreaker, Threshold: 0.5, Interval: Duration(2 * time.Second)}, false},
		{BreakerRule{Strategy: ErrorRatioBreaker, Threshold: 0.5, Buckets: 20}, false},
		{BreakerRule{Strategy: SlowRatioBreaker, Threshold: 0.5, MaxRT: Duration(time.Second)}, false},
		{BreakerRule{Strategy: SREBreaker}, false},
	} {
		if got := sharesWindow(tc.rule); got != tc.share {
			t.Errorf("sharesWindow(%+v) = %v, want %v", tc.rule, got, tc.share)
		}
	}
	// A window of its own: failures 3 s old have left a 2 s window, not
	// the resource's 10 s.
	one := int64(1)
	g, clk := newGuard(t, Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorCountBreaker, Count: 2,
		MinRequests: &one, Interval: Duration(2 * time.Second)}}})
	mustEnter(t, g, "db").Exit(errBoom)
	clk.Advance(3 * time.Second)
	mustEnter(t, g, "db").Exit(errBoom)
	if s := breakerOf(t, g); s.State != breaker.Closed || s.Failures != 1 {
		t.Fatalf("a 2 s breaker after failures 3 s apart: %+v, want closed with 1 failure", s)
	}
	// A slow-call ratio keeps timing requests in a window of its own.
	g, clk = newGuard(t, Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: SlowRatioBreaker, Threshold: 0.5,
		MaxRT: Duration(time.Second), MinRequests: &one}}})
	e := mustEnter(t, g, "db")
	clk.Advance(2 * time.Second)
	e.Exit(nil)
	if s := breakerOf(t, g); s.State != breaker.Open || s.Slow != 1 {
		t.Fatalf("a slow-call breaker after a slow request: %+v, want open with 1 slow", s)
	}
}

func TestOneBreakerOfAResourceSharesItsCounter(t *testing.T) {
	one := int64(1)
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{
		{Resource: "db", Name: "first", Strategy: ErrorCountBreaker, Count: 2, MinRequests: &one},
		{Resource: "db", Name: "second", Strategy: ErrorCountBreaker, Count: 3, MinRequests: &one},
	}})
	bs := g.snap.Load().breakers
	if (bs[0].shared == nil) == (bs[1].shared == nil) {
		t.Fatalf("shared: %v and %v, want exactly one", bs[0].shared != nil, bs[1].shared != nil)
	}
	mustEnter(t, g, "db").Exit(context.Canceled)
	mustEnter(t, g, "db").Exit(errBoom)
	for _, s := range g.Breakers() {
		if s.State != breaker.Closed || s.Failures != 1 || s.Requests != 1 {
			t.Fatalf("breaker %s: %+v, want closed with the 1 failure", s.Rule, s.Stats)
		}
	}
}

func TestARuleSetReloadedKeepsItsSharedBreakersCounts(t *testing.T) {
	one := int64(1)
	rules := Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorCountBreaker, Count: 3, MinRequests: &one}}}
	g, _ := newGuard(t, rules)
	mustEnter(t, g, "db").Exit(errBoom)
	held := mustEnter(t, g, "db")
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	held.Exit(errBoom) // allowed by the same circuit, taken over
	if s := breakerOf(t, g); s.Failures != 2 {
		t.Fatalf("after a reload: %+v, want the 2 failures", s)
	}
	// Rules without the breaker: the resource tells it nothing more.
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "db", Limit: 10}}}); err != nil {
		t.Fatal(err)
	}
	if r := g.snap.Load().by["db"].res; r.shared.Load() != nil {
		t.Fatalf("the resource still tells a breaker no longer in force")
	}
	mustEnter(t, g, "db").Exit(errBoom)
}

// TestASharedBreakerCountsWhatAWindowOfItsOwnWould runs random requests
// through a guard whose breaker shares its resource's counter, and the same
// requests through a circuit of the same settings with a window of its own,
// settled as the guard settles its promises: after each step, the two must
// agree on their state and every count.
func TestASharedBreakerCountsWhatAWindowOfItsOwnWould(t *testing.T) {
	three := int64(3)
	for _, rule := range []BreakerRule{
		{Strategy: ErrorRatioBreaker, Threshold: 0.5, MinRequests: &three, OpenTimeout: Duration(time.Second)},
		{Strategy: ErrorCountBreaker, Count: 3, MinRequests: &three, OpenTimeout: Duration(2 * time.Second), Probes: 2},
		{Strategy: ConsecutiveFailuresBreaker, Count: 2, OpenTimeout: Duration(time.Second)},
	} {
		for seed := range uint64(30) {
			t.Run(fmt.Sprintf("%s/%d", rule.Strategy, seed), func(t *testing.T) {
				sharedAgreesWithItsOwnWindow(t, rule, seed)
			})
		}
	}
}

func sharedAgreesWithItsOwnWindow(t *testing.T, rule BreakerRule, seed uint64) {
	t.Cleanup(func() { exitCounted = nil })
	rule.Resource = "db"
	clk := clock.NewManual(int64(time.Hour) + int64(seed)*int64(37*time.Millisecond))
	g, err := New(WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(Rules{Breakers: []BreakerRule{rule}}); err != nil {
		t.Fatal(err)
	}
	if g.snap.Load().breakers[0].shared == nil {
		t.Fatal("the breaker does not share")
	}
	// The same settings, with a window of its own, read as the shared one
	// reads the resource's counter: every bucket, no cache.
	n := rule.normal()
	opts := []breaker.Option{breaker.WithClock(clk), breakerhook.Uncached.(func() breaker.Option)(),
		breaker.WithMinRequests(*n.MinRequests), breaker.WithOpenTimeout(time.Duration(n.OpenTimeout), 0),
		breaker.WithProbes(n.Probes, 0)}
	s := breaker.ConsecutiveFailures(rule.Count)
	switch rule.Strategy {
	case ErrorRatioBreaker:
		s = breaker.ErrorRatio(rule.Threshold)
	case ErrorCountBreaker:
		s = breaker.ErrorCount(rule.Count)
	}
	ref, err := breaker.NewCircuit(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	type request struct {
		e      Entry
		p      breaker.Promise
		start  int64
		paused int64
		n      int64
	}
	var held []request
	r := rand.New(rand.NewPCG(seed, 29))
	for step := range 400 {
		now := clk.Now()
		var what string
		switch k := r.IntN(10); {
		case k < 4:
			n := int64(1)
			if r.IntN(4) == 0 {
				n = 1 + int64(r.IntN(3))
			}
			e, gerr := g.Enter(bg, "db", WithCount(n))
			p, rerr := ref.AllowAt(now)
			what = fmt.Sprintf("enter %d: guard %v, own %v", n, gerr, rerr)
			if (gerr == nil) != (rerr == nil) {
				t.Fatalf("step %d: %s", step, what)
			}
			if gerr == nil {
				held = append(held, request{e: e, p: p, start: now, n: n})
			}
		case k < 8 && len(held) > 0:
			i := r.IntN(len(held))
			q := held[i]
			held = append(held[:i], held[i+1:]...)
			var err error
			o := breaker.Success
			switch r.IntN(5) {
			case 0, 1:
				err, o = errBoom, breaker.Failure
			case 2:
				err, o = context.Canceled, breaker.Ignored
			}
			served := q.start + max(now-q.start-q.paused, 0)
			if (served-int64(time.Hour))/int64(time.Second) != (now-int64(time.Hour))/int64(time.Second) {
				// Served in an earlier bucket: the shared circuit checks
				// its strategy as of the exit, a window of its own as of
				// served (see breaker's shared.go). Ignored by both, the
				// request still tells what the resource counted.
				err, o = context.Canceled, breaker.Ignored
			}
			var gap breaker.Stats
			exitCounted = func() { gap = breakerOf(t, g) }
			q.e.Exit(err)
			exitCounted = nil
			recordAt(q.p, served, o)
			what = fmt.Sprintf("exit of %d started %v ago, paused %v: %v", q.n, time.Duration(now-q.start), time.Duration(q.paused), err)
			// Read within Exit, the shared circuit counts no more than
			// its own window holds once the request is settled.
			if own := ref.StatsAt(now); own.State == breaker.Closed && gap.State == breaker.Closed &&
				(gap.Failures > own.Failures || gap.Successes > own.Successes || gap.Failures < 0 || gap.Successes < 0) {
				t.Fatalf("step %d, within %s:\nshared %+v\nown    %+v after", step, what, gap, own)
			}
		case k < 9 && len(held) > 0:
			i := r.IntN(len(held))
			d := time.Duration(r.Int64N(int64(3 * time.Second)))
			held[i].e.Pause()
			clk.Advance(d)
			held[i].e.Resume()
			held[i].paused += int64(d)
			what = fmt.Sprintf("pause of %v", d)
		default:
			d := time.Duration(r.Int64N(int64(1500 * time.Millisecond)))
			clk.Advance(d)
			what = fmt.Sprintf("advance %v", d)
		}
		now = clk.Now()
		got, want := breakerOf(t, g), ref.StatsAt(now)
		if got != want {
			t.Fatalf("step %d, after %s:\nshared %+v\nown    %+v", step, what, got, want)
		}
	}
}

func TestASharedBreakerAllocatesNothingPerRequest(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector makes sync.Pool drop entries; make test runs this test without it (make allocs)")
	}
	g, clk := sharedGuard(t, BreakerRule{Strategy: ErrorRatioBreaker, Threshold: 0.9})
	i := 0
	f := func() {
		// Every kind of exit: counted where the resource counts it, a
		// failure read against the strategy, and what the breaker takes
		// away (a canceled request, a batch, a pause across a bucket).
		i++
		e, err := g.Enter(bg, "db", WithCount(int64(1+i%2)))
		if err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			e.Pause()
			clk.Advance(time.Second)
			e.Resume()
		}
		switch i % 3 {
		case 0:
			e.Exit(nil)
		case 1:
			e.Exit(errBoom)
		default:
			e.Exit(context.Canceled)
		}
	}
	f() // makes the counter of what the breaker takes away, once
	if n := testing.AllocsPerRun(1000, f); n != 0 {
		t.Errorf("%v allocations per Enter+Exit", n)
	}
}

// inExitGap runs read in every Exit of the test between the resource's
// counting of the request and the breakers' settling of it.
func inExitGap(t *testing.T, read func()) {
	t.Helper()
	exitCounted = read
	t.Cleanup(func() { exitCounted = nil })
}

func TestASharedBreakerNeverReadsACanceledBatchAsFailures(t *testing.T) {
	g, _ := sharedGuard(t, BreakerRule{Strategy: ErrorCountBreaker, Count: 1000})
	var seen []breaker.Stats
	inExitGap(t, func() { seen = append(seen, breakerOf(t, g)) })
	mustEnter(t, g, "db", WithCount(1000)).Exit(context.Canceled)
	mustEnter(t, g, "db", WithCount(1000)).Exit(errBoom) // counted once
	mustEnter(t, g, "db").Exit(errBoom)
	want := []int64{0, 1, 2} // after each Exit, what the breaker's own window holds
	for i, s := range seen {
		if s.Failures > want[i] || s.Failures < 0 || s.Successes < 0 || s.State != breaker.Closed {
			t.Errorf("within Exit %d the breaker read %+v: more than the %d failures it counts", i+1, s, want[i])
		}
	}
	if s := breakerOf(t, g); s.Failures != 2 || s.State != breaker.Closed {
		t.Errorf("after the Exits: %+v, want 2 failures, closed", s)
	}
}

func TestASharedBreakerNeverReadsABatchOfAnEarlierStateAsFailures(t *testing.T) {
	g, clk := sharedGuard(t, BreakerRule{Strategy: ErrorCountBreaker, Count: 3})
	old := mustEnter(t, g, "db", WithCount(1000)) // allowed while closed
	for i := 0; breakerOf(t, g).State != breaker.Open; i++ {
		if i == 10 {
			t.Fatalf("after %d failures: %+v, want open", i, breakerOf(t, g))
		}
		mustEnter(t, g, "db").Exit(errBoom)
	}
	clk.Advance(time.Minute) // past the open timeout: a probe closes it
	mustEnter(t, g, "db").Exit(nil)
	if s := breakerOf(t, g); s.State != breaker.Closed {
		t.Fatalf("after the probe's success: %+v, want closed", s)
	}
	clk.Advance(time.Second) // the closing's bucket is the breaker's own
	var seen []breaker.Stats
	inExitGap(t, func() { seen = append(seen, breakerOf(t, g)) })
	old.Exit(errBoom) // of the earlier state: not counted
	for _, s := range seen {
		if s.Failures != 0 || s.State != breaker.Closed {
			t.Errorf("within the Exit of a request of an earlier state the breaker read %+v", s)
		}
	}
}
