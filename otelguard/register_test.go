package otelguard_test

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/otelguard"
)

// The requests counter and the in-flight counter say what the guard's
// statistics say after known traffic: allowed, blocked by reason,
// succeeded, failed, in flight, each resource with its direction.
func TestRequestsAreTheGuardsTotals(t *testing.T) {
	h := newHarness(t, slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "orders", Limit: 4},
		{Resource: "GET /", Type: slidegate.ConcurrencyRule, Limit: 1},
	}})
	var held []slidegate.Entry
	blocked := 0
	for range 6 {
		e, err := h.enter(t, "orders")
		if err != nil {
			blocked++
			continue
		}
		held = append(held, e)
	}
	if blocked != 2 {
		t.Fatalf("%d of 6 blocked by a limit of 4, want 2", blocked)
	}
	held[0].ExitAt(h.clk.Now(), nil)
	held[1].ExitAt(h.clk.Now(), nil)
	held[2].ExitAt(h.clk.Now(), errFail)
	in, err := h.enter(t, "GET /", slidegate.WithInbound())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.enter(t, "GET /", slidegate.WithInbound()); err == nil {
		t.Fatal("a second request in flight allowed by a concurrency limit of 1")
	}

	ms := h.collect(t)
	const req = "slidegate.requests"
	for _, c := range []struct {
		kv   []string
		want int64
	}{
		{[]string{"slidegate.outcome", "allowed"}, 4},
		{[]string{"slidegate.outcome", "succeeded"}, 2},
		{[]string{"slidegate.outcome", "failed"}, 1},
		{[]string{"slidegate.outcome", "blocked", "slidegate.reason", "rate_limited"}, 2},
	} {
		kv := append([]string{"slidegate.resource", "orders", "slidegate.direction", "outbound"}, c.kv...)
		if got := value(t, ms, req, kv...); got != c.want {
			t.Errorf("orders %v = %d, want %d", c.kv, got, c.want)
		}
	}
	if got := value(t, ms, "slidegate.in_flight_requests", "slidegate.resource", "orders", "slidegate.direction", "outbound"); got != 1 {
		t.Errorf("orders in flight = %d, want 1", got)
	}
	root := []string{"slidegate.resource", "GET /", "slidegate.direction", "inbound"}
	if got := value(t, ms, req, append(root, "slidegate.outcome", "blocked", "slidegate.reason", "concurrency_limited")...); got != 1 {
		t.Errorf("GET / blocked for concurrency = %d, want 1", got)
	}
	if got := value(t, ms, "slidegate.in_flight_requests", root...); got != 1 {
		t.Errorf("GET / in flight = %d, want 1", got)
	}
	if got := value(t, ms, "slidegate.inbound.requests", "slidegate.outcome", "allowed"); got != 1 {
		t.Errorf("inbound allowed = %d, want 1", got)
	}
	if got := value(t, ms, "slidegate.inbound.requests", "slidegate.outcome", "blocked", "slidegate.reason", "concurrency_limited"); got != 1 {
		t.Errorf("inbound blocked = %d, want 1", got)
	}
	if got := value(t, ms, "slidegate.inbound.in_flight_requests"); got != 1 {
		t.Errorf("inbound in flight = %d, want 1", got)
	}
	// Each resource has its 3 outcomes and the 1 reason that blocked it,
	// and nothing else: no series for a reason that blocked nothing.
	if n := len(points(t, ms[req])); n != 2*(3+1) {
		t.Errorf("%d data points of %s for 2 resources, want %d", n, req, 2*(3+1))
	}
	in.ExitAt(h.clk.Now(), nil)
	ms = h.collect(t)
	if got := value(t, ms, "slidegate.inbound.in_flight_requests"); got != 0 {
		t.Errorf("inbound in flight after exit = %d, want 0", got)
	}
}

// A breaker that tripped reads 1 for open and 0 for closed and half-open;
// the rules' limits read as the rules say, learnt limits apart.
func TestBreakerStateAndRuleLimits(t *testing.T) {
	h := newHarness(t, slidegate.Rules{
		Flow: []slidegate.FlowRule{
			{Resource: "db", Limit: 100},
			{Resource: "db", Name: "pool", Type: slidegate.ConcurrencyRule, Limit: 8},
			{Resource: slidegate.InboundResource, Type: slidegate.AdaptiveRule, Limit: 20},
		},
		Breakers: []slidegate.BreakerRule{{Resource: "db", Strategy: slidegate.ConsecutiveFailuresBreaker, Count: 2, MinRequests: new(int64)}},
	})
	state := func(want string) {
		t.Helper()
		ms := h.collect(t)
		for _, st := range []string{"closed", "open", "half_open"} {
			var w int64
			if st == want {
				w = 1
			}
			got := value(t, ms, "slidegate.breaker.state", "slidegate.resource", "db", "slidegate.rule.name", "breaker",
				"slidegate.breaker.strategy", "consecutive_failures", "slidegate.breaker.state", st)
			if got != w {
				t.Errorf("state %s = %d, want %d (breaker %s)", st, got, w, want)
			}
		}
	}
	state("closed")
	for range 2 {
		e, err := h.enter(t, "db")
		if err != nil {
			t.Fatal(err)
		}
		e.ExitAt(h.clk.Now(), errFail)
	}
	if _, err := h.enter(t, "db"); err == nil {
		t.Fatal("the breaker did not open after 2 failures in a row")
	}
	state("open")

	ms := h.collect(t)
	if got := value(t, ms, "slidegate.rule.limit", "slidegate.resource", "db", "slidegate.rule.name", "qps", "slidegate.rule.type", "qps"); got != 100 {
		t.Errorf("qps limit = %d, want 100", got)
	}
	if got := value(t, ms, "slidegate.rule.limit", "slidegate.resource", "db", "slidegate.rule.name", "pool", "slidegate.rule.type", "concurrency"); got != 8 {
		t.Errorf("concurrency limit = %d, want 8", got)
	}
	if n := len(points(t, ms["slidegate.rule.limit"])); n != 2 {
		t.Errorf("%d rule limits, want 2 (the adaptive rule's is learnt)", n)
	}
	if got := value(t, ms, "slidegate.overload.limit", "slidegate.resource", slidegate.InboundResource, "slidegate.rule.name", "adaptive", "slidegate.rule.type", "adaptive"); got != 20 {
		t.Errorf("adaptive limit = %d, want 20", got)
	}
	if got := value(t, ms, "slidegate.overload.cap", "slidegate.resource", slidegate.InboundResource, "slidegate.rule.name", "adaptive", "slidegate.rule.type", "adaptive"); got != 20 {
		t.Errorf("adaptive cap = %d, want its limit, 20", got)
	}
	if got := value(t, ms, "slidegate.requests", "slidegate.resource", "db", "slidegate.direction", "outbound",
		"slidegate.outcome", "blocked", "slidegate.reason", "breaker_open"); got != 1 {
		t.Errorf("blocked by the breaker = %d, want 1", got)
	}
	if _, ok := ms["slidegate.cluster.healthy"]; ok && len(points(t, ms["slidegate.cluster.healthy"])) > 0 {
		t.Error("slidegate.cluster.healthy has data for a guard without a cluster")
	}
}

// The histogram of each resource has the counts and the sum of the guard's
// ResponseTimeTotals, in the buckets the response times fall in.
func TestDurationHistogramIsTheResponseTimeTotals(t *testing.T) {
	h := newHarness(t, slidegate.Rules{})
	took := func(name string, d time.Duration, opts ...slidegate.EntryOption) {
		t.Helper()
		e, err := h.enter(t, name, opts...)
		if err != nil {
			t.Fatal(err)
		}
		e.ExitAt(h.clk.Now()+int64(d), nil)
	}
	// Far from every default bound, so that the guard's 4.43% does not
	// move a response time across one.
	for range 3 {
		took("api", time.Millisecond) // ≤ 5 ms
	}
	took("api", 30*time.Millisecond) // ≤ 50 ms
	took("api", 30*time.Millisecond)
	took("api", 20*time.Second)                                // beyond 10 s
	took("web", 400*time.Millisecond, slidegate.WithInbound()) // ≤ 500 ms
	took("idle", 0)
	took("slow", 5*time.Minute) // beyond the longest response time the guard bins
	e, err := h.enter(t, "never-ended")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Exit(nil)

	ms := h.collect(t)
	noNaN(t, ms)
	api := histogram(t, ms, "slidegate.request.duration", "slidegate.resource", "api", "slidegate.direction", "outbound")
	bounds := otelguard.DefaultBuckets()
	if len(api.Bounds) != len(bounds) || len(api.BucketCounts) != len(bounds)+1 {
		t.Fatalf("%d bounds and %d buckets, want %d and %d", len(api.Bounds), len(api.BucketCounts), len(bounds), len(bounds)+1)
	}
	for i, b := range bounds {
		if api.Bounds[i] != b.Seconds() {
			t.Errorf("bound %d = %v s, want %v", i, api.Bounds[i], b.Seconds())
		}
	}
	want := make([]uint64, len(bounds)+1)
	want[0], want[3], want[len(bounds)] = 3, 2, 1
	for i := range want {
		if api.BucketCounts[i] != want[i] {
			t.Errorf("api bucket %d = %d, want %d (all %v)", i, api.BucketCounts[i], want[i], api.BucketCounts)
		}
	}
	stats, _ := h.g.Stats("api")
	if api.Count != 6 || int64(api.Count) != stats.Totals.Succeeded+stats.Totals.Failed {
		t.Errorf("api count = %d, want 6 = %d ended", api.Count, stats.Totals.Succeeded+stats.Totals.Failed)
	}
	if api.Sum != stats.Totals.RT.Seconds() || api.Sum < 20.06 || api.Sum > 20.07 {
		t.Errorf("api sum = %v s, want Totals.RT %v (20.063 s)", api.Sum, stats.Totals.RT)
	}
	web := histogram(t, ms, "slidegate.request.duration", "slidegate.resource", "web", "slidegate.direction", "inbound")
	if web.Count != 1 || web.BucketCounts[7] != 1 {
		t.Errorf("web: count %d, buckets %v; want 1 in bucket 7 (≤ 500 ms)", web.Count, web.BucketCounts)
	}
	inbound := histogram(t, ms, "slidegate.inbound.request.duration")
	if inbound.Count != 1 || inbound.BucketCounts[7] != 1 || inbound.Sum != web.Sum {
		t.Errorf("inbound: count %d, sum %v, buckets %v; want web's", inbound.Count, inbound.Sum, inbound.BucketCounts)
	}
	slow := histogram(t, ms, "slidegate.request.duration", "slidegate.resource", "slow", "slidegate.direction", "outbound")
	if slow.Count != 1 || slow.BucketCounts[len(bounds)] != 1 || slow.Sum != 300 {
		t.Errorf("slow: count %d, sum %v, buckets %v; want 1 beyond the last bound, 300 s", slow.Count, slow.Sum, slow.BucketCounts)
	}
	for _, name := range []string{"idle", "never-ended"} {
		dp := histogram(t, ms, "slidegate.request.duration", "slidegate.resource", name, "slidegate.direction", "outbound")
		want := uint64(0)
		if name == "idle" {
			want = 1 // a response time of 0, in the first bucket
		}
		if dp.Count != want || dp.BucketCounts[0] != want || dp.Sum != 0 {
			t.Errorf("%s: count %d, sum %v, buckets %v", name, dp.Count, dp.Sum, dp.BucketCounts)
		}
	}
	// A later collection keeps each series' start and moves its time.
	h.clk.Advance(time.Second)
	again := histogram(t, h.collect(t), "slidegate.request.duration", "slidegate.resource", "api", "slidegate.direction", "outbound")
	if !again.StartTime.Equal(api.StartTime) || again.Time.Before(api.Time) {
		t.Errorf("start %v then %v, time %v then %v", api.StartTime, again.StartTime, api.Time, again.Time)
	}
}

// Resources idle for longer than the guard's 10 s window still report
// their totals, and nothing NaN.
func TestIdleResourcesReportNoNaN(t *testing.T) {
	h := newHarness(t, slidegate.Rules{})
	e, _ := h.enter(t, "a")
	e.ExitAt(h.clk.Now()+int64(time.Millisecond), nil)
	if _, err := h.enter(t, "b"); err != nil { // never ends
		t.Fatal(err)
	}
	h.clk.Advance(time.Hour)
	ms := h.collect(t)
	noNaN(t, ms)
	if got := value(t, ms, "slidegate.requests", "slidegate.resource", "a", "slidegate.direction", "outbound", "slidegate.outcome", "succeeded"); got != 1 {
		t.Errorf("a succeeded an hour later = %d, want 1", got)
	}
	if dp := histogram(t, ms, "slidegate.request.duration", "slidegate.resource", "b", "slidegate.direction", "outbound"); dp.Count != 0 || dp.Sum != 0 {
		t.Errorf("b: count %d, sum %v, want zeros", dp.Count, dp.Sum)
	}
}

// Unregister ends the reads: no more data points from the guard, and a second
// Unregister is harmless.
func TestUnregisterEndsTheReads(t *testing.T) {
	h := newHarness(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "a", Limit: 10}}})
	e, _ := h.enter(t, "a")
	e.ExitAt(h.clk.Now(), nil)
	if n := len(points(t, h.collect(t)["slidegate.requests"])); n == 0 {
		t.Fatal("no data points before Unregister")
	}
	if err := h.reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := h.reg.Unregister(); err != nil {
		t.Fatalf("second Unregister: %v", err)
	}
	for name, m := range h.collect(t) {
		if name == "slidegate.request.duration" || name == "slidegate.inbound.request.duration" {
			continue // the Producer's, which the reader owns
		}
		if n := len(points(t, m)); n != 0 {
			t.Errorf("%s: %d data points after Unregister", name, n)
		}
	}
}

// Resource names are whatever callers enter: names that are not valid
// UTF-8 are exported with U+FFFD, and names that then read the same are
// one series with their counts added, never two data points with the same
// attributes.
func TestInvalidUTF8NamesAreMerged(t *testing.T) {
	h := newHarness(t, slidegate.Rules{})
	for _, name := range []string{"/a\xff", "/a\xfe", "/a\xfe", "/a\xc0\xff"} {
		e, err := h.enter(t, name)
		if err != nil {
			t.Fatal(err)
		}
		e.ExitAt(h.clk.Now()+int64(time.Millisecond), nil)
	}
	ms := h.collect(t)
	if got := value(t, ms, "slidegate.requests", "slidegate.resource", "/a\uFFFD", "slidegate.direction", "outbound", "slidegate.outcome", "allowed"); got != 4 {
		t.Errorf("allowed under /a\\uFFFD = %d, want 4", got)
	}
	if n := len(points(t, ms["slidegate.requests"])); n != 3 {
		t.Errorf("%d data points, want 3: one resource, nothing blocked", n)
	}
	if dp := histogram(t, ms, "slidegate.request.duration", "slidegate.resource", "/a\uFFFD", "slidegate.direction", "outbound"); dp.Count != 4 {
		t.Errorf("histogram count %d, want 4", dp.Count)
	}
}

func TestRegisterRefusesNil(t *testing.T) {
	if _, err := otelguard.Register(nil, nil); err == nil {
		t.Error("Register(nil, nil) did not fail")
	}
	if _, err := otelguard.NewProducer(nil); err == nil {
		t.Error("NewProducer(nil) did not fail")
	}
}

func TestWithBucketsRefusesBadBounds(t *testing.T) {
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bounds []time.Duration
		want   string
	}{
		{[]time.Duration{0}, "otelguard: buckets[0] = 0s: a bound must be above zero"},
		{[]time.Duration{time.Second, time.Second}, "otelguard: buckets[1] = 1s: a bound must be above the one before, 1s"},
		{[]time.Duration{time.Hour}, "otelguard: buckets[0] = 1h0m0s: a bound must be below 4m34.877906944s, the longest response time the guard bins"},
		{make([]time.Duration, otelguard.MaxBuckets+1), "otelguard: buckets: 65 bounds, more than the 64 a histogram takes"},
	} {
		_, err := otelguard.NewProducer(g, otelguard.WithBuckets(c.bounds...))
		if err == nil || err.Error() != c.want {
			t.Errorf("WithBuckets(%v): %v, want %q", c.bounds, err, c.want)
		}
	}
	if _, err := otelguard.NewProducer(g, otelguard.WithBuckets()); err != nil {
		t.Errorf("WithBuckets(): %v", err)
	}
}

// Rules of resources whose names read the same once made valid UTF-8
// keep a data point each, told apart by their rule names.
func TestRulesOfInvalidUTF8NamesAreToldApart(t *testing.T) {
	h := newHarness(t, slidegate.Rules{
		Flow: []slidegate.FlowRule{{Resource: "a\xff", Limit: 1}, {Resource: "a\xfe", Limit: 2}},
		Breakers: []slidegate.BreakerRule{
			{Resource: "a\xff", Strategy: slidegate.ErrorCountBreaker, Count: 5},
			{Resource: "a\xfe", Strategy: slidegate.ErrorCountBreaker, Count: 5},
		},
	})
	ms := h.collect(t)
	one := value(t, ms, "slidegate.rule.limit", "slidegate.resource", "a\uFFFD", "slidegate.rule.name", "qps", "slidegate.rule.type", "qps")
	two := value(t, ms, "slidegate.rule.limit", "slidegate.resource", "a\uFFFD", "slidegate.rule.name", "qps#2", "slidegate.rule.type", "qps")
	if one+two != 3 || one*two != 2 {
		t.Errorf("limits %d and %d, want 1 and 2", one, two)
	}
	if n := len(points(t, ms["slidegate.breaker.state"])); n != 2*3 {
		t.Errorf("%d breaker state data points, want 6", n)
	}
}

// The requests a shadow rule would have blocked are counted as
// would_block, by reason, among the allowed, and merged like the rest
// for names that read the same.
func TestWouldBlockIsCountedByReason(t *testing.T) {
	h := newHarness(t, slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "a\xff", Limit: 1, Shadow: true},
		{Resource: "a\xfe", Limit: 2, Shadow: true},
	}})
	for _, name := range []string{"a\xff", "a\xff", "a\xff", "a\xfe", "a\xfe", "a\xfe"} {
		if _, err := h.enter(t, name); err != nil {
			t.Fatalf("a shadow rule blocked %q: %v", name, err)
		}
	}
	ms := h.collect(t)
	kv := []string{"slidegate.resource", "a\uFFFD", "slidegate.direction", "outbound"}
	if got := value(t, ms, "slidegate.requests", append(kv, "slidegate.outcome", "would_block", "slidegate.reason", "rate_limited")...); got != 3 {
		t.Errorf("would_block = %d, want 3 (2 + 1)", got)
	}
	if got := value(t, ms, "slidegate.requests", append(kv, "slidegate.outcome", "allowed")...); got != 6 {
		t.Errorf("allowed = %d, want 6", got)
	}
}
