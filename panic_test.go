package slidegate

import (
	"context"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// panickingCluster makes limiters that panic when asked, as a cluster
// client can on a reply it cannot read.
type panickingCluster struct{}

type panickingLimiter struct{}

func (panickingCluster) Limiter(FlowRule) (ClusterLimiter, error) { return panickingLimiter{}, nil }

func (panickingLimiter) AllowN(context.Context, int64) flow.Decision {
	panic("a reply it cannot read")
}

// enterPanics calls Enter and reports whether it panicked with the
// limiter's own panic.
func enterPanics(g *Guard, name string, opts ...EntryOption) (panicked bool) {
	defer func() { panicked = recover() == "a reply it cannot read" }()
	e, err := g.Enter(context.Background(), name, opts...)
	if err == nil {
		e.Exit(nil)
	}
	return false
}

func TestAPanicInALaterPhaseGivesBackWhatEarlierRulesTook(t *testing.T) {
	c := clock.NewManual(0)
	g, err := New(WithCluster(panickingCluster{}), WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	err = g.SetRules(Rules{Flow: []FlowRule{
		{Resource: InboundResource, Type: ShedRule, CPUThreshold: -1},
		{Resource: "a", Type: ConcurrencyRule, Limit: 10},
		{Resource: "a", Type: ThrottleRule, Limit: 1000},
		{Resource: "a", Limit: 1000, Cluster: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		c.Advance(time.Second) // the throttle has a place for each
		if !enterPanics(g, "a", WithInbound()) {
			t.Fatalf("request %d did not panic", i)
		}
	}
	for _, o := range g.Overload() {
		if o.InFlight != 0 {
			t.Errorf("%s: %d in flight after every request panicked, want 0", o.Resource, o.InFlight)
		}
	}
	// Without the panicking rule, the concurrency rule must have all its
	// places: 10 requests held at once are all allowed.
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Type: ConcurrencyRule, Limit: 10}}}); err != nil {
		t.Fatal(err)
	}
	var held []Entry
	for i := range 10 {
		e, err := g.Enter(context.Background(), "a")
		if err != nil {
			t.Fatalf("request %d of 10 under a concurrency limit of 10, after 20 panics: %v", i+1, err)
		}
		held = append(held, e)
	}
	for _, e := range held {
		e.Exit(nil)
	}
}
