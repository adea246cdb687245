package slidegate

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"

	"github.com/slidegate/slidegate/clock"
)

// What a rule leaves out takes the default its documentation names.

func TestBreakerWindowWithoutBucketsTakesTheBreakersDefault(t *testing.T) {
	// An adaptive breaker's window defaults to 40 buckets, so 1 s in
	// buckets of 25 ms; a failure at 80 ms is still in the window at
	// 1.05 s (which starts at 75 ms), and would have left one of 10
	// buckets of 100 ms (which starts at 100 ms).
	g, clk := newGuard(t, Rules{Breakers: []BreakerRule{{Resource: "a", Strategy: SREBreaker, Interval: Duration(time.Second)}}})
	clk.Advance(80 * time.Millisecond)
	mustEnter(t, g, "a").Exit(errors.New("boom"))
	clk.Advance(970 * time.Millisecond)
	if b := g.Breakers()[0]; b.Failures != 1 {
		t.Fatalf("breaker = %+v, want the failure still in a window of 40 buckets", b)
	}
}

// countingClock counts its reads.
type countingClock struct {
	*clock.Manual
	reads atomic.Int64
}

func (c *countingClock) Now() int64 { c.reads.Add(1); return c.Manual.Now() }

func TestABreakerRefusalReadsTheClockOnce(t *testing.T) {
	clk := &countingClock{Manual: clock.NewManual(int64(time.Hour))}
	g, err := New(WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	err = g.SetRules(Rules{Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64), OpenTimeout: Duration(5 * time.Second)}}})
	if err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "a").Exit(errors.New("boom"))
	clk.Advance(time.Second)
	before := clk.reads.Load()
	be := mustBlock(t, g, "a", "breaker", flow.BreakerOpen)
	if n := clk.reads.Load() - before; n != 1 {
		t.Errorf("a refused Enter read the clock %d times", n)
	}
	if be.RetryAfter != 4*time.Second {
		t.Errorf("RetryAfter = %v, want the 4 s left of the open timeout", be.RetryAfter)
	}
}

func TestAThrottleRuleWithLimitZeroRefusesEverything(t *testing.T) {
	rule := FlowRule{Resource: "a", Type: ThrottleRule, Limit: 0, MaxWait: Duration(time.Second)}
	g, clk := newGuard(t, Rules{Flow: []FlowRule{rule}})
	for range 3 {
		mustBlock(t, g, "a", "throttle", flow.ExceedsLimit) // no retry passes
		clk.Advance(time.Minute)
	}
	// Given places, it throttles (a request waits for its place).
	rule.Limit, rule.MaxWait = 1, Duration(500*time.Millisecond)
	if err := g.SetRules(Rules{Flow: []FlowRule{rule}}); err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "a").Exit(nil)
	mustBlock(t, g, "a", "throttle", flow.WaitTooLong) // its place is 1 s away
}

func TestConsecutiveFailuresRuleOpensAfterFailuresInARow(t *testing.T) {
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ConsecutiveFailuresBreaker, Count: 3}}})
	boom := errors.New("boom")
	for _, err := range []error{boom, boom, nil, boom, boom} { // a success breaks the run
		mustEnter(t, g, "db").Exit(err)
	}
	mustEnter(t, g, "db").Exit(boom) // the third in a row
	mustBlock(t, g, "db", "breaker", flow.BreakerOpen)
}

func TestNewReturnsAnErrorNamingABadOption(t *testing.T) {
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithClock(nil), "clock = nil"},
		{WithMaxResources(0), "max resources = 0"},
		{WithMaxResources(-3), "max resources = -3"},
		{WithLogger(nil), "logger = nil"},
		{WithCluster(nil), "cluster = nil"},
	} {
		g, err := New(tc.opt)
		if g != nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, %v; want an ErrInvalidConfig naming %q", g, err, tc.want)
		}
	}
	if g, err := New(nil, WithMaxResources(1)); g == nil || err != nil {
		t.Errorf("New(nil, WithMaxResources(1)) = %v, %v; a nil option is no option", g, err)
	}
}
