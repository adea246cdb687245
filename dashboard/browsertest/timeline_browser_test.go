package browsertest_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/dashboard"
)

// settableCluster is a Cluster whose health the test sets.
type settableCluster struct {
	mu     sync.Mutex
	health slidegate.ClusterHealth
}

func (c *settableCluster) Limiter(slidegate.FlowRule) (slidegate.ClusterLimiter, error) {
	return nil, errors.New("no cluster limiters here")
}

func (c *settableCluster) Health() slidegate.ClusterHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health
}

func (c *settableCluster) set(h slidegate.ClusterHealth) {
	c.mu.Lock()
	c.health = h
	c.mu.Unlock()
}

// The page lists the guard's events, newest first, a breaker that opens in
// the warning colour, each at its time before the latest sample; and shows
// the health of the guard's cluster in its header.
func TestBrowserShowsTheGuardsEventsAndTheClusterHealth(t *testing.T) {
	browser := findBrowser()
	if browser == "" {
		t.Skip("no chromium binary: install Debian's chromium to run the browser test")
	}
	clk := clock.NewManual(int64(time.Hour))
	cluster := &settableCluster{health: slidegate.ClusterHealth{Healthy: true, Failures: 1}}
	g, err := slidegate.New(slidegate.WithClock(clk), slidegate.WithCluster(cluster))
	if err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	if err := g.SetRules(slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "db", Strategy: slidegate.ErrorCountBreaker, Count: 2, MinRequests: &one, OpenTimeout: slidegate.Duration(time.Minute)},
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
	rows := `[...document.querySelectorAll("#events tbody tr")].map(tr => tr.dataset.kind + "|" + tr.className + "|" + [...tr.cells].map(td => td.textContent).join("|")).join("\n")`
	if got, want := pg.eval(rows), `rules_changed||1 s ago|rules changed|rules in force: breaker rule "breaker" of "db" added`; got != want {
		t.Errorf("the events:\n%s\nwant\n%s", got, want)
	}
	cluster1 := `document.getElementById("cluster").hidden + "|" + document.querySelector("#cluster dd").textContent`
	if got, want := pg.eval(cluster1), "false|healthy 1 failures · 0 fallbacks"; got != want {
		t.Errorf("the cluster: %q, want %q", got, want)
	}

	// Two failures open the breaker; a rule set is refused; the cluster
	// meets an error that retrying will not fix.
	for range 2 {
		e, err := g.Enter(context.Background(), "db")
		if err != nil {
			t.Fatal(err)
		}
		e.ExitAt(clk.Now(), errors.New("boom"))
	}
	clk.Advance(time.Second)
	if g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "a", Limit: -1}}}) == nil {
		t.Fatal("rules with a limit of -1 are in force")
	}
	cluster.set(slidegate.ClusterHealth{Failures: 7, Fallbacks: 30, Err: errors.New("NOPERM this user has no permissions to run the 'evalsha' command")})
	clk.Advance(time.Second)
	d.Sample()

	pg.waitUntil("the breaker's event", `document.querySelector('#events tr[data-kind="breaker_changed"]') !== null`)
	got := strings.Split(pg.eval(rows), "\n")
	want := []string{
		`rules_refused|warn|1 s ago|rules refused|rules refused; the rules in force stay: slidegate: invalid rules: 1 problem`,
		`breaker_changed|warn|2 s ago|breaker changed|breaker "breaker" of "db": closed → open (tripped: 2 of 2 requests failed, 2 in a row, 0 slow, open for 1m0s)`,
		`rules_changed||3 s ago|rules changed|rules in force: breaker rule "breaker" of "db" added`,
	}
	if len(got) != len(want) {
		t.Fatalf("the events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event row %d:\n%s\nwant it to begin\n%s", i, got[i], want[i])
		}
	}
	if got, want := pg.eval(`getComputedStyle(document.querySelector('#events tr[data-kind="breaker_changed"] td.text')).color`),
		pg.eval(`getComputedStyle(document.querySelector('#events tr[data-kind="rules_changed"] td.text')).color`); got == want {
		t.Errorf("a breaker that opened is shown in the colour of any event (%s)", got)
	}
	if got, want := pg.eval(cluster1), "false|misconfigured 7 failures · 30 fallbacks NOPERM this user has no permissions to run the 'evalsha' command"; got != want {
		t.Errorf("the cluster: %q, want %q", got, want)
	}
	if got := pg.eval(`document.getElementById("events-note").textContent`); got != "newest first, the latest 128" {
		t.Errorf("the events' note: %q, want no dropped events", got)
	}
	usesNoOldWords(t, pg.eval)
	pg.close()
}
