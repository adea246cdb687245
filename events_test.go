package slidegate

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/internal/bounds"
)

// listener collects the events told to it.
type listener struct {
	mu     sync.Mutex
	events []Event
	more   chan struct{} // a value after each event
}

func listen(g *Guard) (*listener, func()) {
	l := &listener{more: make(chan struct{}, 1<<16)}
	stop := g.OnEvent(func(e Event) {
		l.mu.Lock()
		l.events = append(l.events, e)
		l.mu.Unlock()
		l.more <- struct{}{}
	})
	return l, stop
}

// wait returns the first n events, waiting for them as long as a loaded
// machine may take.
func (l *listener) wait(t *testing.T, n int) []Event {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		if len(l.events) >= n {
			out := append([]Event(nil), l.events[:n]...)
			l.mu.Unlock()
			return out
		}
		l.mu.Unlock()
		select {
		case <-l.more:
		case <-deadline:
			t.Fatalf("told %d events in 20s, want %d", len(l.events), n)
		}
	}
}

func TestBreakerChangesAreToldInOrderWithTheirRule(t *testing.T) {
	rules := Rules{Breakers: []BreakerRule{
		{Resource: "db", Name: "db errors", Strategy: ErrorCountBreaker, Count: 2, MinRequests: new(int64), OpenTimeout: Duration(time.Second)},
		{Resource: "cache", Strategy: ConsecutiveFailuresBreaker, Count: 1, MinRequests: new(int64), OpenTimeout: Duration(time.Second)},
	}}
	g, clk := newGuard(t, Rules{})
	l, stop := listen(g)
	defer stop()
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	mustEnter(t, g, "db").Exit(boom)
	mustEnter(t, g, "db").Exit(boom) // opens db
	mustEnter(t, g, "cache").Exit(boom)
	clk.Advance(time.Second)
	mustEnter(t, g, "db").Exit(nil) // the probe: db closes
	mustEnter(t, g, "cache").Exit(boom)

	evs := l.wait(t, 7)
	type seen struct {
		kind     string
		resource string
		rule     string
		from, to breaker.State
		cause    string
	}
	var got []seen
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Errorf("event %d has Seq %d", i, e.Seq)
		}
		got = append(got, seen{e.Kind, e.Resource, e.Rule, e.Breaker.From, e.Breaker.To, cause(e.Breaker)})
	}
	want := []seen{
		{rulesChanged, "", "", 0, 0, "tripped"},
		{breakerChanged, "db", "db errors", breaker.Closed, breaker.Open, "tripped"},
		{breakerChanged, "cache", "breaker", breaker.Closed, breaker.Open, "tripped"},
		{breakerChanged, "db", "db errors", breaker.Open, breaker.HalfOpen, "open timeout passed"},
		{breakerChanged, "db", "db errors", breaker.HalfOpen, breaker.Closed, "probes succeeded"},
		{breakerChanged, "cache", "breaker", breaker.Open, breaker.HalfOpen, "open timeout passed"},
		{breakerChanged, "cache", "breaker", breaker.HalfOpen, breaker.Open, "probe failed"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n%+v\nwant\n%+v", got, want)
	}
	if c := evs[1].Breaker.Stats; c.Failures != 2 || c.Requests != 2 {
		t.Errorf("the trip told counts %+v, want the window's 2 failures of 2", c)
	}
	if s := evs[1].String(); !strings.Contains(s, `breaker "db errors" of "db": closed → open (tripped: 2 of 2 requests failed`) {
		t.Errorf("String() = %q", s)
	}
	if kept := g.Events(); !reflect.DeepEqual(kept, evs) {
		t.Errorf("Events() = %+v, want what the listener was told", kept)
	}
}

func TestARuleReloadTellsWhatChanged(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	l, stop := listen(g)
	defer stop()
	set := func(r Rules) {
		t.Helper()
		if err := g.SetRules(r); err != nil {
			t.Fatal(err)
		}
	}
	set(Rules{Flow: []FlowRule{{Resource: "a", Limit: 100}, {Resource: "b", Type: ConcurrencyRule, Limit: 5}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: SREBreaker}}})
	set(Rules{Flow: []FlowRule{{Resource: "a", Limit: 200, Interval: Duration(time.Second)}, {Resource: "c", Limit: 1, Shadow: true}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: SREBreaker}}})
	set(Rules{Flow: []FlowRule{{Resource: "a", Limit: 200}, {Resource: "c", Limit: 1, Shadow: true}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: SREBreaker}}}) // the same, a default left out: no event
	set(Rules{Flow: []FlowRule{{Resource: "a", Limit: 200}, {Resource: "c", Limit: 1}},
		Breakers: []BreakerRule{{Resource: "a", Strategy: SREBreaker}}})
	err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: -1}}})
	if err == nil {
		t.Fatal("a negative limit was taken")
	}
	evs := l.wait(t, 4)
	var lines []string
	for _, e := range evs {
		lines = append(lines, e.String())
	}
	want := []string{
		`rules in force: flow rule "qps" of "a" added; flow rule "concurrency" of "b" added; breaker rule "breaker" of "a" added`,
		`rules in force: flow rule "qps" of "a" changed (limit: 100 → 200); flow rule "qps" of "c" added; flow rule "concurrency" of "b" removed`,
		`rules in force: flow rule "qps" of "c" changed (shadow: true → false)`,
		"rules refused; the rules in force stay: " + strings.ReplaceAll(err.Error(), "\n\t", "; "),
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if evs[3].Kind != rulesRefused || !errors.Is(evs[3].Err, err) {
		t.Errorf("the refusal: %+v", evs[3])
	}
}

func TestARuleReloadOfManyRulesListsABoundedNumberOfChanges(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	var r Rules
	for i := range bounds.MaxEventChanges + 10 {
		r.Flow = append(r.Flow, FlowRule{Resource: strings.Repeat("r", i+1), Limit: 1})
	}
	if err := g.SetRules(r); err != nil {
		t.Fatal(err)
	}
	evs := g.Events()
	if len(evs) != 1 || len(evs[0].Changes) != bounds.MaxEventChanges || evs[0].MoreChanges != 10 || !strings.HasSuffix(evs[0].String(), "; and 10 more changes") {
		t.Fatalf("events %d, changes %d, more %d", len(evs), len(evs[0].Changes), evs[0].MoreChanges)
	}
}

func TestASlowListenerLosesTheOldestEventsAndHoldsNothingUp(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	release := make(chan struct{})
	var told sync.WaitGroup
	var mu sync.Mutex
	var seqs []uint64
	stop := g.OnEvent(func(e Event) {
		<-release
		mu.Lock()
		seqs = append(seqs, e.Seq)
		mu.Unlock()
		told.Done()
	})
	const n = bounds.EventQueue + 100
	for i := range n { // each a change: SetRules must not wait for the listener
		if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: int64(i + 1)}}}); err != nil {
			t.Fatal(err)
		}
	}
	dropped := g.DroppedEvents()
	if dropped < n-bounds.EventQueue-1 || dropped > n-bounds.EventQueue {
		t.Fatalf("dropped %d of %d events with a queue of %d", dropped, n, bounds.EventQueue)
	}
	told.Add(n - int(dropped))
	close(release)
	told.Wait()
	stop()
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("told out of order: %v", seqs)
		}
	}
	if last := seqs[len(seqs)-1]; last != n {
		t.Errorf("the last told is %d, want the newest, %d", last, n)
	}
	if g.DroppedEvents() != dropped {
		t.Errorf("DroppedEvents went from %d to %d once the listener stopped", dropped, g.DroppedEvents())
	}
}

func TestAFullGuardTellsOfEvictionsAndOverflowAtMostOnceASecond(t *testing.T) {
	g, clk := newGuard(t, Rules{}, WithMaxResources(2))
	mustEnter(t, g, "a").Exit(nil)
	mustEnter(t, g, "b").Exit(nil)
	mustEnter(t, g, "c").Exit(nil) // no room: (other)
	mustEnter(t, g, "d").Exit(nil) // within the second: counted, not told
	if evs := g.Events(); len(evs) != 1 || evs[0].Kind != resourcesFull || evs[0].Overflowed != 1 || evs[0].Evicted != 0 {
		t.Fatalf("events %+v, want one resourcesFull of 1 overflowed", evs)
	}
	clk.Advance(statsInterval + 2*time.Second) // a and b idle for a whole window
	mustEnter(t, g, "e").Exit(nil)             // evicts a and b
	evs := g.Events()
	if len(evs) != 2 || evs[1].Kind != resourcesFull || evs[1].Overflowed != 1 || evs[1].Evicted != 2 {
		t.Fatalf("events %+v, want a second resourcesFull: d overflowed, a and b evicted", evs)
	}
	if !strings.Contains(evs[1].String(), "2 idle resources evicted, 1 requests counted as (other)") {
		t.Errorf("String() = %q", evs[1].String())
	}
}

// healthCluster is a Cluster that tells its health changes.
type healthCluster struct {
	fakeCluster
	tell func(ClusterHealth)
}

func (c *healthCluster) OnHealthChange(f func(ClusterHealth)) { c.tell = f }

func TestClusterHealthChangesAreEvents(t *testing.T) {
	c := &healthCluster{}
	g, _ := newGuard(t, Rules{}, WithCluster(c))
	if c.tell == nil {
		t.Fatal("the guard did not ask the cluster to tell its health")
	}
	c.tell(ClusterHealth{Healthy: false, Failures: 1})
	c.tell(ClusterHealth{Healthy: false, Err: errors.New("NOPERM")})
	c.tell(ClusterHealth{Healthy: true})
	var got []string
	for _, e := range g.Events() {
		got = append(got, e.Kind+": "+e.String())
	}
	want := []string{"cluster_changed: cluster unhealthy: its limiters use their fallback", "cluster_changed: cluster unhealthy: NOPERM", "cluster_changed: cluster healthy"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestTheGuardLogsItsEvents(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, _ := newGuard(t, Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorCountBreaker, Count: 1, MinRequests: new(int64)}}}, WithLogger(log))
	mustEnter(t, g, "db").Exit(errors.New("boom"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		if strings.Contains(out, "closed → open") {
			for _, want := range []string{"level=WARN", `event=breaker_changed`, `resource=db`, `rule=breaker`, `to=open`, `failures=1`,
				`level=INFO msg="slidegate: rules in force: breaker rule \"breaker\" of \"db\" added"`} {
				if !strings.Contains(out, want) {
					t.Errorf("the log lacks %s:\n%s", want, out)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no breaker line in 20s:\n%s", out)
		}
		time.Sleep(time.Millisecond)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestEventsKeepsTheLatest(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	for i := range bounds.KeptEvents + 5 {
		if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: int64(i + 1)}}}); err != nil {
			t.Fatal(err)
		}
	}
	evs := g.Events()
	if len(evs) != bounds.KeptEvents || evs[0].Seq != 6 || evs[len(evs)-1].Seq != bounds.KeptEvents+5 {
		t.Fatalf("Events() has %d, from %d to %d", len(evs), evs[0].Seq, evs[len(evs)-1].Seq)
	}
}

func TestAChangedRuleIsToldInBoundedWords(t *testing.T) {
	overrides := map[string]int64{}
	for i := range 9999 {
		overrides[strings.Repeat("k", 200)+strconv.Itoa(i)] = 5
	}
	rule := FlowRule{Resource: "api", Limit: 10, PerKey: true, Overrides: overrides}
	g, _ := newGuard(t, Rules{Flow: []FlowRule{rule}})
	changed := maps.Clone(overrides)
	changed["tenant-a"] = 50 // one key added
	for i := range 20 {      // and twenty changed
		changed[strings.Repeat("k", 200)+strconv.Itoa(i)] = 6
	}
	rule.Overrides = changed
	if err := g.SetRules(Rules{Flow: []FlowRule{rule}}); err != nil {
		t.Fatal(err)
	}
	evs := g.Events()
	last := evs[len(evs)-1]
	if len(last.Changes) != 1 {
		t.Fatalf("changes %+v", last.Changes)
	}
	f := last.Changes[0].Fields
	if len(f) != 9 || f[0] != "overrides: 1 added, 20 changed" || f[8] != "and 14 more" ||
		!strings.HasPrefix(f[1], `overrides["kkkk`) || !strings.HasSuffix(f[1], `kk0"]: 5 → 6`) {
		t.Errorf("fields %q, want how many keys changed, 7 of them, cut, and how many more", f)
	}
	size := 0
	for _, x := range f {
		size += len(x)
	}
	if size > 9*(3*maxFieldValue+20) || len(last.String()) > maxEventText+len("…") {
		t.Errorf("the change takes %d bytes, its line %d", size, len(last.String()))
	}
}

// An override that goes is told as gone, not as a limit of 0 (which blocks
// the key), one that comes as new; and long keys that share their first
// bytes, cut, still say what happened to each.
func TestAnOverrideChangeIsToldTruthfully(t *testing.T) {
	long := strings.Repeat("x", 150)
	rule := FlowRule{Resource: "api", Limit: 10, PerKey: true, Overrides: map[string]int64{long + "1": 0, "a": 3, "b": 0}}
	g, _ := newGuard(t, Rules{Flow: []FlowRule{rule}})
	rule.Overrides = map[string]int64{long + "2": 0, "a": 0, "c": 0}
	if err := g.SetRules(Rules{Flow: []FlowRule{rule}}); err != nil {
		t.Fatal(err)
	}
	evs := g.Events()
	last := evs[len(evs)-1]
	if len(last.Changes) != 1 {
		t.Fatalf("changes %+v", last.Changes)
	}
	shown := `overrides["` + long[:48] + `"…"` + long[:15]
	want := []string{
		"overrides: 2 added, 2 removed, 1 changed",
		`overrides["a"]: 3 → 0`,
		`overrides["b"]: 0 → none`,
		`overrides["c"]: none → 0`,
		shown + `1"]: 0 → none`,
		shown + `2"]: none → 0`,
	}
	if f := last.Changes[0].Fields; !reflect.DeepEqual(f, want) {
		t.Fatalf("fields\n%s\nwant\n%s", strings.Join(f, "\n"), strings.Join(want, "\n"))
	}
}
