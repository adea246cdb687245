package compare

import (
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/flowsim"
)

func virtualLimiters() []OverloadLimiter {
	var out []OverloadLimiter
	for _, l := range OverloadLimiters() {
		if !l.RealTime {
			out = append(out, l)
		}
	}
	return out
}

func find(t *testing.T, results []flowsim.OverloadResult, limiter, scenario string) flowsim.OverloadResult {
	t.Helper()
	for _, r := range results {
		if r.Limiter == limiter && r.Scenario == scenario {
			return r
		}
	}
	t.Fatalf("no result for %s, %s", limiter, scenario)
	return flowsim.OverloadResult{}
}

// TestOverloadTableOnVirtualTime runs every virtual-time limiter through
// every scenario, so that the adapters stay in step with the libraries'
// APIs, and checks the references and the table.
func TestOverloadTableOnVirtualTime(t *testing.T) {
	limiters := virtualLimiters()
	scenarios := flowsim.OverloadScenarios()
	results, err := Overload(limiters, scenarios, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(limiters)*len(scenarios) {
		t.Fatalf("%d results, want %d", len(results), len(limiters)*len(scenarios))
	}
	for _, r := range results {
		if r.Offered == 0 || r.Goodput < 0 || r.Goodput > 1.05 || r.Limiter == "" {
			t.Errorf("%s, %s: offered %d, goodput %.3f", r.Limiter, r.Scenario, r.Offered, r.Goodput)
		}
	}
	if r := find(t, results, "none (admit all)", "cold start, 3x"); r.Goodput > 0.05 || len(MissedGoals(r)) == 0 {
		t.Errorf("admit all under 3x: goodput %.3f, goals missed %v: it must collapse", r.Goodput, MissedGoals(r))
	}
	if r := find(t, results, "fixed limit W (reference)", "cold start, 3x"); r.Goodput < 0.97 || r.P99 > 1.25 {
		t.Errorf("fixed limit W under 3x: goodput %.3f, p99 %.2f S", r.Goodput, r.P99)
	}
	// Every adaptive limit is traced.
	for _, l := range limiters {
		r := find(t, results, l.Name, "cold start, 3x")
		adaptive := strings.Contains(l.Name, "slidegate") || strings.Contains(l.Name, "go-concurrency-limits")
		if adaptive && !(r.LimitTrend > 0) {
			t.Errorf("%s: limit trend %v, want a traced limit", l.Name, r.LimitTrend)
		}
	}

	var b strings.Builder
	if err := WriteOverloadTable(&b, limiters, results); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "| **goals (slidegate)** |") || strings.Count(out, "\n| ") != 1+len(results) {
		t.Errorf("table without the goals row or with %d rows:\n%s", strings.Count(out, "\n| "), out)
	}
	for _, l := range limiters {
		if !strings.Contains(out, "- "+l.Name+": ") {
			t.Errorf("the table does not say how %s was driven", l.Name)
		}
	}

	again, err := Overload(limiters, scenarios, 1)
	if err != nil {
		t.Fatal(err)
	}
	var b2 strings.Builder
	if err := WriteOverloadTable(&b2, limiters, again); err != nil {
		t.Fatal(err)
	}
	if b2.String() != out {
		t.Errorf("two runs with one seed differ:\n%s\n%s", out, b2.String())
	}
}

func TestMissedGoals(t *testing.T) {
	good := flowsim.OverloadResult{OfferedShare: 3, Goodput: 0.96, P99: 1.9, Converge: time.Second, Recover: flowsim.NotApplicable, LimitTrend: 1}
	if m := MissedGoals(good); len(m) != 0 {
		t.Errorf("a result meeting every goal misses %v", m)
	}
	bad := flowsim.OverloadResult{OfferedShare: 3, Goodput: 0.9, P99: 2.1, Converge: flowsim.Never, Recover: 6 * time.Second, LimitTrend: 1.2}
	if got := strings.Join(MissedGoals(bad), ","); got != "goodput,p99,converge,recover,grows" {
		t.Errorf("missed %q", got)
	}
	under := flowsim.OverloadResult{OfferedShare: 0.8, Goodput: 0.78, BlockedShare: 0.02, P99: 1.2, Recover: flowsim.NotApplicable, LimitTrend: 1}
	if got := strings.Join(MissedGoals(under), ","); got != "blocked" {
		t.Errorf("below capacity, 2 %% blocked: missed %q, want blocked", got)
	}
}

// TestOverloadGoZeroInRealTime runs the go-zero rows, which read the real
// clock, on a 2 s scenario, so that their adapter stays in step with
// go-zero's API. Only what cannot depend on the machine's timing is checked.
func TestOverloadGoZeroInRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: 2 s")
	}
	var limiters []OverloadLimiter
	for _, l := range OverloadLimiters() {
		if l.RealTime {
			limiters = append(limiters, l)
		}
	}
	if len(limiters) == 0 {
		t.Fatal("no real-time limiter")
	}
	sc := flowsim.OverloadScenarios()[0]
	sc.Duration, sc.MeasureFrom, sc.Sustained = 2*time.Second, time.Second, [2]time.Duration{}
	start := time.Now()
	results, err := Overload(limiters, []flowsim.Scenario{sc}, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Paced by its events, a run ends at its last one, which may come a
	// little before the scenario's end.
	if took := time.Since(start); took < sc.Duration*9/10 {
		t.Errorf("a real-time run of %v took %v", sc.Duration, took)
	}
	for _, r := range results {
		if r.Offered < 1000 || r.Good+r.TimedOut+r.Blocked == 0 {
			t.Errorf("%s: offered %d, good %d, timed out %d, blocked %d", r.Limiter, r.Offered, r.Good, r.TimedOut, r.Blocked)
		}
	}
}
