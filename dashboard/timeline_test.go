package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/bounds"
)

// seqs returns the Seq of each event.
func seqs(evs []guardEventJSON) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// refuse makes the guard refuse n rule sets.
func refuse(t *testing.T, g *slidegate.Guard, n int) {
	t.Helper()
	for range n {
		if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "a", Limit: -1}}}); err == nil {
			t.Fatal("rules with a limit of -1 are in force")
		}
	}
}

func TestTheGuardsEventsAreSentOnceInOrder(t *testing.T) {
	one := int64(1)
	f := newFixture(t, nil)
	if err := f.g.SetRules(slidegate.Rules{
		Breakers: []slidegate.BreakerRule{{Resource: "db", Strategy: slidegate.ErrorCountBreaker, Count: 2, MinRequests: &one, OpenTimeout: slidegate.Duration(time.Minute)}},
	}); err != nil {
		t.Fatal(err)
	}
	rulesAt := f.clk.Now()
	f.step(time.Second)
	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var snap snapshotJSON
	s.next(t, "snapshot", &snap)
	want := []guardEventJSON{{Seq: 1, Time: f.d.unix(rulesAt), Kind: "rules_changed", Text: `rules in force: breaker rule "breaker" of "db" added`}}
	if !slices.Equal(snap.Events, want) {
		t.Fatalf("the first snapshot's events:\n%+v, want\n%+v", snap.Events, want)
	}

	// Two failures open the breaker; a rule set is refused.
	f.requests(t, "db", 2, time.Millisecond, true)
	openAt := f.clk.Now() + int64(time.Millisecond) // when the second failure ended
	f.clk.Advance(100 * time.Millisecond)
	refuse(t, f.g, 1)
	f.step(time.Second)
	var ev eventJSON
	s.next(t, "sample", &ev)
	if got := seqs(ev.Events); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("the sample's events %+v, want seq 2 and 3", ev.Events)
	}
	if e := ev.Events[0]; e.Kind != "breaker_changed" || !e.Warn || e.Time != f.d.unix(openAt) ||
		!strings.HasPrefix(e.Text, `breaker "breaker" of "db": closed → open`) {
		t.Errorf("the breaker's event %+v, want it open, a warning, at %.3f", e, f.d.unix(openAt))
	}
	if e := ev.Events[1]; e.Kind != "rules_refused" || !e.Warn || !strings.Contains(e.Text, "limit") {
		t.Errorf("the refusal %+v, want rules_refused, a warning, naming the limit", e)
	}

	// Nothing new: the next sample carries no event, and writes none.
	f.step(time.Second)
	var quiet map[string]any
	s.next(t, "sample", &quiet)
	if e, ok := quiet["events"]; ok {
		t.Errorf("a sample without new events carries %v", e)
	}
	if got := seqs(f.snapshot(t).Events); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("the snapshot's events are seq %v, want 1, 2, 3", got)
	}
	sample := rawJSON(t, f.d, "/api/snapshot")
	if m := sample.(map[string]any); m["dropped_events"] != 0.0 || m["cluster"] != nil {
		t.Errorf("dropped_events %v, cluster %v; want 0 and no cluster", m["dropped_events"], m["cluster"])
	}
	if got, want := keys(t, "an event", objectAt(t, sample, "events", 1)), []string{"kind", "seq", "text", "time", "warn"}; !slices.Equal(got, want) {
		t.Errorf("an event has the fields %q, want %q", got, want)
	}
}

func TestTheDashboardKeepsTheLatestEventsOfTheGuard(t *testing.T) {
	f := newFixture(t, nil)
	refuse(t, f.g, 300)
	f.d.sampling.Lock()
	ev := f.d.event(false)
	f.d.sampling.Unlock()
	if len(ev.Events) != 0 {
		t.Fatalf("before a sample, the event carries %d events", len(ev.Events))
	}
	f.step(time.Second)
	// The guard keeps the latest 128: the dashboard sees those.
	wantSeqs := func(from, to uint64) []uint64 {
		var s []uint64
		for q := from; q <= to; q++ {
			s = append(s, q)
		}
		return s
	}
	f.d.sampling.Lock()
	ev = f.d.event(false)
	f.d.sampling.Unlock()
	if got := seqs(ev.Events); !slices.Equal(got, wantSeqs(173, 300)) {
		t.Errorf("the sample's events are seq %v, want 173 to 300", got)
	}
	refuse(t, f.g, 10)
	f.step(time.Second)
	f.d.sampling.Lock()
	ev = f.d.event(false)
	f.d.sampling.Unlock()
	if got := seqs(ev.Events); !slices.Equal(got, wantSeqs(301, 310)) {
		t.Errorf("the next sample's events are seq %v, want 301 to 310", got)
	}
	if got := seqs(f.snapshot(t).Events); !slices.Equal(got, wantSeqs(183, 310)) {
		t.Errorf("the snapshot's events are seq %v, want the latest 128: 183 to 310", got)
	}
}

// An attacker who may set rules (a rule source it writes, or the editing
// token) sends rule sets of a thousand problems each, on resources with the
// longest names, of characters JSON escapes: what the page is sent stays
// bounded.
func TestEventFramesAreBoundedWhateverTheEventsSay(t *testing.T) {
	f := newFixture(t, nil)
	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var snap snapshotJSON
	s.next(t, "snapshot", &snap)

	bad := slidegate.Rules{}
	for i := range 1000 {
		// 256 bytes: "<" is escaped by JSON to six bytes; "é" is two
		// bytes, so that a cut may fall inside one.
		name := fmt.Sprintf("%04d", i) + strings.Repeat("<é", 84)
		bad.Flow = append(bad.Flow, slidegate.FlowRule{Resource: name, Limit: -1})
	}
	if n := len(bad.Flow[0].Resource); n != bounds.MaxNameLength {
		t.Fatalf("a name of %d bytes, want %d", n, bounds.MaxNameLength)
	}
	err := f.g.SetRules(bad)
	var re *slidegate.RulesError
	if !errors.As(err, &re) || len(re.Problems) < 1000 {
		t.Fatalf("SetRules: %v, want 1000 problems", err)
	}
	for range bounds.KeptEvents {
		f.g.SetRules(bad)
	}
	f.step(time.Second)

	raw, err := readEvent(s.r)
	if err != nil || raw.event != "sample" {
		t.Fatalf("the sample: %q, %v", raw.event, err)
	}
	data := raw.data
	var ev eventJSON
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Events) != bounds.KeptEvents {
		t.Fatalf("%d events in the sample, want %d", len(ev.Events), bounds.KeptEvents)
	}
	for _, e := range ev.Events {
		if len(e.Text) > maxEventText || !utf8.ValidString(e.Text) || !strings.HasSuffix(e.Text, "…") {
			t.Fatalf("an event's text of %d bytes (valid UTF-8: %v), want at most %d, cut: %q", len(e.Text), utf8.ValidString(e.Text), maxEventText, e.Text)
		}
	}
	// Each event: its text, each byte escaped at worst to six, and its
	// other fields in under 128 bytes.
	bound := bounds.KeptEvents * (6*maxEventText + 128)
	if len(data) > bound {
		t.Errorf("the sample's frame is %d bytes, want at most %d", len(data), bound)
	}
	w := httptest.NewRecorder()
	f.d.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/snapshot", nil))
	snapDoc := w.Body.Bytes()
	if len(snapDoc) > bound+4096 {
		t.Errorf("the snapshot is %d bytes, want at most %d", len(snapDoc), bound+4096)
	}
	t.Logf("a sample with %d events of rule sets with 1000 problems: %d bytes; the snapshot %d bytes", len(ev.Events), len(data), len(snapDoc))
}

func TestCutKeepsWholeCharacters(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 8, "short"},
		{"exactly8", 8, "exactly8"},
		{"abcdefghij", 8, "abcde…"},
		{"ééééé", 8, "éé…"}, // 10 bytes; 8 leave room for 2 é and "…"
		{"aéééé", 8, "aéé…"},
		{"aéééé", 7, "aé…"},
	} {
		if got := cut(tt.s, tt.n); got != tt.want || len(got) > tt.n {
			t.Errorf("cut(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestDescribeWritesOneLine(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"rules refused: 2 problems\n\tflow[0]: limit\n\tflow[1]: interval", "rules refused: 2 problems; flow[0]: limit; flow[1]: interval"},
		{"\n lead and trail \r\n", "lead and trail"},
		{"a\x00b\x1bc\x7fd  e", "a b c d  e"},
		{"tab\tinside", "tab\tinside"},
	} {
		if got := describe(tt.in); got != tt.want {
			t.Errorf("describe(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := strings.Repeat("problem\n\t", 1000)
	if got := describe(long); len(got) > maxEventText || strings.ContainsAny(got, "\n\r") || !strings.HasSuffix(got, "…") {
		t.Errorf("describe of %d bytes: %d bytes %q", len(long), len(got), got)
	}
}

// healthCluster is a Cluster that reports the health the test sets.
type healthCluster struct {
	mu     sync.Mutex
	health slidegate.ClusterHealth
}

func (c *healthCluster) Limiter(slidegate.FlowRule) (slidegate.ClusterLimiter, error) {
	return nil, errors.New("no cluster limiters here")
}

func (c *healthCluster) Health() slidegate.ClusterHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health
}

func (c *healthCluster) set(h slidegate.ClusterHealth) {
	c.mu.Lock()
	c.health = h
	c.mu.Unlock()
}

func TestFramesCarryTheClusterHealthOnlyWithACluster(t *testing.T) {
	c := &healthCluster{health: slidegate.ClusterHealth{Healthy: true}}
	f := newFixture(t, []slidegate.Option{slidegate.WithCluster(c)})
	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var snap snapshotJSON
	s.next(t, "snapshot", &snap)
	if snap.Cluster == nil || *snap.Cluster != (clusterJSON{State: "healthy"}) {
		t.Errorf("the snapshot's cluster %+v, want healthy", snap.Cluster)
	}

	c.set(slidegate.ClusterHealth{Failures: 3, Fallbacks: 40})
	f.step(time.Second)
	var ev eventJSON
	s.next(t, "sample", &ev)
	if ev.Cluster == nil || *ev.Cluster != (clusterJSON{State: "unhealthy", Failures: 3, Fallbacks: 40}) {
		t.Errorf("the sample's cluster %+v, want unhealthy, 3 failures, 40 fallbacks", ev.Cluster)
	}

	long := "NOPERM " + strings.Repeat("x", 4000)
	c.set(slidegate.ClusterHealth{Failures: 5, Fallbacks: 41, Err: errors.New(long)})
	f.step(time.Second)
	s.next(t, "sample", &ev)
	if ev.Cluster == nil || ev.Cluster.State != "misconfigured" || ev.Cluster.Failures != 5 || ev.Cluster.Fallbacks != 41 ||
		!strings.HasPrefix(ev.Cluster.Error, "NOPERM") || len(ev.Cluster.Error) > maxEventText {
		t.Errorf("the sample's cluster %+v, want misconfigured, NOPERM cut to %d bytes", ev.Cluster, maxEventText)
	}
	if got := f.snapshot(t).Cluster; got == nil || *got != *ev.Cluster {
		t.Errorf("the snapshot's cluster %+v, want %+v", got, ev.Cluster)
	}

	// Without a cluster: no cluster in the JSON at all.
	plain := newFixture(t, nil)
	plain.step(time.Second)
	for _, path := range []string{"/api/snapshot"} {
		if m := rawJSON(t, plain.d, path).(map[string]any); m["cluster"] != nil {
			t.Errorf("%s without a cluster says cluster %v", path, m["cluster"])
		}
	}
	plain.d.sampling.Lock()
	pev := plain.d.event(false)
	plain.d.sampling.Unlock()
	if pev.Cluster != nil {
		t.Errorf("a sample without a cluster carries %+v", pev.Cluster)
	}
}

func TestFramesCountTheEventsListenersWereNotTold(t *testing.T) {
	f := newFixture(t, nil)
	release := make(chan struct{})
	stop := f.g.OnEvent(func(slidegate.Event) { <-release })
	t.Cleanup(func() {
		close(release)
		stop()
	})
	refuse(t, f.g, bounds.EventQueue+50)
	f.step(time.Second)
	dropped := f.g.DroppedEvents()
	if dropped < 49 {
		t.Fatalf("the guard dropped %d events of a listener that takes none, want at least 49", dropped)
	}
	if got := f.snapshot(t).DroppedEvents; got != dropped {
		t.Errorf("the snapshot says %d events dropped, want %d", got, dropped)
	}
}

func TestThePageIsSentNamedRules(t *testing.T) {
	f := newFixture(t, nil, WithRuleEditing("t"))
	rules := slidegate.Rules{
		Flow: []slidegate.FlowRule{
			{Resource: "GET /a", Limit: 10},
			{Resource: "GET /a", Limit: 20},
			{Resource: "GET /a", Name: "burst", Limit: 30},
		},
		Breakers: []slidegate.BreakerRule{{Resource: "db", Strategy: slidegate.ErrorCountBreaker, Count: 2}},
	}
	if err := f.g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	f.step(time.Second)
	names := func(r slidegate.Rules) string {
		var s []string
		for _, x := range r.Flow {
			s = append(s, x.Name)
		}
		for _, x := range r.Breakers {
			s = append(s, x.Name)
		}
		return strings.Join(s, "|")
	}
	const want = "qps|qps_2|burst|breaker"
	if got := names(f.snapshot(t).Rules); got != want {
		t.Errorf("the snapshot's rules are named %q, want %q", got, want)
	}
	body, err := json.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	w := putRules(f.d, "Bearer t", string(body))
	var back slidegate.Rules
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &back) != nil {
		t.Fatalf("PUT api/rules: %d %s", w.Code, w.Body)
	}
	if got := names(back); got != want {
		t.Errorf("PUT api/rules answers rules named %q, want %q", got, want)
	}
}
