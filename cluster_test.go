package slidegate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// fakeCluster keeps cluster rules' counts in local limiters, and records
// what the guard asks of it.
type fakeCluster struct {
	made  []FlowRule
	calls []string // the resources decided, in order
}

type fakeLimiter struct {
	c    *fakeCluster
	name string
	q    *flow.QPS
	ctx  context.Context
}

func (c *fakeCluster) Limiter(r FlowRule) (ClusterLimiter, error) {
	if r.Limit == 13 {
		return nil, errors.New("13 is unlucky")
	}
	c.made = append(c.made, r)
	q, err := flow.NewQPS(flow.QPSSettings{Limit: r.Limit, Interval: time.Duration(r.Interval), Buckets: r.Buckets, Clock: clock.NewManual(0)})
	return &fakeLimiter{c: c, name: r.Resource, q: q}, err
}

func (l *fakeLimiter) AllowN(ctx context.Context, n int64) flow.Decision {
	l.c.calls = append(l.c.calls, l.name)
	l.ctx = ctx
	return l.q.AllowNAt(0, n)
}

func (l *fakeLimiter) SetLimit(n int64) error { return l.q.SetLimit(n) }

func TestClusterRulesNeedACluster(t *testing.T) {
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	err = g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, Cluster: true}}})
	var re *RulesError
	if !errors.As(err, &re) || len(re.Problems) != 1 || re.Problems[0].Field != "cluster" || !strings.Contains(err.Error(), "WithCluster") {
		t.Fatalf("SetRules without a cluster: %v; want a problem with the cluster field naming WithCluster", err)
	}
	if len(g.Rules().Flow) != 0 {
		t.Error("the refused rules are in force")
	}
}

func TestClusterRulesDecideThroughTheCluster(t *testing.T) {
	fc := &fakeCluster{}
	m := clock.NewManual(0)
	g, err := New(WithCluster(fc), WithClock(m))
	if err != nil {
		t.Fatal(err)
	}
	rules := Rules{Flow: []FlowRule{
		{Resource: "a", Limit: 3, Cluster: true, Lease: 5},
		{Resource: "a", Limit: 2, Interval: Duration(time.Minute)}, // local, checked first
	}}
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	if len(fc.made) != 1 || fc.made[0].Interval != Duration(time.Second) || fc.made[0].Buckets != flowlimits.DefaultBuckets || fc.made[0].Lease != 5 {
		t.Fatalf("the cluster was asked for %+v; want one rule with its interval and buckets set", fc.made)
	}
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, 1)
	for range 2 {
		e, err := g.Enter(ctx, "a", WithCount(1))
		if err != nil {
			t.Fatal(err)
		}
		e.Exit(nil)
	}
	// The local rule refuses the third: the cluster is not asked, so
	// no shared permit is spent on it.
	_, err = g.Enter(ctx, "a")
	var be *BlockError
	if !errors.As(err, &be) || be.Rule != "qps_2" {
		t.Fatalf("third Enter: %v; want a block by the local rule qps_2", err)
	}
	if len(fc.calls) != 2 {
		t.Errorf("the cluster decided %d requests; want 2", len(fc.calls))
	}
	if l := g.snap.Load().flows[0].(*clusterRule).l.(*fakeLimiter); l.ctx != ctx {
		t.Error("the cluster limiter did not get Enter's context")
	}

	// A new limit keeps the cluster limiter; a refusal comes back as a
	// block by the cluster rule.
	rules.Flow[0].Limit, rules.Flow[1].Limit = 2, 10
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	if len(fc.made) != 1 {
		t.Errorf("the cluster made %d limiters; want the first kept, with its new limit", len(fc.made))
	}
	_, err = g.Enter(ctx, "a")
	if !errors.As(err, &be) || be.Rule != "qps" || be.Reason != flow.RateLimited {
		t.Fatalf("Enter over the cluster limit: %v; want a block by qps, rate limited", err)
	}
	if st, _ := g.Stats("a"); st.Allowed != 2 || st.Blocked != 2 {
		t.Errorf("stats %+v; want 2 passed, 2 blocked", st)
	}

	// What the cluster refuses to make is a problem of the rule; the rules
	// in force stay.
	err = g.SetRules(Rules{Flow: []FlowRule{{Resource: "b", Limit: 13, Cluster: true}}})
	if err == nil || !strings.Contains(err.Error(), `flow[0] (resource "b"): 13 is unlucky`) {
		t.Fatalf("SetRules: %v; want the cluster's error with the rule's place", err)
	}
	if len(g.Rules().Flow) != 2 {
		t.Error("the rules in force were lost")
	}
}

func TestValidateChecksWhatEveryClusterCanKeep(t *testing.T) {
	err := Rules{Flow: []FlowRule{
		{Resource: "a", Limit: 1, Cluster: true, Buckets: bounds.MaxClusterBuckets + 1, Interval: Duration(time.Hour)},
		{Resource: "b", Limit: 1, Cluster: true, Buckets: 7},
		{Resource: "c", Limit: 1, Cluster: true, Buckets: bounds.MaxClusterBuckets, Interval: Duration(time.Second)},
	}}.Validate()
	var re *RulesError
	if !errors.As(err, &re) || len(re.Problems) != 2 {
		t.Fatalf("Validate: %v, want 2 problems", err)
	}
	if p := re.Problems[0]; p.Rule != "flow[0]" || p.Field != "buckets" {
		t.Errorf("first problem: %v, want flow[0]'s buckets", p)
	}
	if p := re.Problems[1]; p.Rule != "flow[1]" || p.Field != "interval" || !strings.Contains(p.Reason, "microseconds") {
		t.Errorf("second problem: %v, want flow[1]'s interval, for its bucket widths", p)
	}
}

func TestSetRulesReportsEveryRuleTheClusterRefuses(t *testing.T) {
	g, err := New(WithCluster(refusingCluster{}))
	if err != nil {
		t.Fatal(err)
	}
	err = g.SetRules(Rules{Flow: []FlowRule{
		{Resource: "a", Limit: 1, Cluster: true},
		{Resource: "b", Limit: 1},
		{Resource: "c", Limit: 1, Cluster: true},
	}})
	var re *RulesError
	if !errors.As(err, &re) || len(re.Problems) != 2 || re.Problems[0].Rule != "flow[0]" || re.Problems[1].Rule != "flow[2]" {
		t.Fatalf("SetRules: %v, want the 2 cluster rules' problems", err)
	}
	if _, ok := g.Stats("b"); ok {
		t.Error("rules refused, but the resource of one of them was made")
	}
}

type refusingCluster struct{}

func (refusingCluster) Limiter(r FlowRule) (ClusterLimiter, error) {
	return nil, errors.New("no room for " + r.Resource)
}
