package slidegate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

func TestReloadDoesNotHandOneRulesCountsToAnother(t *testing.T) {
	rules := Rules{Flow: []FlowRule{{Resource: "a", Limit: 100}, {Resource: "a", Limit: 5}}}
	g, _ := newGuard(t, rules)
	for range 5 {
		mustEnter(t, g, "a").Exit(nil)
	}
	mustBlock(t, g, "a", "qps_2", flow.RateLimited)
	if err := g.SetRules(rules); err != nil { // the same rules, at the same instant
		t.Fatal(err)
	}
	mustBlock(t, g, "a", "qps_2", flow.RateLimited)
	rules.Flow[0], rules.Flow[1] = rules.Flow[1], rules.Flow[0]
	if err := g.SetRules(rules); err != nil { // reordered
		t.Fatal(err)
	}
	mustBlock(t, g, "a", "qps", flow.RateLimited)
}

func TestReloadKeepsBreakerStateOfRepeatedRules(t *testing.T) {
	rule := BreakerRule{Resource: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{rule, rule}})
	mustEnter(t, g, "a").Exit(fmt.Errorf("boom")) // both open
	if err := g.SetRules(Rules{Breakers: []BreakerRule{rule, rule}}); err != nil {
		t.Fatal(err)
	}
	for i, b := range g.Breakers() {
		if b.State.String() != "open" {
			t.Errorf("breakers[%d] is %v after a reload that repeats it", i, b.State)
		}
	}
}

// TestReloadNeverAdmitsAboveALimitInForce drives random traffic and random
// reloads (the same rules again, reordered, one added, one removed, one
// limit changed) on a manual clock, and checks against the record that no
// rule admitted more than its limit in any interval during which it was in
// force throughout.
func TestReloadNeverAdmitsAboveALimitInForce(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkReloads(t, seed) })
	}
}

func checkReloads(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	randomRule := func() FlowRule {
		return FlowRule{
			Resource: "a",
			Limit:    int64(1 + rng.IntN(8)),
			Interval: Duration([]time.Duration{time.Second, 2 * time.Second}[rng.IntN(2)]),
			Buckets:  []int{0, 1, 4, flowlimits.DefaultBuckets}[rng.IntN(4)], // 0 is the default spelled out
		}
	}
	type load struct {
		at    int64
		seq   int
		rules []FlowRule
	}
	var (
		loads    []load
		admitted []struct {
			at  int64
			seq int
		}
		rules []FlowRule
	)
	for range 1 + rng.IntN(3) {
		rules = append(rules, randomRule())
	}
	g, clk := newGuard(t, Rules{Flow: slices.Clone(rules)})
	loads = append(loads, load{clk.Now(), 0, slices.Clone(rules)})
	for seq := 1; seq < 3000; seq++ {
		switch op := rng.IntN(20); {
		case op < 5:
			clk.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
		case op < 18:
			if e, err := g.Enter(bg, "a"); err == nil {
				e.Exit(nil)
				admitted = append(admitted, struct {
					at  int64
					seq int
				}{clk.Now(), seq})
			}
		default:
			switch rng.IntN(5) {
			case 0: // the same rules again
			case 1:
				rng.Shuffle(len(rules), func(i, j int) { rules[i], rules[j] = rules[j], rules[i] })
			case 2:
				if len(rules) < 5 {
					rules = slices.Insert(rules, rng.IntN(len(rules)+1), randomRule())
				}
			case 3:
				if len(rules) > 0 {
					i := rng.IntN(len(rules))
					rules = slices.Delete(rules, i, i+1)
				}
			case 4:
				if len(rules) > 0 {
					rules[rng.IntN(len(rules))].Limit = int64(1 + rng.IntN(8))
				}
			}
			if err := g.SetRules(Rules{Flow: slices.Clone(rules)}); err != nil {
				t.Fatal(err)
			}
			loads = append(loads, load{clk.Now(), seq, slices.Clone(rules)})
		}
	}
	// inForce reports whether rule r was in force throughout (from, to]
	// up to event seq: in the rules loaded last at or before from, and in
	// every load after it up to seq.
	inForce := func(r FlowRule, from int64, seq int) bool {
		for i := len(loads) - 1; i >= 0; i-- {
			l := loads[i]
			if l.seq > seq {
				continue
			}
			if !slices.ContainsFunc(l.rules, func(x FlowRule) bool { return ruleKey(x) == ruleKey(r) }) {
				return false
			}
			if l.at <= from {
				return true
			}
		}
		return false
	}
	var distinct []FlowRule
	for _, l := range loads {
		for _, r := range l.rules {
			if !slices.ContainsFunc(distinct, func(x FlowRule) bool { return ruleKey(x) == ruleKey(r) }) {
				distinct = append(distinct, r)
			}
		}
	}
	for _, r := range distinct {
		for k, a := range admitted {
			from := a.at - int64(r.interval())
			if !inForce(r, from, a.seq) {
				continue
			}
			// admitted is in time order: those after from, up to k.
			first, _ := slices.BinarySearchFunc(admitted[:k+1], from, func(b struct {
				at  int64
				seq int
			}, from int64) int {
				if b.at <= from {
					return -1
				}
				return 1
			})
			if n := int64(k + 1 - first); n > r.Limit {
				t.Fatalf("rule %+v, in force throughout, admitted %d in the interval up to %v", r, n, time.Duration(a.at))
			}
		}
	}
}

func TestRulesGivenOrReturnedShareNothingWithTheGuard(t *testing.T) {
	given := Rules{
		Flow:     []FlowRule{{Resource: "a", Limit: 1}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: ErrorCountBreaker, Count: 1, MinRequests: cloned(new(int64))}},
	}
	*given.Breakers[0].MinRequests = 1
	g, _ := newGuard(t, given)
	given.Flow[0].Limit = 1000
	*given.Breakers[0].MinRequests = 1000
	got := g.Rules()
	got.Flow[0].Resource = "b"
	if r := g.Rules(); !reflect.DeepEqual(r.Flow[0], FlowRule{Resource: "a", Limit: 1}) || *r.Breakers[0].MinRequests != 1 {
		t.Fatalf("rules in force = %+v, changed through the slices given or returned", r)
	}
	mustEnter(t, g, "a").Exit(nil)
	mustBlock(t, g, "a", "qps", flow.RateLimited)
}

func TestReloadTreatsADefaultSpelledOutAsTheSameRule(t *testing.T) {
	g, _ := newGuard(t, Rules{
		Flow:     []FlowRule{{Resource: "a", Limit: 1}},
		Breakers: []BreakerRule{{Resource: "b", Strategy: ErrorCountBreaker, Count: 1, MinRequests: cloned(new(int64))}},
	})
	mustEnter(t, g, "a").Exit(nil)
	mustEnter(t, g, "b").Exit(errors.New("boom")) // opens the breaker
	spelled := Rules{
		Flow: []FlowRule{{Resource: "a", Limit: 1, Type: QPSRule, Interval: Duration(time.Second), Buckets: flowlimits.DefaultBuckets}},
		Breakers: []BreakerRule{{Resource: "b", Strategy: ErrorCountBreaker, Count: 1, MinRequests: cloned(new(int64)),
			Interval: Duration(10 * time.Second), Buckets: 10, OpenTimeout: Duration(5 * time.Second), Probes: 1}},
	}
	if err := g.SetRules(spelled); err != nil {
		t.Fatal(err)
	}
	mustBlock(t, g, "a", "qps", flow.RateLimited)
	mustBlock(t, g, "b", "breaker", flow.BreakerOpen)
}

func TestARuleRemovedFromABusyResourceLeavesItsStatistics(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 100}}}, WithMaxResources(2))
	for range 30 { // busy for longer than a statistics window
		mustEnter(t, g, "a").Exit(nil)
		clk.Advance(time.Second)
	}
	if err := g.SetRules(Rules{}); err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "b").Exit(nil)
	mustEnter(t, g, "c").Exit(nil) // the table is full: evicts what is idle
	if s, ok := g.Stats("a"); !ok || s.Totals.Allowed != 30 {
		t.Fatalf("a = %+v, %v: a resource used a second ago was evicted", s, ok)
	}
}

// refusingLimit is a cluster limiter that refuses limits above 10 when asked
// to change.
type refusingLimit struct{ fakeLimiter }

func (l *refusingLimit) SetLimit(n int64) error {
	if n > 10 {
		return errors.New("the cluster allows at most 10")
	}
	return l.fakeLimiter.SetLimit(n)
}

type refusingLimitCluster struct{}

func (refusingLimitCluster) Limiter(r FlowRule) (ClusterLimiter, error) {
	q, err := flow.NewQPS(flow.QPSSettings{Limit: r.Limit, Interval: r.interval()})
	if err != nil {
		return nil, err
	}
	return &refusingLimit{fakeLimiter{q: q}}, nil
}

func TestALimitTheClusterRefusesLeavesTheRulesInForce(t *testing.T) {
	g, err := New(WithCluster(refusingLimitCluster{}))
	if err != nil {
		t.Fatal(err)
	}
	before := Rules{Flow: []FlowRule{{Resource: "local", Limit: 2}, {Resource: "c", Limit: 3, Cluster: true}}}
	if err := g.SetRules(before); err != nil {
		t.Fatal(err)
	}
	// The local limit changes in place first, then the cluster refuses its
	// new limit: the local one must be put back.
	err = g.SetRules(Rules{Flow: []FlowRule{{Resource: "local", Limit: 1}, {Resource: "c", Limit: 13, Cluster: true}}})
	var re *RulesError
	if !errors.As(err, &re) || len(re.Problems) != 1 || re.Problems[0].Rule != "flow[1]" || re.Problems[0].Field != "limit" {
		t.Fatalf("SetRules: %v, want the cluster's refusal of flow[1]'s limit", err)
	}
	if got := g.Rules(); len(got.Flow) != 2 || got.Flow[0].Limit != 2 || got.Flow[1].Limit != 3 {
		t.Fatalf("rules in force = %+v, want the earlier ones", got)
	}
	mustEnter(t, g, "local").Exit(nil)
	mustEnter(t, g, "local").Exit(nil) // a limit of 2 again, not 1
	mustBlock(t, g, "local", "qps", flow.RateLimited)
}

// A per-key QPS window added or removed by a reload leaves the others
// counting: a key that took its 5 of a second keeps them when an hourly
// window joins, and when it goes again.
func TestAReloadAddingAPerKeyWindowKeepsTheOthersCounts(t *testing.T) {
	second := FlowRule{Resource: "api", Limit: 5, PerKey: true}
	hourly := FlowRule{Resource: "api", Limit: 1000, Interval: Duration(time.Hour), PerKey: true}
	g, clk := newGuard(t, Rules{Flow: []FlowRule{second}})
	admitted := func(n int) int {
		ok := 0
		for range n {
			if e, err := g.Enter(bg, "api", WithKey("k")); err == nil {
				e.Exit(nil)
				ok++
			}
		}
		return ok
	}
	if n := admitted(5); n != 5 {
		t.Fatalf("%d of a key's first 5 admitted, limit 5", n)
	}
	for _, rules := range [][]FlowRule{{second, hourly}, {hourly, second}, {second}} {
		clk.Advance(100 * time.Millisecond)
		if err := g.SetRules(Rules{Flow: rules}); err != nil {
			t.Fatal(err)
		}
		if n := admitted(5); n != 0 {
			t.Fatalf("after a reload to %d windows: %d more admitted in the same second, limit 5", len(rules), n)
		}
	}
	clk.Advance(time.Second)
	if n := admitted(6); n != 5 {
		t.Fatalf("the next second: %d of 6 admitted, limit 5", n)
	}
}
