package browsertest_test

import (
	"context"
	"math"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/dashboard"
)

// cpuReading is a CPU usage the test sets, read by the guard through
// slidegate.WithCPU.
type cpuReading struct{ bits atomic.Uint64 }

func (c *cpuReading) set(v float64)  { c.bits.Store(math.Float64bits(v)) }
func (c *cpuReading) usage() float64 { return math.Float64frombits(c.bits.Load()) }

// The page shows the shed and adaptive rules with what they have learnt,
// live, and the rules table does not give them a limit they do not have.
func TestBrowserShowsTheOverloadRules(t *testing.T) {
	browser := findBrowser()
	if browser == "" {
		t.Skip("no chromium binary: install Debian's chromium to run the browser test")
	}
	clk := clock.NewManual(int64(time.Hour))
	cpu := new(cpuReading)
	cpu.set(0.3)
	g, err := slidegate.New(slidegate.WithClock(clk), slidegate.WithCPU(cpu.usage))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: slidegate.InboundResource, Type: slidegate.ShedRule, CPUThreshold: 0.8},
		{Resource: "GET /orders", Type: slidegate.AdaptiveRule, Limit: 50, MaxLimit: 400},
		{Resource: "GET /orders", Limit: 1000},
	}}); err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(g, dashboard.WithInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	clk.Advance(time.Second)
	d.Sample()

	pg := openBrowser(t, browser, nil)
	pg.do("opening the page", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(srv.URL+"/"))
	pg.waitUntil("the stream", `document.getElementById("status").dataset.state === "live"`)
	// In the rules: no limit of 0 for the shed rule, the adaptive rule's
	// first limit, both of requests in flight.
	flowRows := `[...document.querySelectorAll("#rules table")[0].tBodies[0].rows].map(tr => [...tr.cells].map(td => td.textContent).join("|")).join("\n")`
	wantRules := "shed|(inbound)|shed|learnt|at once|sheds at CPU ≥ 80%\n" +
		"adaptive|GET /orders|adaptive|from 50|at once|gradient, at most 400\n" +
		"qps|GET /orders|qps|1000|1s|"
	if got := pg.eval(flowRows); got != wantRules {
		t.Errorf("the flow rules:\n%s\nwant\n%s", got, wantRules)
	}

	pg.waitUntil("the overload rules", `!document.getElementById("overload-panel").hidden`)
	if got := pg.eval(`String(document.getElementById("cluster").hidden)`); got != "true" {
		t.Errorf("a guard without a cluster: the cluster's health hidden %s, want true", got)
	}
	rows := `[...document.querySelectorAll("#overload tbody tr")].map(tr => [...tr.cells].map(td => td.textContent).join("|")).join("\n")`
	// Nothing learnt yet: the shed rule allows everything.
	want := "shed|(inbound)|shed|none|learning|0|30%|idle|–\n" +
		"adaptive|GET /orders|adaptive|50|–|0|–|–|–"
	if got := pg.eval(rows); got != want {
		t.Errorf("the overload rules:\n%s\nwant\n%s", got, want)
	}
	head := `[...document.querySelector("#overload thead tr").cells].map(th => th.textContent).join("|")`
	if got, w := pg.eval(head), "Rule|Resource|Type|Limit|Learnt|In flight|CPU|Shedding|Baseline"; got != w {
		t.Errorf("the overload table's columns: %q, want %q", got, w)
	}

	// 40 inbound requests of 10 ms in one bucket of 100 ms: 4 in flight at
	// the service's best. One more ends after the adaptive rule's first
	// window and gives it its baseline; one stays in flight while the CPU
	// is over the threshold.
	inbound := func(n int) {
		t.Helper()
		es := make([]slidegate.Entry, n)
		for i := range es {
			if es[i], err = g.Enter(context.Background(), "GET /orders", slidegate.WithInbound()); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range es {
			e.ExitAt(clk.Now()+int64(10*time.Millisecond), nil)
		}
	}
	inbound(40)
	clk.Advance(200 * time.Millisecond)
	inbound(1)
	cpu.set(0.9)
	held, err := g.Enter(context.Background(), "GET /orders", slidegate.WithInbound())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Exit(nil)
	clk.Advance(time.Second)
	d.Sample()
	limit := g.Overload()[1].Limit
	want = "shed|(inbound)|shed|4|4|1|90%|shedding|–\n" +
		"adaptive|GET /orders|adaptive|" + strconv.FormatInt(limit, 10) + "|–|1|–|–|10.0 ms"
	pg.waitUntil("the shed rule's bound", `document.querySelector('#overload tr[data-resource="(inbound)"][data-rule="shed"] td.limit').textContent === "4"`)
	if got := pg.eval(rows); got != want {
		t.Errorf("the overload rules, learnt:\n%s\nwant\n%s", got, want)
	}
	// Warm: the shed rule allows twice its bound.
	cpu.set(0.6)
	clk.Advance(time.Second)
	d.Sample()
	pg.waitUntil("the shed rule's cap while the CPU is warm", `document.querySelector('#overload tr[data-resource="(inbound)"][data-rule="shed"] td.limit').textContent === "8"`)
	usesNoOldWords(t, pg.eval)

	// Without overload rules the panel goes.
	if err := g.SetRules(slidegate.Rules{}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	d.Sample()
	pg.waitUntil("the panel to go", `document.getElementById("overload-panel").hidden`)
	pg.close()
}
