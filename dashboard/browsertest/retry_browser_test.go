package browsertest_test

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/dashboard"
	"github.com/slidegate/slidegate/flow"
)

// The page shows the retry budgets with what they have counted, live, and
// their names as text; without budgets it shows no table.
func TestBrowserShowsTheRetryBudgets(t *testing.T) {
	browser := findBrowser()
	if browser == "" {
		t.Skip("no chromium binary: install Debian's chromium to run the browser test")
	}
	clk := clock.NewManual(int64(time.Hour))
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	budget := func(ratio float64) *flow.RetryBudget {
		t.Helper()
		b, err := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: ratio, MinPerSecond: 0, Interval: time.Second, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	orders, payments := budget(0.5), budget(0.2)
	const hostile = `<img src=x onerror="document.body.dataset.owned=1">`
	d, err := dashboard.New(g, dashboard.WithInterval(0),
		dashboard.WithRetryBudget("orders", orders), dashboard.WithRetryBudget(hostile, payments))
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
	pg.waitUntil("the retry budgets", `!document.getElementById("retry-panel").hidden`)
	head := `[...document.querySelector("#retries thead tr").cells].map(th => th.textContent).join("|")`
	if got, w := pg.eval(head), "Budget|Requests|Retries|Blocked|Not retried"; got != w {
		t.Errorf("the retry budgets' columns: %q, want %q", got, w)
	}
	rows := `[...document.querySelectorAll("#retries tbody tr")].map(tr => [...tr.cells].map(td => td.textContent).join("|")).join("\n")`
	want := "orders|0|0|0|0\n" + hostile + "|0|0|0|0"
	if got := pg.eval(rows); got != want {
		t.Errorf("the retry budgets:\n%s\nwant\n%s", got, want)
	}

	// 10 requests and 8 retries on orders: half of them allowed; 20 and 6
	// on payments, a fifth of them; and a probe on each, never retried.
	spend := func(b *flow.RetryBudget, requests, retries int) (allowed, blocked int) {
		for range requests {
			b.Request()
		}
		for range retries {
			if _, ok := b.Retry(flow.AttemptFailed); ok {
				allowed++
			} else {
				blocked++
			}
		}
		b.Retry(flow.AttemptProbe)
		return allowed, blocked
	}
	ordersAllowed, ordersBlocked := spend(orders, 10, 8)
	paymentsAllowed, paymentsBlocked := spend(payments, 20, 6)
	clk.Advance(100 * time.Millisecond)
	d.Sample()
	want = "orders|10|" + strconv.Itoa(ordersAllowed) + "|" + strconv.Itoa(ordersBlocked) + "|1\n" + hostile + "|20|" + strconv.Itoa(paymentsAllowed) + "|" + strconv.Itoa(paymentsBlocked) + "|1"
	pg.waitUntil("the counts", `document.querySelector("#retries tbody tr td.requests").textContent === "10"`)
	if got := pg.eval(rows); got != want {
		t.Errorf("the retry budgets, counted:\n%s\nwant\n%s", got, want)
	}
	if got := pg.eval(`document.querySelectorAll("#retries img").length + "|" + (document.body.dataset.owned || "")`); got != "0|" {
		t.Errorf("a budget's name was read as markup: images and marks %q, want none", got)
	}
	usesNoOldWords(t, pg.eval)
	pg.close()

	// A dashboard without budgets shows no table.
	bare, err := dashboard.New(g, dashboard.WithInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bare.Close() })
	bareSrv := httptest.NewServer(bare)
	t.Cleanup(bareSrv.Close)
	clk.Advance(time.Second)
	bare.Sample()
	pg = openBrowser(t, browser, nil)
	pg.do("opening the page", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(bareSrv.URL+"/"))
	pg.waitUntil("the stream", `document.getElementById("status").dataset.state === "live"`)
	if got := pg.eval(`String(document.getElementById("retry-panel").hidden)`); got != "true" {
		t.Errorf("without retry budgets the panel is hidden: %s, want true", got)
	}
	pg.close()
}
