package slidegate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"

	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

func TestPerKeyRuleLimitsEachKeyOnItsOwn(t *testing.T) {
	// alice has the rule's limit; bob and the requests without a key have
	// overrides of that same limit, which count them exactly from their
	// first request. A key without one is counted in a sketch seeded at
	// random until it uses over half its limit: were two such keys counted
	// there together, a seed under which they share their counters would
	// refuse the second one early.
	g, clk := newGuard(t, Rules{Flow: []FlowRule{
		{Resource: "api", Limit: 2, PerKey: true, Overrides: map[string]int64{"tenant-a": 4, "abuser": 0, "bob": 2, "": 2}},
	}})
	for _, key := range []string{"alice", "bob", ""} {
		for range 2 {
			mustEnter(t, g, "api", WithKey(key)).Exit(nil)
		}
		be := mustBlock(t, g, "api", "qps_per_key", flow.RateLimited, WithKey(key))
		if be.Key != key || be.RetryAfter <= 0 || be.RetryAfter > 1100*time.Millisecond {
			t.Fatalf("block of key %q = %+v, want its key and a retry within the second", key, be)
		}
	}
	for range 4 {
		mustEnter(t, g, "api", WithKey("tenant-a")).Exit(nil)
	}
	mustBlock(t, g, "api", "qps_per_key", flow.RateLimited, WithKey("tenant-a"))
	mustBlock(t, g, "api", "qps_per_key", flow.ExceedsLimit, WithKey("abuser"))
	clk.Advance(1100 * time.Millisecond)
	mustEnter(t, g, "api", WithKey("alice")).Exit(nil)
}

func TestPerKeyRulesOfAResourceAreDecidedTogether(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{
		{Resource: "api", Limit: 2, PerKey: true},
		{Resource: "other", Limit: 1},
		{Resource: "api", Limit: 3, Interval: Duration(time.Minute), PerKey: true},
	}})
	for s := range 2 {
		for range 2 {
			mustEnter(t, g, "api", WithKey("u")).Exit(nil)
		}
		// The third of the second is refused by the per-second rule...
		mustBlock(t, g, "api", "qps_per_key", flow.RateLimited, WithKey("u"))
		_ = s
		clk.Advance(1100 * time.Millisecond)
		if s == 0 {
			// ... and after it, the minute rule has counted 2 of its 3.
			mustEnter(t, g, "api", WithKey("u")).Exit(nil)
			be := mustBlock(t, g, "api", "qps_per_key_2", flow.RateLimited, WithKey("u"))
			if be.RetryAfter < 50*time.Second {
				t.Fatalf("the minute rule's block says retry after %v", be.RetryAfter)
			}
			break
		}
	}
	// Refusals by the minute rule counted nothing in the per-second rule:
	// another key is unaffected, and so is the per-second window of u.
	mustEnter(t, g, "api", WithKey("v")).Exit(nil)
}

// A request that a later rule blocks takes no place in an earlier QPS
// rule's window.
func TestQPSRulesOfAResourceAreAllOrNothing(t *testing.T) {
	keep := FlowRule{Resource: "api", Limit: 3}
	g, _ := newGuard(t, Rules{Flow: []FlowRule{keep, {Resource: "api", Limit: 1, Interval: Duration(time.Minute)}}})
	mustEnter(t, g, "api").Exit(nil)
	for range 5 {
		mustBlock(t, g, "api", "qps_2", flow.RateLimited)
	}
	// The same first rule alone keeps its counts: one request, not three
	// or more.
	if err := g.SetRules(Rules{Flow: []FlowRule{keep}}); err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "api").Exit(nil)
	mustEnter(t, g, "api").Exit(nil)
	mustBlock(t, g, "api", "qps", flow.RateLimited)
}

func TestPerKeyRuleKeepsItsCountsAcrossAReloadOfItsLimit(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "api", Limit: 3, PerKey: true}}})
	for range 3 {
		mustEnter(t, g, "api", WithKey("u")).Exit(nil)
	}
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "api", Limit: 4, PerKey: true}}}); err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "api", WithKey("u")).Exit(nil)
	mustBlock(t, g, "api", "qps_per_key", flow.RateLimited, WithKey("u"))
	top := g.TopKeys("api", 5, false)
	if len(top) != 1 || top[0].Key != "u" || top[0].Allowed != 4 || top[0].Blocked != 1 {
		t.Fatalf("TopKeys = %+v, want u with 4 allowed and 1 blocked", top)
	}
}

func TestPerKeyRulesAreValidated(t *testing.T) {
	long := strings.Repeat("k", bounds.MaxKeyLength+1)
	for _, tc := range []struct {
		rules []FlowRule
		field string
	}{
		{[]FlowRule{{Resource: "a", Limit: 1, Overrides: map[string]int64{"x": 2}}}, "overrides"},
		{[]FlowRule{{Resource: "a", Limit: 1, PerKey: true, Overrides: map[string]int64{long: 2}}}, "overrides"},
		{[]FlowRule{{Resource: "a", Limit: 1, PerKey: true, Overrides: map[string]int64{"x": -2}}}, "overrides"},
		{[]FlowRule{{Resource: "a", Limit: 1, PerKey: true, Borrow: Duration(time.Second)}}, "borrow"},
		{[]FlowRule{{Resource: "a", Limit: 1, PerKey: true, WarmUp: Duration(time.Minute)}}, "warm_up"},
		{[]FlowRule{{Resource: "a", Limit: 1, PerKey: true, Buckets: 101}}, "buckets"},
		{[]FlowRule{{Resource: "a", Limit: 1, PerKey: true, Interval: Duration(time.Second), Buckets: 3}}, "interval"},
		{func() (rs []FlowRule) {
			for i := range 9 {
				rs = append(rs, FlowRule{Resource: "a", Limit: 1, PerKey: true, Interval: Duration(time.Duration(i+1) * time.Second)})
			}
			return rs
		}(), "per_key"},
	} {
		err := Rules{Flow: tc.rules}.Validate()
		var re *RulesError
		if !errors.As(err, &re) || len(re.Problems) == 0 || re.Problems[0].Field != tc.field {
			t.Errorf("%+v: %v, want a problem with %s", tc.rules[0], err, tc.field)
		}
	}
	// Rules refused leave those in force.
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, PerKey: true}}})
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: 5, PerKey: true, Buckets: 101}}}); err == nil {
		t.Fatal("bad rules accepted")
	}
	mustEnter(t, g, "a", WithKey("u")).Exit(nil)
	mustBlock(t, g, "a", "qps_per_key", flow.RateLimited, WithKey("u"))
}

func TestPerKeyClusterRuleNeedsAKeyedCluster(t *testing.T) {
	g, err := New(WithCluster(plainCluster{}))
	if err != nil {
		t.Fatal(err)
	}
	err = g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, PerKey: true, Cluster: true}}})
	var re *RulesError
	if !errors.As(err, &re) || re.Problems[0].Field != "per_key" {
		t.Fatalf("a per-key cluster rule on a cluster without keys: %v", err)
	}
}

type plainCluster struct{}

func (plainCluster) Limiter(FlowRule) (ClusterLimiter, error) { return nil, errors.New("unused") }

func TestEnterWithAKeyAllocatesNothing(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{
		{Resource: "api", Limit: 1000, PerKey: true},
		{Resource: "api", Limit: 100000, Interval: Duration(time.Minute), PerKey: true},
	}})
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = "user-" + strings.Repeat("x", i%40) + string(rune('a'+i%26))
	}
	i := 0
	step := func() {
		clk.Advance(time.Microsecond)
		e, err := g.Enter(bg, "api", WithKey(keys[i%len(keys)]))
		if err == nil {
			e.Exit(nil)
		}
		i++
	}
	for range 50000 {
		step()
	}
	if a := testing.AllocsPerRun(5000, step); a != 0 {
		t.Fatalf("Enter+Exit with a key allocates %v times", a)
	}
}

// Keys are input from the network: a key longer than 256 counts
// as its first 256 bytes, and what TopKeys shows of it is cut.
func TestLongKeysAreBounded(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "api", Limit: 2, PerKey: true}}})
	prefix := strings.Repeat("a", bounds.MaxKeyLength)
	mustEnter(t, g, "api", WithKey(prefix+"1")).Exit(nil)
	mustEnter(t, g, "api", WithKey(prefix+strings.Repeat("2", 1<<20))).Exit(nil)
	be := mustBlock(t, g, "api", "qps_per_key", flow.RateLimited, WithKey(prefix+"3"))
	if len(be.Key) != bounds.MaxKeyLength {
		t.Fatalf("the block names a key of %d bytes, want it cut to %d", len(be.Key), bounds.MaxKeyLength)
	}
	top := g.TopKeys("api", 1, false)
	if len(top) != 1 || len(top[0].Key) > flowlimits.MaxShownKeyLength || top[0].Allowed != 2 {
		t.Fatalf("TopKeys = %+v, want one key, cut, with 2 allowed", top)
	}
}

func TestPerKeyRuleKeepsItsCountsAcrossAReloadOfItsOverrides(t *testing.T) {
	rule := func(overrides map[string]int64) Rules {
		return Rules{Flow: []FlowRule{{Resource: "api", Limit: 2, PerKey: true, Overrides: overrides}}}
	}
	g, _ := newGuard(t, rule(map[string]int64{"a": 5}))
	for range 4 {
		mustEnter(t, g, "api", WithKey("a")).Exit(nil)
	}
	mustEnter(t, g, "api", WithKey("b")).Exit(nil)
	// a loses its override (4 counted, over the limit of 2 now); b gains
	// one (1 counted, 2 more fit).
	if err := g.SetRules(rule(map[string]int64{"b": 3})); err != nil {
		t.Fatal(err)
	}
	mustBlock(t, g, "api", "qps_per_key", flow.RateLimited, WithKey("a"))
	mustEnter(t, g, "api", WithKey("b")).Exit(nil)
	mustEnter(t, g, "api", WithKey("b")).Exit(nil)
	mustBlock(t, g, "api", "qps_per_key", flow.RateLimited, WithKey("b"))
}

func TestPerKeyConcurrencyRuleLimitsEachKeysRequestsInFlight(t *testing.T) {
	// b and c, which enter while a holds its places, have overrides of the
	// rule's own limit, which count them exactly: a key without one is
	// counted in a sketch seeded at random, where a seed under which it
	// shares all its counters with a would refuse it early.
	g, _ := newGuard(t, Rules{Flow: []FlowRule{
		{Resource: "api", Type: ConcurrencyRule, Limit: 2, PerKey: true, Overrides: map[string]int64{"vip": 3, "b": 2}},
		{Resource: "api", Limit: 4, PerKey: true}, // refuses after the permits: they are given back
	}})
	a1 := mustEnter(t, g, "api", WithKey("a"))
	a2 := mustEnter(t, g, "api", WithKey("a"))
	be := mustBlock(t, g, "api", "concurrency_per_key", flow.ConcurrencyLimited, WithKey("a"))
	if be.Key != "a" {
		t.Fatalf("block names key %q, want a", be.Key)
	}
	mustEnter(t, g, "api", WithKey("b")).Exit(nil)
	a1.Exit(nil)
	a3 := mustEnter(t, g, "api", WithKey("a")) // the third of a's QPS rule
	a2.Exit(nil)
	a3.Exit(nil)
	mustEnter(t, g, "api", WithKey("a")).Exit(nil) // the fourth
	// a's QPS rule refuses the fifth: its concurrency permit is given back,
	// so a still has both places.
	mustBlock(t, g, "api", "qps_per_key", flow.RateLimited, WithKey("a"))
	conc := FlowRule{Resource: "api", Type: ConcurrencyRule, Limit: 2, PerKey: true, Overrides: map[string]int64{"vip": 3, "b": 2}}
	if err := g.SetRules(Rules{Flow: []FlowRule{conc}}); err != nil { // the same rule: its counts stay
		t.Fatal(err)
	}
	mustEnter(t, g, "api", WithKey("a"))
	mustEnter(t, g, "api", WithKey("a"))
	for range 3 {
		mustEnter(t, g, "vip", WithKey("vip")) // another resource: no rule
	}
	v := []Entry{mustEnter(t, g, "api", WithKey("vip")), mustEnter(t, g, "api", WithKey("vip")), mustEnter(t, g, "api", WithKey("vip"))}
	mustBlock(t, g, "api", "concurrency_per_key", flow.ConcurrencyLimited, WithKey("vip"))
	for _, e := range v {
		e.Exit(nil)
	}
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "api", Type: ConcurrencyRule, Limit: 1, PerKey: true, Overrides: map[string]int64{"vip": 3, "c": 1}}}}); err != nil {
		t.Fatal(err)
	}
	h := mustEnter(t, g, "api", WithKey("c"))
	mustBlock(t, g, "api", "concurrency_per_key", flow.ConcurrencyLimited, WithKey("c"))
	h.Exit(nil)
}

func TestPerKeyThrottleRuleSpacesEachKey(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{
		{Resource: "api", Type: ThrottleRule, Limit: 2, PerKey: true, Overrides: map[string]int64{"fast": 1000}},
		{Resource: "api", Limit: 1, Interval: Duration(time.Minute), PerKey: true}, // blocks the second of each key
	}})
	mustEnter(t, g, "api", WithKey("a")).Exit(nil)
	// a's next place is 500 ms away and the rule waits for none...
	be := mustBlock(t, g, "api", "throttle_per_key", flow.WaitTooLong, WithKey("a"))
	if be.Key != "a" {
		t.Fatalf("block names key %q", be.Key)
	}
	mustEnter(t, g, "api", WithKey("b")).Exit(nil) // ... b has its own pace
	clk.Advance(500 * time.Millisecond)
	mustBlock(t, g, "api", "qps_per_key", flow.RateLimited, WithKey("b")) // paced, then the minute rule
	// An override paces its key at its own rate: 1 ms apart.
	mustEnter(t, g, "api", WithKey("fast")).Exit(nil)
	mustBlock(t, g, "api", "throttle_per_key", flow.WaitTooLong, WithKey("fast"))
	clk.Advance(time.Millisecond)
	mustBlock(t, g, "api", "qps_per_key", flow.RateLimited, WithKey("fast"))
	if err := (Rules{Flow: []FlowRule{{Resource: "api", Type: ThrottleRule, PerKey: true}}}).Validate(); err == nil {
		t.Fatal("a per-key throttle of limit 0 accepted")
	}
}

// The rules in force keep their own copy of each rule's overrides: a
// caller that changes its map and loads the rules again gets the new
// overrides in force.
func TestOverridesGivenAreCopied(t *testing.T) {
	m := map[string]int64{"vip": 5}
	rules := Rules{Flow: []FlowRule{{Resource: "api", Type: ConcurrencyRule, Limit: 5, PerKey: true, Overrides: m}}}
	g, _ := newGuard(t, rules)
	m["abuser"] = 0 // block a key
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	mustBlock(t, g, "api", "concurrency_per_key", flow.ExceedsLimit, WithKey("abuser"))
	g.Rules().Flow[0].Overrides["abuser"] = 7 // a copy too
	mustBlock(t, g, "api", "concurrency_per_key", flow.ExceedsLimit, WithKey("abuser"))
}

func TestTopKeysOfANegativeCountIsEmpty(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "api", Limit: 2, PerKey: true}}})
	mustEnter(t, g, "api", WithKey("a")).Exit(nil)
	mustEnter(t, g, "api", WithKey("a")).Exit(nil)
	if top := g.TopKeys("api", -1, false); len(top) != 0 {
		t.Fatalf("TopKeys(-1) = %v", top)
	}
}

func TestPerKeyClusterRuleWithoutAClusterSaysHowToMakeOne(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "api", Limit: 2, PerKey: true, Cluster: true}}})
	var re *RulesError
	if !errors.As(err, &re) || re.Problems[0].Field != "cluster" || !strings.Contains(re.Problems[0].Reason, "WithCluster") {
		t.Fatalf("SetRules: %v, want a problem with cluster naming WithCluster", err)
	}
}
