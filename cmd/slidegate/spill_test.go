package main

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
	"github.com/slidegate/slidegate/rulefile"
)

// goodput runs the demo's traffic and service, as in the phase at offset
// into the cycle, for d, and returns each other route's requests that
// succeeded a second over the last two thirds of d: the first third lets
// the limits settle.
func goodput(t *testing.T, cpu float64, offset, d time.Duration) map[string]float64 {
	t.Helper()
	rules, err := rulefile.Parse("demo_rules.yaml", demoRules)
	if err != nil {
		t.Fatal(err)
	}
	g, err := slidegate.New(slidegate.WithCPU(func() float64 { return cpu }))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-offset)
	svc := &service{start: start, reportWorkers: make(chan struct{}, reportWorkers)}
	mux := http.NewServeMux()
	mux.Handle("/api/", httpguard.Middleware(g, httpguard.KeyFromHeader(userHeader))(svc.mux()))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		newLoad("http://"+ln.Addr().String()).run(ctx, start)
	}()
	succeeded := func() map[string]int64 {
		m := map[string]int64{}
		for _, ep := range endpoints[:3] {
			s, _ := g.Stats(ep.resource)
			m[ep.resource] = s.Totals.Succeeded
		}
		return m
	}
	time.Sleep(d / 3)
	before, from := succeeded(), time.Now()
	<-done
	after, took := succeeded(), time.Since(from).Seconds()
	out := map[string]float64{}
	for r, n := range after {
		out[r] = float64(n-before[r]) / took
	}
	return out
}

// The reports' overload does not spill onto the other routes: the shed
// rule on (inbound) caps nothing while the CPU is cool, and shares its cap
// among the routes while it is warm, so the orders, searches and payments
// keep what they get without it. (With the CPU read as hot, the shed rule
// holds the whole service to what it completes at its best, a bound of a
// few requests that four routes share at their fair shares.)
func TestTheReportsOverloadLeavesTheOtherRoutesTheirGoodput(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: 12 s")
	}
	for _, cpu := range []float64{0.3, 0.6} {
		steady := goodput(t, cpu, 0, 3*time.Second)
		overload := goodput(t, cpu, 20*time.Second, 3*time.Second)
		for r, before := range steady {
			t.Logf("CPU %.0f%%: %s: %.0f succeeded a second in the steady phase, %.0f while the reports are overloaded", 100*cpu, r, before, overload[r])
			if overload[r] < 0.9*before {
				t.Errorf("CPU %.0f%%: %s: %.0f succeeded a second while the reports are overloaded, under 90%% of the %.0f without", 100*cpu, r, overload[r], before)
			}
		}
	}
}
