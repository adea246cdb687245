package browsertest_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/dashboard"
)

// The page marks the rules in shadow, and shows, beside the blocked
// requests of a resource and of the inbound traffic, those that shadow
// rules would have blocked and let through.
func TestBrowserShowsWhatShadowRulesWouldBlock(t *testing.T) {
	browser := findBrowser()
	if browser == "" {
		t.Skip("no chromium binary: install Debian's chromium to run the browser test")
	}
	clk := clock.NewManual(int64(time.Hour))
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(slidegate.Rules{
		Flow: []slidegate.FlowRule{
			{Resource: "GET /orders", Limit: 2, Shadow: true},
			{Resource: "GET /users", Limit: 100},
		},
		Breakers: []slidegate.BreakerRule{
			{Resource: "GET /orders", Strategy: slidegate.ErrorCountBreaker, Count: 20, Shadow: true},
			{Resource: "GET /users", Strategy: slidegate.ErrorCountBreaker, Count: 20},
		},
	}); err != nil {
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
	ruleCells := `[...document.querySelectorAll("#rules table")].map(t => [...t.tBodies[0].rows].map(tr => tr.cells[0].textContent).join("|")).join("\n")`
	if got, want := pg.eval(ruleCells), "qps shadow|qps\nbreaker shadow|breaker"; got != want {
		t.Errorf("the rules' names:\n%s\nwant\n%s", got, want)
	}
	if got := pg.eval(`String(document.querySelectorAll("#rules .tag-shadow").length)`); got != "2" {
		t.Errorf("%s rules tagged shadow, want 2", got)
	}
	if got := pg.eval(`String(document.querySelector("#rules .rules-shadow") !== null)`); got != "false" {
		t.Errorf("a note that every rule is in shadow: %s, want none", got)
	}

	// 5 inbound requests to each resource in one second: the shadow limit
	// of 2 would have blocked 3 of GET /orders, and lets them through.
	send := func(resource string, n int) {
		t.Helper()
		for range n {
			e, err := g.Enter(context.Background(), resource, slidegate.WithInbound())
			if err != nil {
				t.Fatalf("%s: %v: a shadow rule blocks nothing", resource, err)
			}
			e.ExitAt(clk.Now()+int64(time.Millisecond), nil)
		}
	}
	send("GET /orders", 5)
	send("GET /users", 5)
	clk.Advance(time.Second)
	d.Sample()
	tag := func(resource string) string {
		return `document.querySelector('#resources tr[data-resource="` + resource + `"] td.blocked .tag-would-block')`
	}
	pg.waitUntil("the would-block tag", tag("GET /orders")+` !== null`)
	cells := func(resource string) string {
		return `[...document.querySelector('#resources tr[data-resource="` + resource + `"]').cells].slice(1, 3).map(td => td.textContent).join("|")`
	}
	for _, c := range []struct{ resource, want string }{
		{"GET /orders", "5.00|0would block 3.00/s"},
		{"GET /users", "5.00|0"},
	} {
		if got := pg.eval(cells(c.resource)); got != c.want {
			t.Errorf("%s: allowed/s and blocked/s %q, want %q", c.resource, got, c.want)
		}
	}
	if got, want := pg.eval(tag("GET /orders")+`.title`), "Requests that shadow rules would have blocked and let through, per second; 3 since the start"; got != want {
		t.Errorf("the tag's tooltip %q, want %q", got, want)
	}
	inbound := `[...document.querySelectorAll("#inbound .kv")].map(kv => kv.querySelector("dt").textContent + "=" + kv.querySelector("dd").textContent).slice(0, 4).join("|")`
	if got, want := pg.eval(inbound), "inbound allowed/s=10.0|blocked/s=0|would block=3.00/s|failed/s=0"; got != want {
		t.Errorf("the inbound traffic: %q, want %q", got, want)
	}
	usesNoOldWords(t, pg.eval)

	// Every rule in shadow: each is tagged, and the page says so. (A new
	// resource, whose rule has counted nothing yet.)
	if err := g.SetRules(slidegate.Rules{Shadow: true, Flow: []slidegate.FlowRule{{Resource: "GET /items", Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	send("GET /items", 4)
	clk.Advance(time.Second)
	d.Sample()
	pg.waitUntil("the note", `document.querySelector("#rules .rules-shadow") !== null`)
	if got, want := pg.eval(ruleCells), "qps shadow"; got != want {
		t.Errorf("the rules' names with every rule in shadow: %q, want %q", got, want)
	}
	pg.waitUntil("GET /items' tag", tag("GET /items")+` !== null`)
	if got, want := pg.eval(tag("GET /items")+`.textContent`), "would block 3.00/s"; got != want {
		t.Errorf("GET /items: %q, want %q", got, want)
	}
	// A second without requests: what the shadow rules would block now is
	// nothing, and the total stays in the tooltip.
	clk.Advance(time.Second)
	d.Sample()
	pg.waitUntil("the rate to fall", tag("GET /orders")+`.textContent === "would block 0/s"`)
	if got, want := pg.eval(tag("GET /orders")+`.title`), "Requests that shadow rules would have blocked and let through, per second; 3 since the start"; got != want {
		t.Errorf("the tag's tooltip %q, want %q", got, want)
	}
	usesNoOldWords(t, pg.eval)
	pg.close()
}
