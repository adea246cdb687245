package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

var errBoom = errors.New("boom")

// fixture is a guard and its dashboard on one manual clock, sampled only by
// hand.
type fixture struct {
	clk *clock.Manual
	g   *slidegate.Guard
	d   *Dashboard
}

func newFixture(t testing.TB, gopts []slidegate.Option, opts ...Option) *fixture {
	t.Helper()
	clk := clock.NewManual(int64(time.Hour))
	g, err := slidegate.New(append([]slidegate.Option{slidegate.WithClock(clk)}, gopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(g, append([]Option{WithInterval(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &fixture{clk: clk, g: g, d: d}
}

// requests sends n requests to resource, each taking rt and failing if fail
// is set, and returns how many the guard allowed.
func (f *fixture) requests(t *testing.T, resource string, n int, rt time.Duration, fail bool) int {
	t.Helper()
	allowed := 0
	for range n {
		e, err := f.g.Enter(context.Background(), resource)
		if errors.Is(err, flow.ErrBlocked) {
			continue
		}
		if err != nil {
			t.Fatalf("Enter(%q): %v", resource, err)
		}
		var exitErr error
		if fail {
			exitErr = errBoom
		}
		e.ExitAt(f.clk.Now()+int64(rt), exitErr)
		allowed++
	}
	return allowed
}

// step advances the clock by d and takes a sample.
func (f *fixture) step(d time.Duration) {
	f.clk.Advance(d)
	f.d.Sample()
}

// snapshot fetches api/snapshot.
func (f *fixture) snapshot(t *testing.T) snapshotJSON {
	t.Helper()
	w := httptest.NewRecorder()
	f.d.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/snapshot", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET api/snapshot: %d %s", w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET api/snapshot: Content-Type %q", ct)
	}
	var s snapshotJSON
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
		t.Fatalf("decoding api/snapshot: %v\n%s", err, w.Body)
	}
	return s
}

func findResource(s snapshotJSON, name string) (resourceJSON, bool) {
	for _, r := range s.Resources {
		if r.Name == name {
			return r, true
		}
	}
	return resourceJSON{}, false
}

func names(rs []resourceJSON) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func TestSnapshotRatesAreExactDeltasOfTotals(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /orders", Limit: 20}}}); err != nil {
		t.Fatal(err)
	}
	// In the first second: 25 requests, 20 allowed, 4 of them failing.
	if got := f.requests(t, "GET /orders", 16, 10*time.Millisecond, false) + f.requests(t, "GET /orders", 4, 10*time.Millisecond, true) + f.requests(t, "GET /orders", 5, 0, false); got != 20 {
		t.Fatalf("allowed %d requests, want 20", got)
	}
	f.step(time.Second)
	// Over the next two seconds: 10 requests, all allowed (half a second
	// on: at one second, the first second's 20 are still within the limit's
	// interval).
	f.clk.Advance(500 * time.Millisecond)
	f.requests(t, "GET /orders", 10, 30*time.Millisecond, false)
	f.step(1500 * time.Millisecond)

	s := f.snapshot(t)
	if s.Seq != 2 || s.History != defaultHistory || s.Editing || s.Interval != 0 {
		t.Errorf("snapshot seq %d, history %d, editing %v, interval %v; want 2, %d, false, 0", s.Seq, s.History, s.Editing, s.Interval, defaultHistory)
	}
	r, ok := findResource(s, "GET /orders")
	if !ok {
		t.Fatalf("GET /orders missing from %v", names(s.Resources))
	}
	h := r.History
	if h == nil || len(h.T) != 2 {
		t.Fatalf("history %+v, want 2 points", h)
	}
	want := [][3]float64{{20, 5, 4}, {5, 0, 0}} // allowed/s, blocked/s, failed/s
	for i, w := range want {
		if got := [3]float64{h.AllowedRate[i], h.BlockedRate[i], h.FailedRate[i]}; got != w {
			t.Errorf("point %d: allowed/s, blocked/s, failed/s = %v, want %v", i, got, w)
		}
		if h.InFlight[i] != 0 || h.Breaker[i] != "" {
			t.Errorf("point %d: in flight %d, breaker %q; want 0, none", i, h.InFlight[i], h.Breaker[i])
		}
	}
	if dt := h.T[1] - h.T[0]; math.Abs(dt-2) > 1e-3 {
		t.Errorf("points %.3f s apart, want 2", dt)
	}
	if h.T[1] != s.Time {
		t.Errorf("newest point at %v, snapshot at %v", h.T[1], s.Time)
	}
	// Quantiles are the guard's, within its 3.2%.
	if p := h.P50[0]; math.Abs(p-0.010) > 0.010*0.04 {
		t.Errorf("P50 %v s after the first second, want about 0.010", p)
	}
	if p := h.P99[1]; math.Abs(p-0.030) > 0.030*0.04 {
		t.Errorf("P99 %v s after 3 s, want about 0.030", p)
	}
	if st := r.Stats; st.Totals.Allowed != 30 || st.Totals.Blocked != 5 || st.Totals.Failed != 4 || st.Allowed != 30 {
		t.Errorf("stats %+v, want totals 30 allowed, 5 blocked, 4 failed", st)
	}
	if len(s.Rules.Flow) != 1 || s.Rules.Flow[0].Limit != 20 {
		t.Errorf("rules %+v, want the QPS rule", s.Rules)
	}
}

func TestInboundHasItsOwnSeries(t *testing.T) {
	f := newFixture(t, nil)
	for range 6 {
		e, err := f.g.Enter(context.Background(), "GET /", slidegate.WithInbound())
		if err != nil {
			t.Fatal(err)
		}
		e.Exit(nil)
	}
	f.step(2 * time.Second)
	s := f.snapshot(t)
	if h := s.Inbound.History; h == nil || len(h.AllowedRate) != 1 || h.AllowedRate[0] != 3 {
		t.Errorf("inbound history %+v, want one point of 3 allowed/s", h)
	}
}

func TestBreakerStateIsRecordedPerPoint(t *testing.T) {
	one := int64(1)
	f := newFixture(t, nil)
	if err := f.g.SetRules(slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "db", Strategy: slidegate.ErrorCountBreaker, Count: 3, MinRequests: &one, OpenTimeout: slidegate.Duration(time.Minute)},
	}}); err != nil {
		t.Fatal(err)
	}
	f.requests(t, "db", 2, time.Millisecond, false)
	f.step(time.Second)
	f.requests(t, "db", 5, time.Millisecond, true) // three fail, then the breaker blocks two
	f.step(time.Second)

	s := f.snapshot(t)
	r, _ := findResource(s, "db")
	if got := r.History.Breaker; len(got) != 2 || got[0] != "closed" || got[1] != "open" {
		t.Errorf("breaker states %q, want [closed open]", got)
	}
	if r.Breaker != "open" || r.History.BlockedRate[1] != 2 || r.History.FailedRate[1] != 3 {
		t.Errorf("resource breaker %q, blocked/s %v, failed/s %v; want open, 2, 3", r.Breaker, r.History.BlockedRate[1], r.History.FailedRate[1])
	}
	if len(s.Breakers) != 1 || s.Breakers[0].State != "open" || s.Breakers[0].Rule != "breaker" || math.Abs(s.Breakers[0].RetryAfter-59) > 0.01 {
		t.Errorf("breakers %+v, want \"breaker\" open for 59 s more", s.Breakers)
	}
}

func TestHistoryIsBoundedByWithHistory(t *testing.T) {
	f := newFixture(t, nil, WithHistory(3))
	for i := 1; i <= 7; i++ {
		f.requests(t, "a", i, 0, false)
		f.step(time.Second)
	}
	r, _ := findResource(f.snapshot(t), "a")
	if got := r.History.AllowedRate; len(got) != 3 || got[0] != 5 || got[1] != 6 || got[2] != 7 {
		t.Errorf("allowed/s history %v, want the last three samples [5 6 7]", got)
	}
	if s := f.d.series["a"]; cap(s.ring) > 3 {
		t.Errorf("ring capacity %d, want at most the history, 3", cap(s.ring))
	}
}

func TestSeriesRingKeepsNewestInOrder(t *testing.T) {
	for _, limit := range []int{1, 2, 5, 16, 17, 300} {
		var s series
		for i := range 3*limit + 1 {
			s.add(point{at: int64(i)}, limit)
		}
		var got []int64
		s.newest(limit+1, func(p point) { got = append(got, p.at) })
		if len(got) != limit || got[0] != int64(2*limit+1) || got[limit-1] != int64(3*limit) {
			t.Errorf("limit %d: kept %v, want the last %d", limit, got, limit)
		}
		for i := 1; i < len(got); i++ {
			if got[i] != got[i-1]+1 {
				t.Fatalf("limit %d: out of order: %v", limit, got)
			}
		}
		if p, _ := s.lastPoint(); p.at != int64(3*limit) {
			t.Errorf("limit %d: last point %d, want %d", limit, p.at, 3*limit)
		}
		for _, n := range []int{0, 1, limit / 2, limit - 1} {
			var newest []int64
			s.newest(n, func(p point) { newest = append(newest, p.at) })
			if len(newest) != n || (n > 0 && (newest[0] != int64(3*limit-n+1) || newest[n-1] != int64(3*limit))) {
				t.Errorf("limit %d: newest %d points %v, want %d to %d", limit, n, newest, 3*limit-n+1, 3*limit)
			}
		}
	}
}

func TestResourcesGoneFromTheGuardAreDropped(t *testing.T) {
	f := newFixture(t, []slidegate.Option{slidegate.WithMaxResources(1)})
	f.requests(t, "a", 4, 0, false)
	f.step(time.Second)
	if _, ok := findResource(f.snapshot(t), "a"); !ok {
		t.Fatal("a missing after its traffic")
	}
	// Idle for more than the guard's window, a is evicted to make room for b.
	f.clk.Advance(12 * time.Second)
	f.requests(t, "b", 1, 0, false)
	f.step(time.Second)

	s := f.snapshot(t)
	if got := names(s.Resources); len(got) != 1 || got[0] != "b" {
		t.Errorf("resources %v, want [b]", got)
	}
	if _, ok := f.d.series["a"]; ok {
		t.Error("a's history is still kept")
	}
}

func TestTotalsGoingDownCountAsARestart(t *testing.T) {
	f := newFixture(t, []slidegate.Option{slidegate.WithMaxResources(1)})
	f.requests(t, "a", 10, 0, false)
	f.step(time.Second)
	// Between two samples, a is evicted (for b) and comes back (evicting b):
	// its totals start again from zero, below the last sample's 10.
	f.clk.Advance(12 * time.Second)
	f.requests(t, "b", 1, 0, false)
	f.clk.Advance(12 * time.Second)
	f.requests(t, "a", 3, 0, false)
	f.step(time.Second)

	r, ok := findResource(f.snapshot(t), "a")
	if !ok {
		t.Fatal("a missing")
	}
	if got := r.History.AllowedRate; len(got) != 2 || got[0] != 10 || got[1] != 3.0/25 {
		t.Errorf("allowed/s %v, want [10 %v]: the 3 requests since the restart over the 25 s between samples", got, 3.0/25)
	}
}

func TestOtherResourceRatesFollowItsTotals(t *testing.T) {
	f := newFixture(t, []slidegate.Option{slidegate.WithMaxResources(1)})
	held, err := f.g.Enter(context.Background(), "a") // in flight: never evicted
	if err != nil {
		t.Fatal(err)
	}
	defer held.Exit(nil)
	f.requests(t, "b", 4, 0, false) // no room: counted as OtherResource
	f.step(time.Second)
	r, ok := findResource(f.snapshot(t), slidegate.OtherResource)
	if !ok || r.History.AllowedRate[0] != 4 {
		t.Fatalf("%s: %+v, want 4 allowed/s", slidegate.OtherResource, r)
	}
	// Quiet for a whole window. The guard never drops OtherResource, but
	// may stop listing it; either way its totals go on.
	f.step(12 * time.Second)
	if r, ok := findResource(f.snapshot(t), slidegate.OtherResource); ok && r.History.AllowedRate[1] != 0 {
		t.Fatalf("%s while quiet: %v allowed/s, want 0", slidegate.OtherResource, r.History.AllowedRate)
	}
	f.requests(t, "c", 2, 0, false)
	f.step(time.Second)
	r, ok = findResource(f.snapshot(t), slidegate.OtherResource)
	if n := len(r.History.AllowedRate); !ok || r.History.AllowedRate[n-1] != 2 {
		t.Errorf("%s after it came back: %+v, want 2 allowed/s, not the 6 it counted in all", slidegate.OtherResource, r.History)
	}
}

func TestRates(t *testing.T) {
	var blocked slidegate.Totals
	blocked.BlockedBy[flow.RateLimited] = 6
	tests := []struct {
		name                     string
		prev, cur                slidegate.Totals
		elapsed                  float64
		allowed, blocked, failed float64
	}{
		{"growing", slidegate.Totals{Allowed: 10, Failed: 2}, slidegate.Totals{Allowed: 30, Failed: 6, BlockedBy: blocked.BlockedBy}, 2, 10, 3, 2},
		{"still", slidegate.Totals{Allowed: 10}, slidegate.Totals{Allowed: 10}, 1, 0, 0, 0},
		{"restarted", slidegate.Totals{Allowed: 100, Failed: 50}, slidegate.Totals{Allowed: 8, Failed: 2}, 4, 2, 0, 0.5},
		{"restarted, failed alone went down", slidegate.Totals{Allowed: 1, Failed: 5}, slidegate.Totals{Allowed: 3, Failed: 1}, 1, 3, 0, 1},
		{"restarted, blocked alone went down", blocked, slidegate.Totals{Allowed: 2}, 1, 2, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rates(tt.prev, tt.cur, tt.elapsed)
			a, b, f := r.allowed, r.blocked, r.failed
			if a != tt.allowed || b != tt.blocked || f != tt.failed {
				t.Errorf("rates = %v, %v, %v; want %v, %v, %v", a, b, f, tt.allowed, tt.blocked, tt.failed)
			}
		})
	}
}

func TestSampleWithoutTimePassingDoesNothing(t *testing.T) {
	f := newFixture(t, nil)
	f.requests(t, "a", 1, 0, false)
	f.d.Sample() // no time since New
	f.step(time.Second)
	f.d.Sample() // no time since the last sample
	r, _ := findResource(f.snapshot(t), "a")
	if got := r.History.AllowedRate; len(got) != 1 || got[0] != 1 {
		t.Errorf("allowed/s %v, want one point of 1", got)
	}
}

func TestSamplerGoroutineSamplesEveryIntervalAndCloseStopsIt(t *testing.T) {
	clk := clock.NewManual(0)
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(g, WithInterval(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		waitFor(t, "the sampler to sleep", func() bool { return clk.Sleepers() == 1 })
		clk.Advance(500 * time.Millisecond)
		waitFor(t, "a sample", func() bool { d.sampling.Lock(); defer d.sampling.Unlock(); return d.seq == i })
	}
	waitFor(t, "the sampler to sleep", func() bool { return clk.Sleepers() == 1 })
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if n := clk.Sleepers(); n != 0 {
		t.Errorf("%d sleepers after Close, want 0", n)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// countingClock is a manual clock that counts how often it is read. It is
// still a clock.Sleeper, so it drives a sampler goroutine as a Manual does.
type countingClock struct {
	*clock.Manual
	reads atomic.Int64
}

func (c *countingClock) Now() int64 {
	c.reads.Add(1)
	return c.Manual.Now()
}

func TestSampleReadsTheClockOnce(t *testing.T) {
	clk := &countingClock{Manual: clock.NewManual(int64(time.Hour))}
	// One resource kept, so that OtherResource counts too; a breaker, and
	// inbound traffic: every reading the sampler makes of the guard.
	g, err := slidegate.New(slidegate.WithClock(clk), slidegate.WithMaxResources(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(slidegate.Rules{
		Flow:     []slidegate.FlowRule{{Resource: "a", Limit: 3}},
		Breakers: []slidegate.BreakerRule{{Resource: "a", Strategy: slidegate.ErrorCountBreaker, Count: 100}},
	}); err != nil {
		t.Fatal(err)
	}
	before := clk.reads.Load()
	d, err := New(g, WithInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if n := clk.reads.Load() - before; n != 1 {
		t.Errorf("New read the clock %d times, want 1", n)
	}
	for i := range 4 {
		// b has no room: OtherResource, which the guard lists only once it
		// has counted something; the first sample finds it unlisted.
		for _, name := range []string{"a", "b"}[:1+min(i, 1)] {
			for range 4 {
				if e, err := g.Enter(context.Background(), name, slidegate.WithInbound()); err == nil {
					e.Exit(nil)
				}
			}
		}
		clk.Advance(2 * time.Second) // past the limit's interval
		before := clk.reads.Load()
		d.Sample()
		if n := clk.reads.Load() - before; n != 1 {
			t.Errorf("sample %d read the clock %d times, want 1", i+1, n)
		}
	}
	before = clk.reads.Load()
	d.Sample() // no time has passed: nothing to record
	if n := clk.reads.Load() - before; n != 1 {
		t.Errorf("a sample without time passing read the clock %d times, want 1", n)
	}
	s := (&fixture{d: d}).snapshot(t)
	a, okA := findResource(s, "a")
	other, okOther := findResource(s, slidegate.OtherResource)
	if s.Seq != 4 || !okA || !okOther || len(a.History.T) != 4 || len(other.History.T) != 3 || len(s.Breakers) != 1 || len(s.Inbound.History.T) != 4 {
		t.Fatalf("snapshot seq %d, resources %v, %d breakers; want 4 samples of a, 3 of %s, a's breaker and the inbound traffic", s.Seq, names(s.Resources), len(s.Breakers), slidegate.OtherResource)
	}
	if got := a.History.AllowedRate; got[0] != 1.5 || got[3] != 1.5 || a.Stats.Allowed != 12 || a.Stats.Blocked != 4 {
		t.Errorf("a: allowed/s %v, stats %+v; want 1.5 allowed/s, and 12 allowed and 4 blocked in the last 10 s", got, a.Stats)
	}
	if got := other.History.AllowedRate; got[0] != 2 || got[2] != 2 {
		t.Errorf("%s: allowed/s %v, want 2", slidegate.OtherResource, got)
	}
}

func TestNewWithNilGuardUsesDefault(t *testing.T) {
	d, err := New(nil, WithInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.g != slidegate.Default() {
		t.Error("New(nil) does not watch slidegate.Default()")
	}
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewReturnsAnErrorNamingABadOption(t *testing.T) {
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithInterval(-time.Second), "interval = -1s"},
		{WithHistory(0), "history = 0"},
		{WithMaxStreams(0), "max streams = 0"},
		{WithMaxStreamAge(999 * time.Millisecond), "max stream age = 999ms"},
		{WithMaxStreamAge(-time.Minute), "max stream age = -1m0s"},
		{WithSnapshotPoints(-1), "snapshot points = -1"},
		{WithRuleEditing(""), `rule editing token = ""`},
	} {
		d, err := New(g, WithInterval(0), tc.opt)
		if d != nil || !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, %v; want an errInvalidConfig naming %q", d, err, tc.want)
		}
	}
}
