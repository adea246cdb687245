package compare

import (
	"fmt"
	"strconv"
	"testing"

	scb "github.com/alibaba/sentinel-golang/core/circuitbreaker"
	sflow "github.com/alibaba/sentinel-golang/core/flow"

	"github.com/slidegate/slidegate"
)

// The rule-loading rows: the rules of setRulesResources resources, each a
// QPS rule and an error-ratio breaker (the guard rows' rules, guard.go),
// put in force at once, as a service loads its rules. One operation is one
// whole load: slidegate's Guard.SetRules, and sentinel's flow.LoadRules
// then circuitbreaker.LoadRules.
//
// Each side builds what a request will use when it loads, not on first
// use. slidegate validates every rule, makes each resource (its counter
// and latency sketch), a QPS limiter and a Circuit with its window, binds
// them to the resource, and records what changed as an event. sentinel
// drops the rules it finds invalid, makes each resource's statistics
// (its ResourceNode, read by the flow rule), a traffic controller, and a
// breaker with its own window.
//
// Three loads: into a guard or a sentinel with no rules and no resources
// (first; the guard is made, and sentinel's rules and statistics cleared,
// with the timer stopped); of rules equal to those in force, in new values
// as a service reads them from a file again (same: sentinel compares them
// with reflect.DeepEqual and stops there; slidegate matches each rule and
// keeps its enforcer); and of rules with every limit and threshold changed
// (changed: slidegate changes each QPS limit in place and makes each
// breaker anew; sentinel makes each controller and breaker anew, over the
// statistics of the one it replaces). The two sets of a reload alternate.

// setRulesResources is how many resources the rows load the rules of.
const setRulesResources = 20000

func init() { Shapes = append(Shapes, setRulesFirst, setRulesSame, setRulesChanged) }

// setRulesName returns the name of resource i of the rows.
func setRulesName(i int) string { return "GET /api/v1/resource-" + strconv.Itoa(i) }

// slidegateRules returns the rows' rules for slidegate; variant 1 differs
// from variant 0 in every limit and every threshold.
func slidegateRules(variant int) slidegate.Rules {
	n := setRulesResources
	r := slidegate.Rules{Flow: make([]slidegate.FlowRule, n), Breakers: make([]slidegate.BreakerRule, n)}
	for i := range n {
		name := setRulesName(i)
		r.Flow[i] = slidegate.FlowRule{Resource: name, Limit: guardLimit - int64(variant)}
		r.Breakers[i] = slidegate.BreakerRule{Resource: name, Strategy: slidegate.ErrorRatioBreaker,
			Threshold: breakerRatio + float64(variant)/10}
	}
	return r
}

// sentinelRules are the rows' rules for sentinel.
type sentinelRules struct {
	flow []*sflow.Rule
	cb   []*scb.Rule
}

// newSentinelRules returns the rows' rules for sentinel, in new values;
// variant 1 differs from variant 0 in every limit and every threshold.
func newSentinelRules(variant int) sentinelRules {
	n := setRulesResources
	r := sentinelRules{flow: make([]*sflow.Rule, n), cb: make([]*scb.Rule, n)}
	for i := range n {
		name := setRulesName(i)
		r.flow[i] = &sflow.Rule{
			Resource:               name,
			TokenCalculateStrategy: sflow.Direct,
			ControlBehavior:        sflow.Reject,
			Threshold:              guardLimit - float64(variant),
			StatIntervalInMs:       1000,
		}
		cb := sentinelRule(name, scb.ErrorRatio, breakerOpen)
		cb.Threshold += float64(variant) / 10
		r.cb[i] = &cb
	}
	return r
}

// load puts r in force in sentinel.
func (r sentinelRules) load() error {
	if _, err := sflow.LoadRules(r.flow); err != nil {
		return fmt.Errorf("sentinel: flow rules: %w", err)
	}
	if _, err := scb.LoadRules(r.cb); err != nil {
		return fmt.Errorf("sentinel: circuit-breaker rules: %w", err)
	}
	return nil
}

// newRulesGuard returns a guard that holds the rows' resources.
func newRulesGuard(b *testing.B) *slidegate.Guard {
	g, err := slidegate.New(slidegate.WithMaxResources(2 * setRulesResources))
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// setGuardRules puts r in force in g, and checks that they are.
func setGuardRules(b *testing.B, g *slidegate.Guard, r slidegate.Rules) {
	if err := g.SetRules(r); err != nil {
		b.Fatal(err)
	}
	if got := g.Rules(); len(got.Flow) != len(r.Flow) || len(got.Breakers) != len(r.Breakers) || got.Flow[0].Limit != r.Flow[0].Limit {
		b.Fatalf("slidegate: %d flow rules and %d breakers in force, want %d and %d", len(got.Flow), len(got.Breakers), len(r.Flow), len(r.Breakers))
	}
}

// loadSentinel puts r in force in sentinel, and checks that they are: its
// rules are global, so the rows clear them when they end.
func loadSentinel(b *testing.B, r sentinelRules) {
	if err := r.load(); err != nil {
		b.Fatal(err)
	}
	f, cb := sflow.GetRules(), scb.GetRules()
	if len(f) != len(r.flow) || len(cb) != len(r.cb) {
		b.Fatalf("sentinel: %d flow rules and %d breakers in force, want %d and %d", len(f), len(cb), len(r.flow), len(r.cb))
	}
}

// setRulesFirst loads the rules into a guard, or a sentinel, that has none.
var setRulesFirst = &Shape{
	ID:     "SetRulesFirst",
	Name:   "Load the rules of 20,000 resources, a QPS rule and an error-ratio breaker each, where there were none",
	Serial: true,
	Impls: []Impl{
		{Name: "slidegate Guard.SetRules", Role: Ours, Setup: func(b *testing.B) Op {
			r := slidegateRules(0)
			setGuardRules(b, newRulesGuard(b), r)
			return func() int64 {
				b.StopTimer()
				g := newRulesGuard(b)
				b.StartTimer()
				if g.SetRules(r) != nil {
					return 0
				}
				return 1
			}
		}},
		{Name: "sentinel flow.LoadRules + circuitbreaker.LoadRules", Setup: func(b *testing.B) Op {
			quietSentinel()
			sentinelRelease()
			b.Cleanup(sentinelRelease)
			r := newSentinelRules(0)
			loadSentinel(b, r)
			return func() int64 {
				b.StopTimer()
				sentinelRelease()
				b.StartTimer()
				return b2i(r.load() == nil)
			}
		}},
	},
}

// setRulesSame loads again the rules in force, in new values.
var setRulesSame = reloadShape("SetRulesSame", "Load the same rules of 20,000 resources again (the rules in force, read anew)", 0)

// setRulesChanged loads rules that change every limit and threshold of
// the rules in force.
var setRulesChanged = reloadShape("SetRulesChanged", "Load the rules of 20,000 resources with every limit and threshold changed", 1)

// reloadShape returns a row that puts in force, in turn, the rules of
// seed 0 and those of seed next, in slidegate and in sentinel.
func reloadShape(id, name string, next int) *Shape {
	return &Shape{
		ID:     id,
		Name:   name,
		Serial: true,
		Impls: []Impl{
			{Name: "slidegate Guard.SetRules", Role: Ours, Setup: func(b *testing.B) Op {
				return reloadGuard(b, [2]slidegate.Rules{slidegateRules(0), slidegateRules(next)})
			}},
			{Name: "sentinel flow.LoadRules + circuitbreaker.LoadRules", Setup: func(b *testing.B) Op {
				return reloadSentinel(b, [2]sentinelRules{newSentinelRules(0), newSentinelRules(next)})
			}},
		},
	}
}

// reloadGuard returns an operation that puts rs[1], rs[0], rs[1], ... in
// force in a guard that has rs[0] and rs[1] in force in turn beforehand.
func reloadGuard(b *testing.B, rs [2]slidegate.Rules) Op {
	g := newRulesGuard(b)
	setGuardRules(b, g, rs[1])
	setGuardRules(b, g, rs[0])
	i := 0
	return func() int64 {
		i++
		return b2i(g.SetRules(rs[i%2]) == nil)
	}
}

// reloadSentinel is reloadGuard for sentinel.
func reloadSentinel(b *testing.B, rs [2]sentinelRules) Op {
	quietSentinel()
	sentinelRelease()
	b.Cleanup(sentinelRelease)
	loadSentinel(b, rs[1])
	loadSentinel(b, rs[0])
	i := 0
	return func() int64 {
		i++
		return b2i(rs[i%2].load() == nil)
	}
}
