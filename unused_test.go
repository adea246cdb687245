package slidegate

import (
	"strings"
	"testing"
	"time"
)

// A rule whose resource no request enters never acts, and validation
// cannot tell: a breaker on "GET 127.0.0.1" for calls named
// "GET 127.0.0.1:9101". A minute after the rules were set, the guard
// tells of it, once, and not of the rules whose resource requests enter.
func TestARuleNoRequestReachesIsToldAfterAMinute(t *testing.T) {
	g, clk := newGuard(t, Rules{
		Flow:     []FlowRule{{Resource: "GET /orders", Limit: 100}},
		Breakers: []BreakerRule{{Resource: "GET 127.0.0.1", Strategy: ErrorRatioBreaker, Threshold: 0.5}},
	})
	unused := func() []Event {
		var out []Event
		for _, e := range g.Events() {
			if e.Kind == "rules_unused" {
				out = append(out, e)
			}
		}
		return out
	}
	traffic := func(seconds int, told int) {
		t.Helper()
		start := clk.Now()
		for s := range seconds {
			now := start + int64(s)*int64(time.Second)
			clk.Set(now)
			for _, name := range []string{"GET /orders", "GET 127.0.0.1:9101"} {
				e, err := g.EnterAt(bg, now, name)
				if err != nil {
					t.Fatal(err)
				}
				e.ExitAt(now, nil)
			}
			if got := len(unused()); s < 60 && got != told {
				t.Fatalf("%d s after the rules were set: told %d times of unused rules, want %d: %v", s, got, told, unused())
			}
		}
	}
	traffic(70, 0)
	got := unused()
	if len(got) != 1 {
		t.Fatalf("told %d times of unused rules, want once; events: %v", len(got), g.Events())
	}
	text := got[0].String()
	if !strings.Contains(text, `breaker rule "breaker" of "GET 127.0.0.1" unused`) || strings.Contains(text, "GET /orders") {
		t.Errorf("the event says %q, want the breaker on GET 127.0.0.1 and not the rule on GET /orders", text)
	}
	// Rules set again are looked at again, once.
	if err := g.SetRules(g.Rules()); err != nil {
		t.Fatal(err)
	}
	traffic(70, 1)
	if got := unused(); len(got) != 2 {
		t.Fatalf("told %d times of unused rules after the rules were set twice, want twice", len(got))
	}
}
