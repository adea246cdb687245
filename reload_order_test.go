package slidegate

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
)

// A hookedClock is a manual clock that calls hook, if set, when SetRules
// reads it itself: after the new rules are compiled, before they are told
// and put in force.
type hookedClock struct {
	*clock.Manual
	hook atomic.Pointer[func()]
}

func (c *hookedClock) Now() int64 {
	if f := c.hook.Load(); f != nil {
		if pc, _, _, ok := runtime.Caller(1); ok && strings.HasSuffix(runtime.FuncForPC(pc).Name(), ".(*Guard).SetRules") {
			(*f)()
		}
	}
	return c.Manual.Now()
}

// SetRules tells the rules that changed before they are in force, "so
// that a breaker of the new rules changing state is told after the rule
// that made it". A circuit that takes a new count in place, and trips on
// it while SetRules is under way, is such a change: its breaker_changed
// event must come after the rules_changed event of the count.
func TestABreakerTrippedByItsNewCountIsToldAfterTheRuleThatChangedIt(t *testing.T) {
	clk := &hookedClock{Manual: clock.NewManual(int64(time.Hour))}
	rule := BreakerRule{Resource: "a", Strategy: ErrorCountBreaker, Count: 3, MinRequests: new(int64)}
	g, err := New(WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	setRules(t, g, Rules{Breakers: []BreakerRule{rule}})
	mustEnter(t, g, "a").Exit(errBoom) // 1 failure: closed at count 3, and at 2
	e := mustEnter(t, g, "a")
	// Once the new rules are compiled, and before SetRules tells them, the
	// request ends in failure: the second, which trips the circuit at
	// count 2 only.
	fired := false
	hook := func() {
		if !fired {
			fired = true
			e.ExitAt(clk.Manual.Now(), errBoom)
		}
	}
	clk.hook.Store(&hook)
	rule.Count = 2
	setRules(t, g, Rules{Breakers: []BreakerRule{rule}})
	clk.hook.Store(nil)
	if !fired {
		t.Fatal("SetRules read no clock of its own after compiling the rules")
	}
	var tripped, changed uint64
	for range 3 { // a circuit not tripped yet fails on
		for _, ev := range g.Events() {
			switch {
			case ev.Kind == breakerChanged && ev.Breaker.To == breaker.Open:
				tripped = ev.Seq
			case ev.Kind == rulesChanged:
				changed = ev.Seq
			}
		}
		if tripped != 0 {
			break
		}
		mustEnter(t, g, "a").Exit(errBoom)
	}
	if tripped == 0 || changed == 0 {
		t.Fatalf("events %v: want the count's change and the circuit's opening", g.Events())
	}
	if tripped < changed {
		t.Errorf("the circuit's opening on its new count is event %d, the rules_changed event of that count %d: told before the rule that made it", tripped, changed)
	}
}
