package metrics_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/metrics"
)

// overloadFamilies are the families of a guard with shed and adaptive
// rules, the CPU among them when a shed rule reads it.
var overloadFamilies = []string{
	"cpu_usage_ratio",
	"overload_baseline_seconds",
	"overload_cap",
	"overload_in_flight",
	"overload_limit",
	"overload_shedding",
}

// fakeCPU is a CPU usage the test sets, read by the guard through
// slidegate.WithCPU.
type fakeCPU struct{ bits atomic.Uint64 }

func (c *fakeCPU) set(v float64)  { c.bits.Store(math.Float64bits(v)) }
func (c *fakeCPU) usage() float64 { return math.Float64frombits(c.bits.Load()) }

// overloadGuard makes a guard on a manual clock with a CPU the test sets and
// these rules:
//
//	flow[0]  orders     qps 100          (no overload family)
//	flow[1]  (inbound)  shed at CPU ≥ 0.8
//	flow[2]  orders     adaptive from 20
//	flow[3]  search     shed without a CPU signal
func overloadGuard(t *testing.T) (*slidegate.Guard, *clock.Manual, *fakeCPU) {
	t.Helper()
	clk := clock.NewManual(start)
	cpu := new(fakeCPU)
	g := newGuard(t, slidegate.WithClock(clk), slidegate.WithCPU(cpu.usage))
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "orders", Limit: 100},
		{Resource: slidegate.InboundResource, Type: slidegate.ShedRule, CPUThreshold: 0.8},
		{Resource: "orders", Type: slidegate.AdaptiveRule, Limit: 20},
		{Resource: "search", Type: slidegate.ShedRule, CPUThreshold: -1},
	}}); err != nil {
		t.Fatal(err)
	}
	return g, clk, cpu
}

// serve sends n inbound requests to resource at the clock's time, each
// taking rt, and ends them in order; it fails the test if one is blocked.
func serve(t *testing.T, g *slidegate.Guard, clk *clock.Manual, resource string, n int, rt time.Duration) {
	t.Helper()
	es := make([]slidegate.Entry, n)
	for i := range es {
		e, err := g.EnterAt(context.Background(), clk.Now(), resource, slidegate.WithInbound())
		if err != nil {
			t.Fatalf("request %d of %d to %s: %v", i, n, resource, err)
		}
		es[i] = e
	}
	for _, e := range es {
		e.ExitAt(clk.Now()+int64(rt), nil)
	}
}

func TestScrapeShowsTheOverloadRules(t *testing.T) {
	g, clk, cpu := overloadGuard(t)
	s := newScraper(t, metrics.NewCollector(g))

	// Nothing learnt yet: the shed rules have no limit, the adaptive one
	// its first, and no baseline.
	cpu.set(0.5)
	f := s.scrape(t)
	inbound := labels("resource", "(inbound)", "rule", "shed", "type", "shed")
	adaptive := labels("resource", "orders", "rule", "adaptive", "type", "adaptive")
	search := labels("resource", "search", "rule", "shed", "type", "shed")
	for _, name := range []string{"slidegate_overload_limit", "slidegate_overload_baseline_seconds"} {
		for _, l := range []map[string]string{inbound, search} {
			if m := f.find(name, l); m != nil {
				t.Errorf("%s%v = %v before the rule learnt anything, want no series", name, l, m.GetGauge().GetValue())
			}
		}
	}
	if m := f.find("slidegate_overload_baseline_seconds", adaptive); m != nil {
		t.Errorf("the adaptive rule's baseline before any request ended: %v, want no series", m.GetGauge().GetValue())
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"slidegate_overload_limit", adaptive, 20},
		{"slidegate_overload_in_flight", adaptive, 0},
		{"slidegate_overload_in_flight", inbound, 0},
		{"slidegate_overload_shedding", inbound, 0},
		{"slidegate_overload_shedding", search, 0}, // without a CPU signal it never sheds
		{"slidegate_cpu_usage_ratio", labels(), 0.5},
	} {
		if got := f.value(t, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	// 20 requests of 10 ms to orders and 20 to search in one bucket of
	// 100 ms: the inbound rule sees 40 at 10 ms, 4 in flight at the
	// service's best; search's rule 20, 2 in flight. The adaptive rule
	// learns its baseline once a request ends after its first window.
	serve(t, g, clk, "orders", 20, 10*time.Millisecond)
	serve(t, g, clk, "search", 20, 10*time.Millisecond)
	clk.Advance(200 * time.Millisecond)
	serve(t, g, clk, "orders", 1, 10*time.Millisecond) // closes the adaptive rule's window
	cpu.set(0.9)
	held, err := g.Enter(context.Background(), "orders", slidegate.WithInbound())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Exit(nil)

	f = s.scrape(t)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"slidegate_overload_limit", inbound, 4},
		{"slidegate_overload_limit", search, 2},
		{"slidegate_overload_in_flight", inbound, 1},
		{"slidegate_overload_in_flight", adaptive, 1},
		{"slidegate_overload_in_flight", search, 0},
		{"slidegate_overload_shedding", inbound, 1},
		{"slidegate_overload_baseline_seconds", adaptive, 0.010},
		{"slidegate_cpu_usage_ratio", labels(), 0.9},
	} {
		if got := f.value(t, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	st := g.Overload()
	for i, l := range []map[string]string{inbound, adaptive, search} {
		if st[i].Cap < 0 {
			t.Errorf("rule %v caps nothing with the CPU at its threshold: %+v", l, st[i])
			continue
		}
		if got := f.value(t, "slidegate_overload_cap", l); got != float64(st[i].Cap) {
			t.Errorf("slidegate_overload_cap%v = %v, want the guard's cap %d", l, got, st[i].Cap)
		}
	}
	if got := f.value(t, "slidegate_overload_limit", adaptive); got != float64(st[1].Limit) {
		t.Errorf("the adaptive rule's limit = %v, want the guard's %d", got, st[1].Limit)
	}
	// One series per overload rule, none for the QPS rule, and the CPU
	// once however many shed rules read it.
	for name, n := range map[string]int{
		"slidegate_overload_limit":            3,
		"slidegate_overload_in_flight":        3,
		"slidegate_overload_shedding":         2, // the shed rules
		"slidegate_overload_baseline_seconds": 1, // the adaptive rule
		"slidegate_cpu_usage_ratio":           1,
	} {
		if got := len(f[name].GetMetric()); got != n {
			t.Errorf("%s has %d series, want %d", name, got, n)
		}
	}
	for _, name := range overloadFamilies {
		if f["slidegate_"+name].GetHelp() == "" {
			t.Errorf("slidegate_%s has no help", name)
		}
	}

	// The cool-off: a second after the CPU came down, the rule still
	// sheds if it shed; once it is over, it does not.
	// With one in flight, 3 more inbound requests fill the bound of 4 and
	// the next is shed.
	shed := 0
	for range 4 {
		_, err := g.Enter(context.Background(), "orders", slidegate.WithInbound())
		var be *slidegate.BlockError
		switch {
		case errors.As(err, &be) && be.Reason == flow.Overloaded:
			shed++
		case err != nil:
			t.Fatal(err)
		}
	}
	if shed != 1 {
		t.Fatalf("%d of 4 requests shed at a bound of 4 with 1 in flight, want 1", shed)
	}
	cpu.set(0.1)
	if got := s.scrape(t).value(t, "slidegate_overload_shedding", inbound); got != 1 {
		t.Errorf("shedding within the cool-off = %v, want 1", got)
	}
	clk.Advance(2 * time.Second)
	if got := s.scrape(t).value(t, "slidegate_overload_shedding", inbound); got != 0 {
		t.Errorf("shedding after the cool-off at CPU 0.1 = %v, want 0", got)
	}
}

// A guard whose shed rules read no CPU exports no CPU: a usage of 0 would
// say the process is idle.
func TestNoCPUWithoutAShedRuleThatReadsIt(t *testing.T) {
	for _, c := range []struct {
		name  string
		rules []slidegate.FlowRule
	}{
		{"no rules", nil},
		{"an adaptive rule", []slidegate.FlowRule{{Resource: "a", Type: slidegate.AdaptiveRule}}},
		{"a shed rule without a CPU signal", []slidegate.FlowRule{{Resource: "a", Type: slidegate.ShedRule, CPUThreshold: -1}}},
	} {
		cpu := new(fakeCPU)
		cpu.set(0.7)
		g := newGuard(t, slidegate.WithClock(clock.NewManual(start)), slidegate.WithCPU(cpu.usage))
		if err := g.SetRules(slidegate.Rules{Flow: c.rules}); err != nil {
			t.Fatal(err)
		}
		if fam := newScraper(t, metrics.NewCollector(g)).scrape(t)["slidegate_cpu_usage_ratio"]; fam != nil {
			t.Errorf("%s: the scrape has slidegate_cpu_usage_ratio %v, want none", c.name, fam.GetMetric())
		}
	}
}

// A CPU reading that is not a number, or out of [0, 1], is exported as it
// is read: the scrape does not fail for it. A hostile resource name is
// made valid UTF-8, as in the other families.
func TestOverloadFamiliesTakeAnyReadingAndAnyName(t *testing.T) {
	cpu := new(fakeCPU)
	cpu.set(math.NaN())
	g := newGuard(t, slidegate.WithClock(clock.NewManual(start)), slidegate.WithCPU(cpu.usage))
	bad := "a\xff\xfe"
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: bad, Type: slidegate.ShedRule},
		{Resource: bad, Type: slidegate.AdaptiveRule},
	}}); err != nil {
		t.Fatal(err)
	}
	s := newScraper(t, metrics.NewCollector(g))
	f := s.scrape(t)
	if got := f.value(t, "slidegate_cpu_usage_ratio", labels()); !math.IsNaN(got) {
		t.Errorf("slidegate_cpu_usage_ratio = %v, want NaN as read", got)
	}
	if got := f.labelValues("slidegate_overload_in_flight", "resource"); len(got) != 2 || got[0] != "a\uFFFD" || got[1] != got[0] {
		t.Errorf("resources %q, want the name made valid UTF-8 (\"a\\uFFFD\") twice", got)
	}
	cpu.set(7)
	if got := s.scrape(t).value(t, "slidegate_cpu_usage_ratio", labels()); got != 7 {
		t.Errorf("slidegate_cpu_usage_ratio = %v, want 7 as read", got)
	}
}

// A shed rule has no limit of its own and an adaptive rule's moves: the
// rules' family leaves them out (a limit of 0 would read as blocking
// everything), and overload_limit says what they allow now.
func TestFlowRuleLimitLeavesOutTheOverloadRules(t *testing.T) {
	g, _, _ := overloadGuard(t)
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	if got := f.labelValues("slidegate_flow_rule_limit", "rule"); len(got) != 1 || got[0] != "qps" {
		t.Errorf("slidegate_flow_rule_limit has the rules %q, want only the QPS rule qps", got)
	}
}

// The help of the blocked families lists every value of the label reason.
func TestBlockedHelpNamesEveryReason(t *testing.T) {
	g, _ := knownTraffic(t)
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	for _, name := range []string{"slidegate_requests_blocked_total", "slidegate_inbound_requests_blocked_total"} {
		help := f[name].GetHelp()
		for _, reason := range reasonLabels {
			if !strings.Contains(help, reason) {
				t.Errorf("%s's help %q does not name the reason %s", name, help, reason)
			}
		}
	}
}

func TestOverloadLintFindsNoProblems(t *testing.T) {
	g, clk, cpu := overloadGuard(t)
	serve(t, g, clk, "orders", 20, 10*time.Millisecond)
	clk.Advance(200 * time.Millisecond)
	cpu.set(0.3)
	problems, err := testutil.CollectAndLint(metrics.NewCollector(g))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
