package slidegate

import (
	"testing"

	"github.com/slidegate/slidegate/flow"
)

// A reload that only gives another key an override must not forget the
// places a key holds: it would let the key hold twice its limit.
func TestAnOverrideForAnotherKeyKeepsTheKeysPlacesInFlight(t *testing.T) {
	rule := FlowRule{Resource: "api", Type: ConcurrencyRule, Limit: 2, PerKey: true}
	g, _ := newGuard(t, Rules{Flow: []FlowRule{rule}})
	held := []Entry{mustEnter(t, g, "api", WithKey("k")), mustEnter(t, g, "api", WithKey("k"))}
	rule.Overrides = map[string]int64{"other": 5}
	if err := g.SetRules(Rules{Flow: []FlowRule{rule}}); err != nil {
		t.Fatal(err)
	}
	mustBlock(t, g, "api", "concurrency_per_key", flow.ConcurrencyLimited, WithKey("k"))
	for _, e := range held {
		e.Exit(nil)
	}
	mustEnter(t, g, "api", WithKey("k")).Exit(nil)
}

// Reloads that only change overrides must not give a key a fresh pace: at
// one instant, a key paced at 1 a second goes once, however many reloads.
func TestOverrideOnlyReloadsKeepAKeysPace(t *testing.T) {
	rule := FlowRule{Resource: "api", Type: ThrottleRule, Limit: 1, PerKey: true}
	g, _ := newGuard(t, Rules{Flow: []FlowRule{rule}})
	mustEnter(t, g, "api", WithKey("k")).Exit(nil)
	for _, other := range []string{"a", "b", "c"} {
		rule.Overrides = map[string]int64{other: 5}
		if err := g.SetRules(Rules{Flow: []FlowRule{rule}}); err != nil {
			t.Fatal(err)
		}
		mustBlock(t, g, "api", "throttle_per_key", flow.WaitTooLong, WithKey("k"))
	}
}
