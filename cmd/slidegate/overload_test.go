package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/rulefile"
)

// The demo's own rules are valid, protect the whole service with a shed
// rule that reads the CPU, and put an adaptive limit on the reports, which
// the demo's overload phase drives over their capacity.
func TestDemoRulesHaveTheOverloadRules(t *testing.T) {
	r, err := rulefile.Parse("demo_rules.yaml", demoRules)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	var shed, adaptive *slidegate.FlowRule
	for i, f := range r.Flow {
		switch {
		case f.Type == slidegate.ShedRule && f.Resource == slidegate.InboundResource:
			shed = &r.Flow[i]
		case f.Type == slidegate.AdaptiveRule && f.Resource == "GET /api/reports":
			adaptive = &r.Flow[i]
		}
	}
	if shed == nil || shed.CPUThreshold <= 0 || adaptive == nil {
		t.Fatalf("the demo's rules lack a shed rule on %s reading the CPU (%+v) or an adaptive rule on the reports (%+v)",
			slidegate.InboundResource, shed, adaptive)
	}
	found := false
	for _, ep := range endpoints {
		found = found || ep.resource == adaptive.Resource
	}
	if !found {
		t.Errorf("no endpoint of the demo is %s, which the adaptive rule limits", adaptive.Resource)
	}
	// With a CPU the rules go in force as they are; without one, a guard
	// refuses the shed rule unless the demo turns its CPU signal off.
	withCPU, err := slidegate.New(slidegate.WithCPU(func() float64 { return 0.5 }))
	if err != nil {
		t.Fatal(err)
	}
	if err := withCPU.SetRules(r); err != nil {
		t.Errorf("a guard with a CPU refuses the demo's rules: %v", err)
	}
	noCPU, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := noCPU.SetRules(r); err == nil {
		t.Errorf("a guard without a CPU took a shed rule that reads one")
	}
	if err := noCPU.SetRules(withoutCPU(r)); err != nil {
		t.Errorf("a guard without a CPU refuses the demo's rules without their CPU signal: %v", err)
	}
	if shed.CPUThreshold == -1 {
		t.Errorf("withoutCPU changed the rules it was given")
	}
}

// The overload rules show in /metrics and on the dashboard.
func TestObserveShowsTheOverloadRules(t *testing.T) {
	r, err := rulefile.Parse("demo_rules.yaml", demoRules)
	if err != nil {
		t.Fatal(err)
	}
	g, err := slidegate.New(slidegate.WithCPU(func() float64 { return 0.25 }))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(r); err != nil {
		t.Fatal(err)
	}
	if err := g.Do(context.Background(), "GET /api/reports", func() error { return nil }, slidegate.WithInbound()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	stop, err := observe(mux, g)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d\n%s", path, resp.StatusCode, body)
		}
		return string(body)
	}
	metrics := get("/metrics")
	for _, want := range []string{
		`slidegate_overload_limit{resource="GET /api/reports",rule="adaptive",type="adaptive"} 20`,
		`slidegate_overload_shedding{resource="(inbound)",rule="shed",type="shed"} 0`,
		`slidegate_cpu_usage_ratio 0.25`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if snap := get("/slidegate/api/snapshot"); !strings.Contains(snap, `"overload":[{`) || !strings.Contains(snap, "GET /api/reports") {
		t.Errorf("the dashboard's snapshot does not show the overload rules:\n%s", snap)
	}
}

// check counts the shed and adaptive rules of a good file, notes each shed
// rule that reads the CPU, and reports bad values of their fields by line.
func TestCheckOverloadRules(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, "flow:\n  - resource: (inbound)\n    type: shed\n  - resource: a\n    type: shed\n    cpu_threshold: -1\n  - resource: b\n    type: adaptive\n")
	code, out, _ := runCmd("check", good)
	want := good + `: note: flow[0] (resource "(inbound)"): the shed rule reads the CPU: the guard must read one (slidegate.WithCPU), or set cpu_threshold: -1
` + good + ": ok: 3 flow rules (2 shed, 1 adaptive), 0 breakers\n"
	if code != 0 || out != want {
		t.Fatalf("check: status %d\n%s\nwant status 0 and\n%s", code, out, want)
	}
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "flow:\n  - resource: (inbound)\n    type: shed\n    cpu_threshold: 2\n  - resource: b\n    type: adaptive\n    algorithm: vegas\n")
	code, out, _ = runCmd("check", bad)
	if code != 1 || !strings.Contains(out, bad+`:4: flow[0] (resource "(inbound)"): cpu_threshold: 2 must be above 0 and at most 1`) ||
		!strings.Contains(out, bad+`:7: flow[1] (resource "b"): algorithm: "vegas" is not "gradient" or "aimd"`) || !strings.HasSuffix(out, bad+": 2 problems\n") {
		t.Fatalf("check bad: status %d\n%s", code, out)
	}
}
