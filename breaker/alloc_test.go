package breaker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// Allowing and settling a request, and blocking one, allocate nothing.
func TestBreakersDoNotAllocate(t *testing.T) {
	clk := clock.NewManual(int64(time.Hour))
	sre, _ := NewSRE(WithClock(clk))
	failing, _ := NewSRE(WithClock(clk), WithRandom(func() float64 { return 0.5 }))
	for i := 0; i < 100; i++ {
		p, _ := failing.Allow()
		p.Fail() // a block ratio of 0.94: half the requests are allowed, half blocked
	}
	ratio, _ := NewCircuit(ErrorRatio(0.5), WithClock(clk))
	slow, _ := NewCircuit(SlowRatio(time.Second, 0.5), WithClock(clk))
	tolerant, _ := NewCircuit(ErrorCount(1<<40), WithClock(clk)) // reads its window on every failure, never trips
	inARow, _ := NewCircuit(ConsecutiveFailures(1<<40), WithClock(clk))
	never := TripWhen("never", func(n Counts) bool { return n.Failures < 0 })
	when, _ := NewCircuit(never, WithClock(clk))
	open, _ := NewCircuit(ErrorCount(1), WithClock(clk), WithMinRequests(1))
	if p, err := open.Allow(); err == nil {
		p.Fail()
	}
	boom := errors.New("boom")
	ok := func() error { return nil }
	for name, f := range map[string]func(){
		"SRE Allow+Succeed":     func() { p, _ := sre.Allow(); p.Succeed() },
		"SRE Do":                func() { _ = sre.Do(ok) },
		"SRE failing":           func() { p, _ := failing.Allow(); p.Fail() },
		"Circuit Allow+Succeed": func() { p, _ := ratio.Allow(); p.Succeed() },
		"Circuit Allow+Done":    func() { p, _ := ratio.Allow(); p.Done(nil) },
		"Circuit Do":            func() { _ = ratio.Do(ok) },
		"Circuit DoCtx":         func() { _ = ratio.DoCtx(context.Background(), ok) },
		"Circuit acceptable":    func() { _ = slow.DoWithAcceptable(func() error { return boom }, func(error) bool { return true }) },
		"Circuit failing":       func() { _ = tolerant.Do(func() error { return boom }) },
		"Circuit in a row":      func() { p, _ := inARow.Allow(); p.Fail(); p, _ = inARow.Allow(); p.Succeed() },
		"Circuit TripWhen":      func() { p, _ := when.AllowAt(clk.Now()); p.DoneAt(clk.Now(), boom) },
		"Circuit StatsAt":       func() { _ = inARow.StatsAt(clk.Now()) },
		"SRE StateAt":           func() { _ = failing.StateAt(clk.Now()) },
		"Circuit slow":          func() { p, _ := slow.Allow(); p.Succeed() },
		"Circuit open":          func() { _, _ = open.Allow() },
		"Circuit open Do":       func() { _ = open.DoWithFallback(ok, func(err error) error { return err }) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per request", name, n)
		}
	}
	if open.State() != Open {
		t.Fatalf("the open circuit is %v", open.State())
	}
}
