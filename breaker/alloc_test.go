package breaker

import (
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// Allowing and settling a request, and blocking one, allocate nothing.
func TestBreakersDoNotAllocate(t *testing.T) {
	clk := clock.NewManual(int64(time.Hour))
	sre, _ := NewSRE(WithClock(clk))
	failing, _ := NewSRE(WithClock(clk), withRandom(func() float64 { return 0.5 }))
	for i := 0; i < 100; i++ {
		p, _ := failing.Allow()
		p.settle(Failure) // a block ratio of 0.94: half the requests are allowed, half blocked
	}
	ratio, _ := NewCircuit(ErrorRatio(0.5), WithClock(clk))
	slow, _ := NewCircuit(SlowRatio(time.Second, 0.5), WithClock(clk))
	tolerant, _ := NewCircuit(ErrorCount(1<<40), WithClock(clk)) // reads its window on every failure, never trips
	inARow, _ := NewCircuit(ConsecutiveFailures(1<<40), WithClock(clk))
	never := TripWhen(func(n Stats) bool { return n.Failures < 0 })
	when, _ := NewCircuit(never, WithClock(clk))
	classified, _ := NewCircuit(SlowRatio(time.Second, 0.5), WithClock(clk), WithOutcomeOf(func(error) Outcome { return Success }))
	open, _ := NewCircuit(ErrorCount(1), WithClock(clk), WithMinRequests(1))
	if p, err := open.Allow(); err == nil {
		p.settle(Failure)
	}
	boom := errors.New("boom")
	ok := func() error { return nil }
	for name, f := range map[string]func(){
		"SRE Allow+Succeed":     func() { p, _ := sre.Allow(); p.settle(Success) },
		"SRE Do":                func() { _ = sre.Do(bg, ok) },
		"SRE failing":           func() { p, _ := failing.Allow(); p.settle(Failure) },
		"Circuit Allow+Succeed": func() { p, _ := ratio.Allow(); p.settle(Success) },
		"Circuit Allow+Done":    func() { p, _ := ratio.Allow(); p.Done(nil) },
		"Circuit Do":            func() { _ = ratio.Do(bg, ok) },
		"Circuit classified":    func() { _ = classified.Do(bg, func() error { return boom }) },
		"Circuit failing":       func() { _ = tolerant.Do(bg, func() error { return boom }) },
		"Circuit in a row":      func() { p, _ := inARow.Allow(); p.settle(Failure); p, _ = inARow.Allow(); p.settle(Success) },
		"Circuit TripWhen":      func() { p, _ := when.AllowAt(clk.Now()); p.DoneAt(clk.Now(), boom) },
		"Circuit StatsAt":       func() { _ = inARow.StatsAt(clk.Now()) },
		"SRE StateAt":           func() { _ = failing.StatsAt(clk.Now()).State },
		"Circuit slow":          func() { p, _ := slow.Allow(); p.settle(Success) },
		"Circuit open":          func() { _, _ = open.Allow() },
		"Circuit open Do":       func() { _ = open.Do(bg, ok) },
		"guard's RecordAt":      func() { p, _ := ratio.AllowAt(clk.Now()); p.recordAt(clk.Now(), Ignored) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per request", name, n)
		}
	}
	if s := open.Stats().State; s != Open {
		t.Fatalf("the open circuit is %v", s)
	}
}
