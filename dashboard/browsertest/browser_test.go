package browsertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/dashboard"
	"github.com/slidegate/slidegate/flow"
)

// findBrowser returns the path of a Chromium-based browser, or "".
func findBrowser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// A profile is the simulated traffic of one resource.
type profile struct {
	name    string
	inbound bool
	rate    func(sec float64) float64 // requests per second
	rt      time.Duration             // median response time
	spread  float64                   // of the response time's logarithm
	errs    float64                   // share of requests that fail
}

// A simulation drives a guard on a manual clock with traffic that looks real,
// second by second, and samples the dashboard at the end of each second.
type simulation struct {
	t        *testing.T
	clk      *clock.Manual
	g        *slidegate.Guard
	d        *dashboard.Dashboard
	rng      *rand.Rand
	profiles []profile
	sec      int
	pending  []pendingExit
	errRate  map[string]float64 // overrides of profile.errs
}

type pendingExit struct {
	e   slidegate.Entry
	end int64
	err error
}

var errSimulated = errors.New("simulated failure")

// second simulates one second in 50 slices, then samples. counts, if it
// names a resource, sets its number of requests in that second exactly.
func (s *simulation) second(counts map[string]int) {
	s.t.Helper()
	const slices = 50
	for slice := range slices {
		now := s.clk.Now()
		for _, p := range s.profiles {
			var n int
			if c, ok := counts[p.name]; ok {
				n = c/slices + btoi(slice < c%slices)
			} else {
				x := p.rate(float64(s.sec)+float64(slice)/slices) / slices
				n = int(x + s.rng.Float64()) // rounds to x on average
			}
			errs := p.errs
			if e, ok := s.errRate[p.name]; ok {
				errs = e
			}
			var opts []slidegate.EntryOption
			if p.inbound {
				opts = append(opts, slidegate.WithInbound())
			}
			for range n {
				e, err := s.g.Enter(context.Background(), p.name, opts...)
				if errors.Is(err, flow.ErrBlocked) {
					continue
				}
				if err != nil {
					s.t.Fatal(err)
				}
				rt := time.Duration(float64(p.rt) * math.Exp(p.spread*s.rng.NormFloat64()))
				var failure error
				if s.rng.Float64() < errs {
					failure = errSimulated
				}
				s.pending = append(s.pending, pendingExit{e, now + int64(rt), failure})
			}
		}
		now = s.clk.Advance(time.Second / slices)
		kept := s.pending[:0]
		for _, x := range s.pending {
			if x.end <= now {
				x.e.ExitAt(x.end, x.err)
			} else {
				kept = append(kept, x)
			}
		}
		s.pending = kept
	}
	s.sec++
	s.d.Sample()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func wave(base, amplitude, period, phase float64) func(float64) float64 {
	return func(sec float64) float64 { return base + amplitude*math.Sin(2*math.Pi*sec/period+phase) }
}

func TestBrowserShowsLiveTraffic(t *testing.T) {
	browser := findBrowser()
	if browser == "" {
		t.Skip("no chromium binary: install Debian's chromium to run the browser test")
	}

	clk := clock.NewManual(int64(time.Hour))
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	minRequests := int64(10)
	if err := g.SetRules(slidegate.Rules{
		Flow: []slidegate.FlowRule{
			{Resource: "GET /orders", Limit: 110},
			{Resource: "GET /search", Type: slidegate.ConcurrencyRule, Limit: 50},
		},
		Breakers: []slidegate.BreakerRule{
			{Resource: "payments", Strategy: slidegate.ErrorCountBreaker, Count: 20, OpenTimeout: slidegate.Duration(30 * time.Second)},
			{Resource: "mysql:orders", Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5, MinRequests: &minRequests},
		},
	}); err != nil {
		t.Fatal(err)
	}
	const token = "browser-test-token"
	// A snapshot carries 2 points of each resource's history: the page asks
	// for the rest of those it charts (api/history).
	d, err := dashboard.New(g, dashboard.WithInterval(0), dashboard.WithRuleEditing(token), dashboard.WithSnapshotPoints(8))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	mux := http.NewServeMux()
	mux.Handle("/slidegate/", http.StripPrefix("/slidegate", d))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	sim := &simulation{
		t: t, clk: clk, g: g, d: d,
		rng: rand.New(rand.NewPCG(1, 2)),
		profiles: []profile{
			{name: "GET /orders", inbound: true, rate: wave(92, 32, 50, 0), rt: 18 * time.Millisecond, spread: 0.5, errs: 0.004},
			{name: "GET /search", inbound: true, rate: wave(44, 12, 37, 1.3), rt: 45 * time.Millisecond, spread: 0.7, errs: 0.01},
			{name: "mysql:orders", rate: wave(80, 28, 50, 0.2), rt: 4 * time.Millisecond, spread: 0.4, errs: 0.002},
			{name: "payments", rate: wave(22, 5, 23, 2), rt: 120 * time.Millisecond, spread: 0.3, errs: 0.01},
		},
		errRate: map[string]float64{},
	}
	// Two and a half minutes of history before the page opens.
	for range 150 {
		sim.second(nil)
	}

	pg := openBrowser(t, browser, func(text string) bool {
		return strings.Contains(text, "status of 422") // the bad rules, answered 422 on purpose
	})
	tab, do, waitUntil, eval := pg.tab, pg.do, pg.waitUntil, pg.eval
	cell := func(resource, class string) string {
		return fmt.Sprintf(`(document.querySelector('#resources tr[data-resource=%s] td.%s') || {}).textContent`, strconv.Quote(resource), class)
	}

	do("opening the page", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(srv.URL+"/slidegate/"))
	waitUntil("the stream", `document.getElementById("status").dataset.state === "live"`)
	waitUntil("live data", "parseFloat("+cell("GET /orders", "allowed")+") > 0")
	if n := eval(`String(document.querySelectorAll('.chart-card[data-resource="GET /orders"] canvas').length)`); n != "2" {
		t.Errorf("GET /orders has %s chart canvases, want 2 (rates and latency)", n)
	}
	for _, name := range []string{"GET /orders", "GET /search", "mysql:orders", "payments"} {
		waitUntil("the whole history of "+name, fmt.Sprintf(`(document.querySelector('.chart-card[data-resource=%s]') || {dataset: {}}).dataset.points === "150"`, strconv.Quote(name)))
	}
	if n := eval(`String(document.querySelectorAll("#resources tbody tr").length)`); n != "4" {
		t.Errorf("the table has %s rows, want 4", n)
	}
	if s := eval(cell("payments", "breaker")); s != "closed" {
		t.Errorf("payments' breaker shows %q, want closed", s)
	}

	// Values follow the events.
	sim.second(map[string]int{"GET /search": 37})
	waitUntil("the first event", cell("GET /search", "allowed")+` === "37.0"`)
	sim.second(map[string]int{"GET /search": 53})
	waitUntil("the second event", cell("GET /search", "allowed")+` === "53.0"`)

	// Sorting and filtering.
	do("sorting by allowed/s", chromedp.Click(chromedp.CSS(`#resources th[data-key="allowed"]`)))
	order := eval(`JSON.stringify([...document.querySelectorAll("#resources tbody td.allowed")].map(td => parseFloat(td.textContent)))`)
	var allowed []float64
	if err := json.Unmarshal([]byte(order), &allowed); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(allowed); i++ {
		if allowed[i] > allowed[i-1] {
			t.Errorf("sorted by allowed/s: %v is not in descending order", allowed)
			break
		}
	}
	do("sorting by name", chromedp.Click(chromedp.CSS(`#resources th[data-key="name"]`)))
	eval(`(() => { const f = document.getElementById("filter"); f.value = "PAY"; f.dispatchEvent(new Event("input")); return ""; })()`)
	if rows := eval(`[...document.querySelectorAll("#resources tbody tr")].map(tr => tr.dataset.resource).join(",")`); rows != "payments" {
		t.Errorf("filtered by PAY: rows %q, want payments", rows)
	}
	eval(`(() => { const f = document.getElementById("filter"); f.value = ""; f.dispatchEvent(new Event("input")); return ""; })()`)

	// An outage trips the payments breaker.
	sim.errRate["payments"] = 0.7
	for i := 0; ; i++ {
		sim.second(nil)
		if breakerState(g, "payments") == breaker.Open {
			break
		}
		if i == 20 {
			t.Fatal("the payments breaker did not open")
		}
	}
	waitUntil("the open breaker", cell("payments", "breaker")+` === "open"`)
	if s := eval(`document.querySelector('.chart-card[data-resource="payments"] header .badge').textContent`); s != "open" {
		t.Errorf("payments' chart badge shows %q, want open", s)
	}
	for range 12 { // blocked while open
		sim.second(nil)
	}
	waitUntil("blocked requests", "parseFloat("+cell("payments", "blocked")+") > 0")
	waitUntil("the breaker's blocked requests", `/^\d+ req, \d+ failed, [1-9]\d* blocked$/.test([...document.querySelectorAll("#rules tbody tr")].find(tr => tr.cells[0].textContent === "breaker").cells[5].textContent)`)
	speaksTheVocabulary(t, eval)

	// The rules editor keeps bad rules out of force and lists the problems.
	before := g.Rules()
	eval(`(() => {
		document.getElementById("rules-json").value = '{"flow":[{"resource":"GET /orders","limit":-5}]}';
		document.getElementById("rules-json").dispatchEvent(new Event("input"));
		document.getElementById("token").value = ` + strconv.Quote(token) + `;
		return "";
	})()`)
	do("saving bad rules", chromedp.Click(chromedp.ID("save")))
	waitUntil("the problems", `document.querySelectorAll("#problems li").length === 1`)
	if got := g.Rules(); len(got.Flow) != len(before.Flow) || got.Flow[0].Limit != before.Flow[0].Limit {
		t.Errorf("rules changed to %+v by bad rules", got)
	}
	do("reverting", chromedp.Click(chromedp.ID("revert")), chromedp.Evaluate[chromedp.Void](`document.getElementById("token").value = ""`))

	// Screenshots: the viewport, for the README, and the whole page.
	dir := os.Getenv("SLIDEGATE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	do("scrolling to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	shot, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	full, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	for name, png := range map[string][]byte{"dashboard.png": shot, "dashboard-full.png": full} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}

	// And puts good rules in force.
	eval(`(() => {
		document.getElementById("rules-json").value = '{"flow":[{"resource":"GET /orders","limit":120}]}';
		document.getElementById("rules-json").dispatchEvent(new Event("input"));
		document.getElementById("token").value = ` + strconv.Quote(token) + `;
		return "";
	})()`)
	do("saving good rules", chromedp.Click(chromedp.ID("save")))
	waitUntil("the rules saved", `document.getElementById("save-status").textContent.startsWith("Saved")`)
	if got := g.Rules(); len(got.Flow) != 1 || got.Flow[0].Limit != 120 || len(got.Breakers) != 0 {
		t.Errorf("rules in force after saving: %+v, want GET /orders limited to 120", got)
	}

	// And no rules at all.
	eval(`(() => {
		document.getElementById("rules-json").value = '{}';
		document.getElementById("rules-json").dispatchEvent(new Event("input"));
		return "";
	})()`)
	do("saving no rules", chromedp.Click(chromedp.ID("save")))
	waitUntil("no rules", `(document.querySelector("#rules p.empty") || {}).textContent === "No rules: every request is allowed."`)

	pg.close()
}

// A page is a headless browser's tab, and what the page wrote to its
// console that it should not have.
type page struct {
	t           *testing.T
	tab         context.Context
	cancelTab   context.CancelFunc
	consoleDone chan struct{}
	consoleMu   sync.Mutex
	problems    []string
}

// openBrowser starts the browser at path with a deadline (a hung browser
// fails the test) and opens a tab. It collects the errors the page writes to
// its console, but those for which expected reports true; close reports
// them.
func openBrowser(t *testing.T, path string, expected func(text string) bool) *page {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	userData, err := os.MkdirTemp("", "slidegate-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(userData) }) // after the browser has exited
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(userData),
		chromedp.WindowSize(1280, 800),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc) // waits for the browser to exit
	tab, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)
	pg := &page{t: t, tab: tab, cancelTab: cancelTab, consoleDone: make(chan struct{})}

	// Collect what the page writes to its console: it must write no error.
	messages := chromedp.Console(tab)
	go func() {
		defer close(pg.consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			if expected != nil && expected(m.Text) {
				continue
			}
			if m.IsException() || m.Type == "error" || m.Type == "assert" {
				pg.consoleMu.Lock()
				pg.problems = append(pg.problems, m.String())
				pg.consoleMu.Unlock()
			}
		}
	}()
	return pg
}

func (pg *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	pg.t.Helper()
	if err := chromedp.Do(pg.tab, steps...); err != nil {
		pg.t.Fatalf("%s: %v", what, err)
	}
}

// waitUntil polls expr until it is true, for at most 15 s.
func (pg *page) waitUntil(what, expr string) {
	pg.t.Helper()
	_, err := chromedp.Run(pg.tab, chromedp.Poll[bool](expr,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil {
		pg.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

func (pg *page) eval(expr string) string {
	pg.t.Helper()
	v, err := chromedp.Run(pg.tab, chromedp.Evaluate[string](expr))
	if err != nil {
		pg.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// close closes the tab and fails the test for each error the page wrote to
// its console.
func (pg *page) close() {
	pg.t.Helper()
	pg.cancelTab()
	<-pg.consoleDone
	pg.consoleMu.Lock()
	defer pg.consoleMu.Unlock()
	for _, p := range pg.problems {
		pg.t.Errorf("the page's console: %s", p)
	}
}

func breakerState(g *slidegate.Guard, resource string) breaker.State {
	for _, b := range g.Breakers() {
		if b.Resource == resource {
			return b.State
		}
	}
	return breaker.Closed
}

// speaksTheVocabulary checks the page's words: requests are allowed or
// blocked, and the allowed ones fail; no column, label, legend or tooltip
// says pass, refuse, reject or error for them.
func speaksTheVocabulary(t *testing.T, eval func(string) string) {
	t.Helper()
	for _, c := range []struct{ what, expr, want string }{
		{"the table's columns", `[...document.querySelectorAll("#resources thead th")].map(th => th.textContent).join("|")`,
			"Resource|Allowed/s|Blocked/s|Failed/s|In flight|P50|P99|Breaker"},
		{"the table's sort keys", `[...document.querySelectorAll("#resources thead th")].map(th => th.dataset.key).join("|")`,
			"name|allowed|blocked|failed|inflight|p50|p99|breaker"},
		{"a row's cells", `[...document.querySelector('#resources tr[data-resource="payments"]').cells].map(td => td.className.split(" ")[1] || td.className).join("|")`,
			"name|allowed|blocked|failed|inflight|p50|p99|breaker"},
		{"the inbound traffic", `[...document.querySelectorAll("#inbound dt")].map(dt => dt.textContent).join("|")`,
			"inbound allowed/s|blocked/s|failed/s|in flight|P99|updated"},
		{"a chart's legend", `[...document.querySelectorAll('.chart-card[data-resource="payments"] .chart-rates .u-legend .u-label')].map(l => l.textContent).join("|")`,
			"time|allowed/s|blocked/s|failed/s"},
		{"the flow rules' columns", `[...document.querySelectorAll("#rules table")[0].tHead.rows[0].cells].map(th => th.textContent).join("|")`,
			"Rule|Resource|Type|Limit|Per|"},
		{"the breakers' columns", `[...document.querySelectorAll("#rules table")[1].tHead.rows[0].cells].map(th => th.textContent).join("|")`,
			"Rule|Resource|Strategy|Opens when|State|Last interval|Retry after"},
		{"what opens the breakers", `[...document.querySelectorAll("#rules table")[1].tBodies[0].rows].map(tr => tr.cells[3].textContent).join("|")`,
			"failed ≥ 20|failed ≥ 50%"},
	} {
		if got := eval(c.expr); got != c.want {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
	}
	usesNoOldWords(t, eval)
}

// usesNoOldWords checks that no word the page shows, and no tooltip or
// class name, says pass, refuse, reject or error for requests. Rules are
// refused ("rules_refused", an event the page lists), requests never.
var rulesRefused = regexp.MustCompile(`(?i)rules[ _]refused`)

func usesNoOldWords(t *testing.T, eval func(string) string) {
	t.Helper()
	// Every word the page shows, and every tooltip and class name.
	words := eval(`[document.body.innerText, ...[...document.querySelectorAll("[title]")].map(e => e.title),
		...[...document.querySelectorAll("[class]")].map(e => e.getAttribute("class"))].join("\n")`)
	words = rulesRefused.ReplaceAllString(words, "")
	// Not \b: uPlot's legend runs its labels into the numbers before them.
	oldWords := regexp.MustCompile(`(?i)(?:^|[^a-z])(pass(?:es|ed)?|block/s|error/s|errors|refus[a-z]*|reject[a-z]*|behavior)(?:[^a-z]|$)`)
	for _, m := range oldWords.FindAllStringSubmatch(words, -1) {
		t.Errorf("the page says %q", m[1])
	}
}

// A keyed simulation sends, second by second on a manual clock, the
// requests of many users to one resource with per-key rules, and samples
// the dashboard at the end of each second.
type keyedSimulation struct {
	t        *testing.T
	clk      *clock.Manual
	g        *slidegate.Guard
	d        *dashboard.Dashboard
	resource string
}

// second sends, in ten slices of 100 ms, one request of each of users
// users and perSecond[key] requests of each key, then samples.
func (s *keyedSimulation) second(users int, perSecond map[string]int) {
	s.t.Helper()
	for slice := range 10 {
		send := func(key string) {
			err := s.g.Do(context.Background(), s.resource, func() error { return nil }, slidegate.WithKey(key))
			if err != nil && !errors.Is(err, flow.ErrBlocked) {
				s.t.Fatal(err)
			}
		}
		for u := slice; u < users; u += 10 {
			send(fmt.Sprintf("user-%04d", u))
		}
		for key, n := range perSecond {
			for range n/10 + btoi(slice < n%10) {
				send(key)
			}
		}
		s.clk.Advance(100 * time.Millisecond)
	}
	s.d.Sample()
}

func TestBrowserShowsTopKeys(t *testing.T) {
	browser := findBrowser()
	if browser == "" {
		t.Skip("no chromium binary: install Debian's chromium to run the browser test")
	}
	clk := clock.NewManual(int64(time.Hour))
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	const resource = "GET /api/orders"
	// 300 users at a request a second; an abusive one at 60 a second, over
	// its limit of 20; and a busy key, within its limit, that is markup.
	const abuser, markup = "user-0042", `<img src=x onerror=alert(1)>`
	// The abuser and the markup have overrides of the rule's own limit,
	// which count them exactly from their first request. Without them, the
	// first 10 requests of each would be counted in the sketch that counts
	// the users, seeded at random: a user sharing all its counters with one
	// of them (about 2 runs in 100 with 300 users) would look busy enough
	// to be tracked, and be shown among the busiest.
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: resource, Limit: 20, PerKey: true, Overrides: map[string]int64{abuser: 20, markup: 20}}, // 20 a second per user
		{Resource: resource, Limit: 900, Interval: slidegate.Duration(time.Minute), PerKey: true},          // and 900 a minute
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

	sim := &keyedSimulation{t: t, clk: clk, g: g, d: d, resource: resource}
	traffic := map[string]int{abuser: 60, markup: 15}
	for range 3 {
		sim.second(300, traffic)
	}

	pg := openBrowser(t, browser, nil)
	pg.do("opening the page", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(srv.URL+"/"))
	pg.waitUntil("the stream", `document.getElementById("status").dataset.state === "live"`)
	list := func(which string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('#keys .keys-card[data-resource=%s] .keys-list.%s tbody tr')]`, strconv.Quote(resource), which)
	}
	row := func(which string) string {
		return list(which) + `.map(tr => [...tr.cells].map(td => td.textContent).join("|")).join("\n")`
	}
	pg.waitUntil("the top keys", `!document.getElementById("keys-panel").hidden && `+list("blocked")+`.length > 0`)

	// What the guard says of the keys, at the time of the sample: the page
	// shows the same. The abusive user is the most blocked; the busiest are
	// the abuser and the markup, which shows as text, not as an element.
	want := map[string]slidegate.KeyStat{}
	for _, k := range g.TopKeys(resource, 10, false) {
		want[k.Key] = k
	}
	a, m := want[abuser], want[markup]
	if a.Allowed != 20 || a.Blocked < 40 || m.Allowed != 15 || m.Blocked != 0 || len(want) != 2 {
		t.Fatalf("the guard's top keys: %+v; want %s 20 allowed, 40 or more blocked, and %s 15 allowed", want, abuser, markup)
	}
	if got, w := pg.eval(row("blocked")), fmt.Sprintf("%s|%d|%d", abuser, a.Blocked, a.Allowed); got != w {
		t.Errorf("most blocked:\n%s\nwant %s", got, w)
	}
	if got, w := pg.eval(row("allowed")), fmt.Sprintf("%s|%d|%d\n%s|%d|%d", abuser, a.Allowed, a.Blocked, markup, m.Allowed, m.Blocked); got != w {
		t.Errorf("busiest:\n%s\nwant\n%s", got, w)
	}
	if n := pg.eval(`String(document.querySelectorAll("img").length)`); n != "0" {
		t.Errorf("the page has %s img elements: a key was read as markup", n)
	}
	if got := pg.eval(`[...document.querySelectorAll("#keys td.key")].map(td => td.title).join("|")`); !strings.Contains(got, markup) {
		t.Errorf("the keys' tooltips %q do not show the markup as text", got)
	}
	// The users at a request a second are not tracked one by one.
	if n := pg.eval(list("allowed") + `.length + ""`); n != "2" {
		t.Errorf("%s keys among the busiest, want the abuser and the markup", n)
	}

	// Live: a new abusive key takes the top of the most blocked.
	traffic["bot-7"] = 300
	sim.second(300, traffic)
	pg.waitUntil("the new abuser", list("blocked")+`[0].cells[0].textContent === "bot-7"`)
	top := g.TopKeys(resource, 1, true)
	if got := pg.eval(list("blocked") + `[0].cells[1].textContent`); len(top) != 1 || top[0].Key != "bot-7" || got != strconv.FormatInt(top[0].Blocked, 10) {
		t.Errorf("bot-7 shows %s blocked, want the guard's %+v", got, top)
	}
	usesNoOldWords(t, pg.eval)

	if dir := os.Getenv("SLIDEGATE_SCREENSHOTS"); dir != "" {
		shot, err := chromedp.Run(pg.tab, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "dashboard-keys.png")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	pg.close()
}
