package browsertest_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/dashboard"
)

// counting is a ResponseWriter that counts the snapshot events written
// through it.
type counting struct {
	http.ResponseWriter
	snapshots *int
	mu        *sync.Mutex
}

func (c counting) Write(p []byte) (int, error) {
	c.mu.Lock()
	*c.snapshots += bytes.Count(p, []byte("\nevent: snapshot\n"))
	c.mu.Unlock()
	return c.ResponseWriter.Write(p)
}

func (c counting) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// The page's stream ends every second here (WithMaxStreamAge): the page
// comes back at once with the last event's id, is sent no new snapshot,
// stays live and misses no sample.
func TestBrowserStaysLiveAcrossTheEndOfItsStream(t *testing.T) {
	browser := findBrowser()
	if browser == "" {
		t.Skip("no chromium binary: install Debian's chromium to run the browser test")
	}
	clk := clock.NewManual(int64(time.Hour))
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(g, dashboard.WithInterval(0), dashboard.WithMaxStreamAge(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var mu sync.Mutex
	var streams, resumed, snapshots int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/events" {
			mu.Lock()
			streams++
			if r.Header.Get("Last-Event-ID") != "" {
				resumed++
			}
			mu.Unlock()
			w = counting{w, &snapshots, &mu}
		}
		d.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	// Sample n has n requests of GET /a, a second after sample n-1.
	sample := 0
	next := func() {
		sample++
		for range sample {
			e, err := g.Enter(t.Context(), "GET /a")
			if err != nil {
				t.Fatal(err)
			}
			e.Exit(nil)
		}
		clk.Advance(time.Second)
		d.Sample()
	}
	next()

	pg := openBrowser(t, browser, nil)
	pg.do("opening the page", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(srv.URL+"/"))
	pg.waitUntil("the stream", `document.getElementById("status").dataset.state === "live"`)
	// Note every state the status takes.
	pg.eval(`(() => {
		window.states = [];
		new MutationObserver(() => states.push(document.getElementById("status").dataset.state))
			.observe(document.getElementById("status"), {attributes: true});
		return "";
	})()`)

	// Four seconds: four streams' ages, a sample every 200 ms, each waited
	// for on the page.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
		next()
		pg.waitUntil("sample "+strconv.Itoa(sample), `parseFloat((document.querySelector('#resources tr[data-resource="GET /a"] td.allowed') || {}).textContent) === `+strconv.Itoa(sample))
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	t.Logf("%d samples: %d streams, %d of them resumed; %d snapshots sent", sample, streams, resumed, snapshots)
	if streams < 3 || resumed != streams-1 || snapshots != 1 {
		t.Errorf("%d streams, %d resumed, %d snapshots sent; want 3 or more streams, each after the first resumed, one snapshot", streams, resumed, snapshots)
	}
	mu.Unlock()
	if got := pg.eval(`states.filter(s => s !== "live").join(",")`); got != "" {
		t.Errorf("the status was %q between streams, want live throughout", got)
	}
	pg.close()
}
