package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/middleware/httpguard"
	"github.com/slidegate/slidegate/rulefile"
)

// The demo's line tells the requests blocked with 429 Too Many Requests
// (a limit the client reached) from those blocked with 503 Service
// Unavailable (the service overloaded), as the clients got them, and shows
// an adaptive limit beside the most requests in flight under it.
func TestTheReportLineTellsTooManyRequestsFromServiceUnavailable(t *testing.T) {
	clk := clock.NewManual(0)
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	const res = "GET /api/reports"
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: res, Limit: 5},
		{Resource: res, Type: slidegate.AdaptiveRule, Limit: 1, MinLimit: 1, MaxLimit: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	got := map[int]int64{} // the statuses the clients were answered with
	enter := func() (slidegate.Entry, bool) {
		e, err := g.Enter(context.Background(), res, slidegate.WithInbound())
		if err != nil {
			status, _ := httpguard.BlockedStatus(err)
			got[status]++
			return e, false
		}
		return e, true
	}
	// One request holds the adaptive limit of 1: three more are blocked
	// as overloaded. Then four more go one after the other, and four
	// find the QPS limit of 5 reached.
	held, ok := enter()
	if !ok {
		t.Fatal("the first request was blocked")
	}
	for range 3 {
		enter()
	}
	held.Exit(nil)
	for range 8 {
		if e, ok := enter(); ok {
			e.Exit(nil)
		}
	}
	if got[http.StatusTooManyRequests] != 4 || got[http.StatusServiceUnavailable] != 3 {
		t.Fatalf("the clients got %v, want four 429s and three 503s", got)
	}
	s, _ := g.Stats(res)
	line := routeSecond{name: "reports", d: s.Totals, p99: s.P99, limit: 20, peak: 7}.format(1)
	for _, want := range []string{
		fmt.Sprintf("%3d 429s", got[http.StatusTooManyRequests]),
		fmt.Sprintf("%3d 503s", got[http.StatusServiceUnavailable]),
		"limit 20, 7 in flight",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("the line %q lacks %q", line, want)
		}
	}
}

// The reports' overload brings their adaptive limit down and gets the
// excess 503. After it the limit holds the reports' traffic: no report is
// blocked, and the limit stays above the most in flight, which is why it
// grows no further. The rules file must not say that the limit goes back
// to where it started unless it does. Replayed on a manual clock.
func TestAfterTheOverloadTheAdaptiveLimitHoldsTheReportsTraffic(t *testing.T) {
	r, err := rulefile.Parse("demo_rules.yaml", demoRules)
	if err != nil {
		t.Fatal(err)
	}
	var start int64
	for _, f := range r.Flow {
		if f.Type == slidegate.AdaptiveRule && f.Resource == "GET /api/reports" {
			start = f.Limit
		}
	}
	const overload, recovery = 6 * time.Second, 10 * time.Second
	script := func(d time.Duration) *phase {
		if d < overload {
			return &phases[4]
		}
		return &phases[5]
	}
	for seed := range uint64(3) {
		steps := replayDemo(t, func() float64 { return 0.3 }, script, overload+recovery, seed).reports
		// The recovery is judged from a second in: the overload's queue
		// has drained by then.
		var low, peak int64 = start, 0
		var overloaded, settled, last adaptiveStep
		for _, s := range steps {
			switch {
			case s.at < overload:
				low, overloaded = min(low, s.limit), s
			case s.at < overload+time.Second:
				settled = s
			default:
				peak = max(peak, s.inFlight)
			}
			last = s
		}
		if low >= start || overloaded.overload == 0 {
			t.Fatalf("seed %d: in the overload the limit went from %d down to %d only, and %d reports were blocked as overloaded", seed, start, low, overloaded.overload)
		}
		if blocked := last.blocked - settled.blocked; blocked > 0 {
			t.Errorf("seed %d: %d reports blocked in the recovery, the limit at %d", seed, blocked, last.limit)
		}
		if last.limit <= peak {
			t.Errorf("seed %d: the limit ends at %d, not above the %d reports in flight at most in the recovery", seed, last.limit, peak)
		}
		if last.limit < start && strings.Contains(string(demoRules), "limit recovers") {
			t.Errorf("seed %d: the rules file says the limit recovers; it ends the recovery at %d, from %d before the overload", seed, last.limit, start)
		}
	}
}

// The summary counts the keys that per-key rules blocked over the whole
// run, not over their last two intervals: a run whose last seconds are
// quiet still names the abusive user with all its blocks. A blocked
// request is answered in JSON, with its status and Retry-After, and
// without its key.
func TestTheSummaryCountsTheKeysBlockedOverTheWholeRun(t *testing.T) {
	rules, err := rulefile.Parse("demo_rules.yaml", demoRules)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(0)
	g, err := slidegate.New(slidegate.WithClock(clk), slidegate.WithCPU(func() float64 { return 0.3 }))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	tally := newBlockTally()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/orders", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `{"orders":[]}`) })
	h := httpguard.Middleware(g, httpguard.KeyFromHeader(userHeader), httpguard.WithBlockedHandler(tally.writeBlocked))(mux)
	var refused int64
	for i := range 600 { // 60 a second for 10 s
		clk.Set(int64(i) * int64(time.Second) / 60)
		req := httptest.NewRequest(http.MethodGet, "/api/orders", nil)
		req.Header.Set(userHeader, abusiveUser)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			continue
		}
		refused++
		body := rec.Body.String()
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Content-Type") != "application/json" ||
			rec.Header().Get("Retry-After") == "" || body != `{"error":"too many requests","reason":"rate_limited"}`+"\n" {
			t.Fatalf("a blocked request got %d %q (Retry-After %q): %s", rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Retry-After"), body)
		}
	}
	if refused < 350 {
		t.Fatalf("%d of 600 requests at three times the per-user limit refused", refused)
	}
	clk.Advance(5 * time.Second) // the run ends quiet
	got := keysSummary(g, tally, 15*time.Second)
	want := fmt.Sprintf("per-key rules on GET /api/orders: most blocked key %s (%d requests blocked in 15s)\n", abusiveUser, refused)
	if got != want {
		t.Errorf("the summary says\n%swant\n%s", got, want)
	}
}
