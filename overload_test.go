package slidegate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"

	"github.com/slidegate/slidegate/internal/flowlimits"
)

// fakeCPU is a CPU reading a test sets.
type fakeCPU struct{ v atomic.Uint64 }

func (c *fakeCPU) set(v float64)  { c.v.Store(math.Float64bits(v)) }
func (c *fakeCPU) usage() float64 { return math.Float64frombits(c.v.Load()) }

// serve sends n requests to resource at now, each taking rt, ending in
// order; it fails the test if one is blocked.
func serve(t *testing.T, g *Guard, now int64, resource string, n int, rt time.Duration, err error, opts ...EntryOption) {
	t.Helper()
	es := make([]Entry, n)
	for i := range es {
		e, berr := g.EnterAt(bg, now, resource, opts...)
		if berr != nil {
			t.Fatalf("request %d of %d to %s: %v", i, n, resource, berr)
		}
		es[i] = e
	}
	for _, e := range es {
		e.ExitAt(now+int64(rt), err)
	}
}

// A shed rule on InboundResource holds for every inbound request, whatever
// its resource, and for no outbound one.
func TestShedRuleOnInboundHoldsForTheWholeService(t *testing.T) {
	cpu := new(fakeCPU)
	g, clk := newGuard(t, Rules{Flow: []FlowRule{
		{Resource: "a", Limit: 1000},
		{Resource: InboundResource, Type: ShedRule, CPUThreshold: 0.8},
	}}, WithCPU(cpu.usage))
	now := clk.Now()
	// 20 requests a bucket, 10 ms each: 2 in flight at the service's best.
	serve(t, g, now, "a", 10, 10*time.Millisecond, nil, WithInbound())
	serve(t, g, now, "b", 10, 10*time.Millisecond, nil, WithInbound())
	now += int64(100 * time.Millisecond)
	if st := g.OverloadAt(now); len(st) != 1 || st[0].Limit != 2 || st[0].Rule != "shed" || st[0].Type != ShedRule || st[0].Shedding || st[0].CPU != 0 {
		t.Fatalf("status %+v, want shed, a limit of 2, not shedding, CPU 0", st)
	}
	cpu.set(0.9)
	a, err := g.EnterAt(bg, now, "a", WithInbound())
	if err != nil {
		t.Fatal(err)
	}
	a2, err := g.EnterAt(bg, now, "a", WithInbound())
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.EnterAt(bg, now, "a", WithInbound())
	var be *BlockError
	if !errors.As(err, &be) || be.Reason != flow.Overloaded || be.Resource != "a" || be.Rule != "shed" {
		t.Fatalf("a third inbound request to a at a bound of 2: %v, want blocked as overloaded by shed", err)
	}
	if s, _ := g.StatsAt(now, "a"); s.Blocked != 1 || s.Totals.BlockedBy[flow.Overloaded] != 1 {
		t.Fatalf("stats of a: %+v, want one request blocked as overloaded", s)
	}
	// The bound is shared among resources: b holds nothing, and gets its
	// share.
	b, err := g.EnterAt(bg, now, "b", WithInbound())
	if err != nil {
		t.Fatalf("an inbound request to b while a holds the whole bound: %v", err)
	}
	// Outbound requests are not the service's load.
	if e, err := g.EnterAt(bg, now, "c"); err != nil {
		t.Fatalf("an outbound request: %v", err)
	} else {
		e.ExitAt(now, nil)
	}
	for _, e := range []Entry{a, a2, b} {
		e.ExitAt(now+int64(time.Millisecond), nil)
	}
	if st := g.OverloadAt(now); !st[0].Shedding || st[0].CPU != 0.9 || st[0].InFlight != 0 {
		t.Fatalf("status %+v, want shedding at CPU 0.9, nothing in flight", st)
	}
}

// A request the resource's own rule blocks gives its place back to the
// inbound rule that allowed it, and is no sample of the service.
func TestAResourceRuleThatBlocksGivesBackTheInboundPlace(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{
		{Resource: InboundResource, Type: AdaptiveRule, Limit: 10},
		{Resource: "a", Limit: 0},
	}})
	for range 20 {
		if _, err := g.EnterAt(bg, clk.Now(), "a", WithInbound()); !errors.Is(err, flow.ErrBlocked) {
			t.Fatalf("a request to a resource limited to 0: %v", err)
		}
	}
	if st := g.Overload(); st[0].InFlight != 0 || st[0].Limit != 10 {
		t.Fatalf("status %+v, want nothing in flight, the limit of 10", st)
	}
}

func TestShedRuleNeedsTheGuardsCPU(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Type: ShedRule}}})
	if err == nil || !strings.Contains(err.Error(), "cpu_threshold") || !strings.Contains(err.Error(), "WithCPU") {
		t.Fatalf("a shed rule in a guard without a CPU: %v, want an error naming cpu_threshold and WithCPU", err)
	}
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Type: ShedRule, CPUThreshold: -1}}}); err != nil {
		t.Fatalf("a shed rule without a CPU signal: %v", err)
	}
	if _, err := New(WithCPU(nil)); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("WithCPU(nil): %v", err)
	}
}

// An adaptive rule backs off when requests end overloaded: a deadline
// exceeded, or an error that says so.
func TestAdaptiveRuleBacksOffOnOverloadedExits(t *testing.T) {
	for _, end := range []error{context.DeadlineExceeded, fmt.Errorf("call: %w", context.DeadlineExceeded), overloadedErr{}, timeoutErr{}} {
		g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Type: AdaptiveRule, Limit: 100}}})
		now := clk.Now()
		serve(t, g, now, "a", 10, 5*time.Millisecond, end)
		serve(t, g, now+int64(200*time.Millisecond), "a", 1, time.Millisecond, nil) // closes the window
		if st := g.Overload(); st[0].Limit != 80 {
			t.Errorf("after requests ended with %v: limit %d, want 80", end, st[0].Limit)
		}
	}
	// Other errors are no samples: quick errors among slow successes must
	// not make the service look faster than it is.
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Type: AdaptiveRule, Limit: 100}}})
	now := clk.Now()
	serve(t, g, now, "a", 60, 20*time.Microsecond, errors.New("boom"))
	serve(t, g, now+int64(10*time.Millisecond), "a", 60, 10*time.Millisecond, nil)
	serve(t, g, now+int64(200*time.Millisecond), "a", 1, time.Millisecond, nil) // closes the window
	if st := g.Overload(); st[0].Limit != 200 || math.Abs(float64(st[0].Baseline-10*time.Millisecond)) > 0.0443*float64(10*time.Millisecond) {
		t.Errorf("after quick failures and slow successes: %+v, want a limit of 200 (slow start) and a baseline of 10ms", st[0])
	}
}

// A timeout whose error says it is context.DeadlineExceeded through an Is
// method (net/http's client timeout) is an overload.
type timeoutErr struct{}

func (timeoutErr) Error() string        { return "client timeout" }
func (timeoutErr) Is(target error) bool { return target == context.DeadlineExceeded }
func TestIsOverloadedAsksIsMethods(t *testing.T) {
	for _, err := range []error{timeoutErr{}, fmt.Errorf("get: %w", timeoutErr{}), errors.Join(errBoom, timeoutErr{})} {
		if !IsOverloaded(err) {
			t.Errorf("IsOverloaded(%v) = false, want true: errors.Is says %v", err, errors.Is(err, context.DeadlineExceeded))
		}
	}
	for _, err := range []error{nil, errBoom, context.Canceled, fmt.Errorf("x: %w", errBoom)} {
		if IsOverloaded(err) {
			t.Errorf("IsOverloaded(%v) = true", err)
		}
	}
}

var (
	errBoom    = errors.New("boom")
	errWrapped = fmt.Errorf("call: %w", errors.Join(errBoom, overloadedErr{}))
)

type overloadedErr struct{}

func (overloadedErr) Error() string    { return "503" }
func (overloadedErr) Overloaded() bool { return true }

// Setting the same rules again keeps what an adaptive rule learnt.
func TestReloadKeepsAnAdaptiveLimit(t *testing.T) {
	rules := Rules{Flow: []FlowRule{{Resource: "a", Type: AdaptiveRule, Limit: 100}}}
	g, clk := newGuard(t, rules)
	serve(t, g, clk.Now(), "a", 10, time.Millisecond, context.DeadlineExceeded)
	serve(t, g, clk.Now()+int64(200*time.Millisecond), "a", 1, time.Millisecond, nil)
	// The same rule with its defaults written out is the same rule.
	same := Rules{Flow: []FlowRule{{Resource: "a", Type: AdaptiveRule, Limit: 100, Algorithm: "gradient",
		MinLimit: flowlimits.DefaultAdaptiveMinLimit, MaxLimit: flowlimits.DefaultAdaptiveMaxLimit, Tolerance: flowlimits.DefaultAdaptiveTolerance}}}
	if err := g.SetRules(same); err != nil {
		t.Fatal(err)
	}
	if st := g.Overload(); st[0].Limit != 80 {
		t.Fatalf("limit after reloading the same rule: %d, want the 80 it had learnt", st[0].Limit)
	}
}

// A reload that changes only an adaptive rule's starting limit keeps what
// it learnt; one that changes its bounds starts afresh.
func TestReloadWithAnotherStartKeepsAnAdaptiveLimit(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Type: AdaptiveRule, Limit: 100}}})
	serve(t, g, clk.Now(), "a", 10, time.Millisecond, context.DeadlineExceeded)
	serve(t, g, clk.Now()+int64(200*time.Millisecond), "a", 1, time.Millisecond, nil)
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Type: AdaptiveRule, Limit: 50}}}); err != nil {
		t.Fatal(err)
	}
	if st := g.Overload(); st[0].Limit != 80 {
		t.Fatalf("limit after a reload with another start: %d, want the 80 it had learnt", st[0].Limit)
	}
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Type: AdaptiveRule, Limit: 50, MaxLimit: 60}}}); err != nil {
		t.Fatal(err)
	}
	if st := g.Overload(); st[0].Limit != 50 {
		t.Fatalf("limit after a reload with other bounds: %d, want the new start, 50", st[0].Limit)
	}
}

func TestOverloadRulesAreValidated(t *testing.T) {
	for _, c := range []struct {
		rule  FlowRule
		field string
	}{
		{FlowRule{Resource: "a", Type: ShedRule, Limit: 5}, "limit"},
		{FlowRule{Resource: "a", Type: ShedRule, CPUThreshold: 1.5}, "cpu_threshold"},
		{FlowRule{Resource: "a", Type: ShedRule, CPUThreshold: -0.5}, "cpu_threshold"},
		{FlowRule{Resource: "a", Type: ShedRule, Buckets: 1}, "buckets"},
		{FlowRule{Resource: "a", Type: ShedRule, PerKey: true}, "per_key"},
		{FlowRule{Resource: "a", Type: ShedRule, Algorithm: "aimd"}, "algorithm"},
		{FlowRule{Resource: "a", Type: AdaptiveRule, Algorithm: "vegas"}, "algorithm"},
		{FlowRule{Resource: "a", Type: AdaptiveRule, Interval: Duration(time.Second)}, "interval"},
		{FlowRule{Resource: "a", Type: AdaptiveRule, CPUThreshold: 0.5}, "cpu_threshold"},
		{FlowRule{Resource: "a", Type: AdaptiveRule, MinLimit: -1}, "min_limit"},
		{FlowRule{Resource: "a", Type: AdaptiveRule, MinLimit: 10, MaxLimit: 5}, "max_limit"},
		{FlowRule{Resource: "a", Type: AdaptiveRule, Limit: 3, MinLimit: 5}, "limit"},
		{FlowRule{Resource: "a", Type: AdaptiveRule, Tolerance: 0.5}, "tolerance"},
		{FlowRule{Resource: "a", Type: AdaptiveRule, Cluster: true}, "cluster"},
		{FlowRule{Resource: "a", MinLimit: 3}, "min_limit"},
		{FlowRule{Resource: InboundResource, Limit: 5, PerKey: true}, "resource"},
		{FlowRule{Resource: "a", Limit: 5, RefResource: InboundResource}, "ref_resource"},
	} {
		err := Rules{Flow: []FlowRule{c.rule}}.Validate()
		var re *RulesError
		if !errors.As(err, &re) || !hasField(re, c.field) {
			t.Errorf("%+v: %v, want a problem with field %s", c.rule, err, c.field)
		}
	}
	err := Rules{Breakers: []BreakerRule{{Resource: InboundResource, Strategy: SREBreaker}}}.Validate()
	var re *RulesError
	if !errors.As(err, &re) || !hasField(re, "resource") {
		t.Errorf("a breaker on %s: %v, want a problem with its resource", InboundResource, err)
	}
}

func hasField(re *RulesError, field string) bool {
	for _, p := range re.Problems {
		if p.Field == field {
			return true
		}
	}
	return false
}

func TestOverloadRulesAllocateNothing(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector makes sync.Pool drop entries; make test runs this test without it (make allocs)")
	}
	cpu := new(fakeCPU)
	cpu.set(1)
	g, _ := newGuard(t, Rules{Flow: []FlowRule{
		{Resource: InboundResource, Type: ShedRule},
		{Resource: "a", Type: AdaptiveRule, Limit: 1000, MaxLimit: 1000},
	}}, WithCPU(cpu.usage))
	mustEnter(t, g, "a", WithInbound()).Exit(nil)
	for name, f := range map[string]func(){
		"succeeded":  func() { e, _ := g.Enter(bg, "a", WithInbound()); e.Exit(nil) },
		"overloaded": func() { e, _ := g.Enter(bg, "a", WithInbound()); e.Exit(context.DeadlineExceeded) },
		"failed":     func() { e, _ := g.Enter(bg, "a", WithInbound()); e.Exit(errBoom) },
		"wrapped":    func() { e, _ := g.Enter(bg, "a", WithInbound()); e.Exit(errWrapped) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per Enter+Exit", name, n)
		}
	}
}
