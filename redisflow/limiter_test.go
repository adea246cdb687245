package redisflow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/redistest"
)

func TestNewReturnsAnErrorNamingABadOption(t *testing.T) {
	good := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer good.Close()
	for _, tc := range []struct {
		client redis.Scripter
		opts   []Option
		want   string
	}{
		{nil, nil, "client = nil"},
		{good, []Option{WithPrefix("")}, `prefix = ""`},
		{good, []Option{WithPrefix("a{b")}, `prefix = "a{b"`},
		{good, []Option{WithTimeout(0)}, "timeout = 0s"},
		{good, []Option{WithFallback(9)}, "fallback = FallbackPolicy(9)"},
		{good, []Option{WithInstances(-2)}, "instances = -2"},
		{good, []Option{withHeartbeat(-time.Second)}, "heartbeat = -1s"},
		{good, []Option{withProbeBackoff(time.Second, time.Millisecond)}, "probe backoff = 1s..1ms"},
		{good, []Option{WithClock(nil)}, "clock = nil"},
		{good, []Option{WithLogger(nil)}, "logger = nil"},
		{good, []Option{withInstanceID("")}, `instance id = ""`},
		{good, []Option{WithKeyMemory(nil)}, "key memory = nil"},
		{good, []Option{withHeartbeat(time.Microsecond)}, "heartbeat = 1µs: must be between 1ms and 24h0m0s"},
		{good, []Option{withHeartbeat(math.MaxInt64)}, "heartbeat = 2562047h47m16.854775807s: must be between 1ms and 24h0m0s"},
		{good, []Option{withProbeBackoff(time.Microsecond, time.Second)}, "probe backoff = 1µs..1s"},
		{good, []Option{withProbeBackoff(time.Second, 25*time.Hour)}, "probe backoff = 1s..25h0m0s"},
	} {
		c, err := New(tc.client, tc.opts...)
		if err == nil {
			c.Close()
			t.Errorf("New(%v) = nil error; want one naming %q", tc.want, tc.want)
			continue
		}
		if !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v; want errInvalidConfig naming %q", err, tc.want)
		}
	}
}

func TestNewLimiterReturnsAnErrorNamingABadArgument(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer rdb.Close()
	c, err := New(rdb, WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name     string
		limit    int64
		interval time.Duration
		opts     []LimiterOption
		want     string
	}{
		{"", 1, time.Second, nil, "name is empty"},
		{"a", -1, time.Second, nil, "limit = -1"},
		{"a", 1, 0, nil, "interval = 0s"},
		{"a", 1, time.Second + 1, nil, "interval = 1.000000001s: must be positive and divide into 25 buckets of whole microseconds"},
		{"a", 1, time.Second, []LimiterOption{WithBuckets(0)}, "buckets = 0: must be between 1 and 1000"},
		{"a", 1, time.Second, []LimiterOption{WithBuckets(1001)}, "buckets = 1001: must be between 1 and 1000"},
		{"a", 1, time.Second, []LimiterOption{WithLease(0, 0)}, "lease = 0"},
		{"a", 1, time.Second, []LimiterOption{WithLease(flowlimits.MaxLimit+1, 0)}, fmt.Sprintf("lease = %d: must be between 1 and %d", flowlimits.MaxLimit+1, flowlimits.MaxLimit)},
		{"a", 1, time.Second, []LimiterOption{WithLease(5, -time.Second)}, "lease ttl = -1s"},
	} {
		_, err := c.NewLimiter(tc.name, tc.limit, tc.interval, tc.opts...)
		if !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewLimiter(%q, %d, %v): %v; want errInvalidConfig naming %q", tc.name, tc.limit, tc.interval, err, tc.want)
		}
	}
}

func TestKeysShareOneHashTagAndEscapeBraces(t *testing.T) {
	for name, want := range map[string]string{
		"GET /orders": "slidegate:{GET /orders}:1s:25",
		"a{b}c%":      "slidegate:{a%7Bb%7Dc%25}:1s:25",
	} {
		if got := key("slidegate", name, time.Second, 25); got != want {
			t.Errorf("key(%q) = %q; want %q", name, got, want)
		}
	}
}

// A burst across several instances allows exactly the limit: no more, and,
// within one interval, no fewer.
func TestBurstAcrossInstancesAllowsExactlyTheLimit(t *testing.T) {
	srv := redistest.Start(t)
	const limit, instances, workers, each = 100, 3, 4, 60
	var ls []*Limiter
	for range instances {
		c := cluster(t, srv, WithInstances(instances))
		ls = append(ls, limiter(t, c, "burst", limit, time.Minute))
	}
	var allowed, blocked atomic.Int64
	var wg sync.WaitGroup
	for i := range instances * workers {
		wg.Go(func() {
			l := ls[i%instances]
			for range each {
				d := l.allow(bg)
				switch {
				case d.Allowed:
					allowed.Add(1)
				case d.Reason != flow.RateLimited || d.RetryAfter <= 0 || d.RetryAfter > time.Minute+time.Minute/25:
					t.Errorf("block %+v: want RateLimited with a RetryAfter within the interval and a bucket", d)
				default:
					blocked.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != limit {
		t.Errorf("allowed %d of %d requests; want exactly the limit, %d", got, instances*workers*each, limit)
	}
	for _, l := range ls {
		if s := l.c.Stats(); !s.Healthy || s.Fallbacks != 0 {
			t.Errorf("stats %+v: want healthy, no fallback", s)
		}
	}
}

// hammer runs workers goroutines on each limiter, each asking for n
// permits again and again, recording every answer from Redis at the Redis
// server's time, until the grants span the given number of intervals and
// some request was blocked. It fails the test if that takes more than a
// minute, or if a limiter failed to reach Redis or fell back: then grants
// would be missing.
func hammer(t *testing.T, ls []*Limiter, workers int, n int64, intervals int) *grants {
	t.Helper()
	g := &grants{}
	for _, l := range ls {
		l.trace = g.add
	}
	span := int64(intervals) * ls[0].interval.Microseconds()
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for _, l := range ls {
		for range workers {
			wg.Go(func() {
				for !g.overloaded(span) && time.Now().Before(deadline) {
					l.AllowN(bg, n)
				}
			})
		}
	}
	wg.Wait()
	if !g.overloaded(span) {
		t.Fatalf("in a minute, grants spanned %dµs of %dµs wanted, with %d blocks", g.last-g.first, span, g.blocks)
	}
	for _, l := range ls {
		if s := l.c.Stats(); !s.Healthy || s.Failures != 0 || s.Fallbacks != 0 {
			t.Fatalf("stats %+v: want every decision taken by Redis", s)
		}
	}
	return g
}

// No interval of the limit's length, wherever it starts, holds more than the
// limit, across several limiters in one process; and no request is blocked
// while the window it falls in holds less than the limit, so that under
// steady overload the cluster allows k/(k+1) of the limit per interval.
func TestNoIntervalHoldsMoreThanTheLimit(t *testing.T) {
	srv := redistest.Start(t)
	const limit, interval, k = 30, 200 * time.Millisecond, 10
	var ls []*Limiter
	for range 4 {
		c := cluster(t, srv, WithInstances(4))
		ls = append(ls, limiter(t, c, "window", limit, interval, WithBuckets(k)))
	}
	g := hammer(t, ls, 2, 1, 6)
	most, end := busiest(g.list, interval.Microseconds())
	if most > limit {
		t.Fatalf("%d allowed in the interval ending at %dµs; the limit is %d", most, end, limit)
	}
	if err := blockedOnlyWhenFull(g.list, (interval / k).Microseconds(), k, limit, 1); err != nil {
		t.Error(err)
	}
	t.Logf("%d grants over %v, at most %d in one interval; %d blocks", g.granted, time.Duration(g.last-g.first)*time.Microsecond, most, g.blocks)
	checkHash(t, client(t, srv.Addr), ls[0])
}

// checkHash checks that l's hash keeps its window's sum, and no bucket
// outside the window.
func checkHash(t *testing.T, rdb *redis.Client, l *Limiter) {
	t.Helper()
	h, err := rdb.HGetAll(bg, l.redisKey()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var o, s, sum int64
	fmt.Sscan(h["o"], &o)
	fmt.Sscan(h["s"], &s)
	for f, v := range h {
		var b, c int64
		if f == "o" || f == "s" {
			continue
		}
		fmt.Sscan(f, &b)
		fmt.Sscan(v, &c)
		if b < o-l.k || b > o {
			t.Errorf("hash %v: bucket %d is outside the window %d..%d", h, b, o-l.k, o)
		}
		sum += c
	}
	if s != sum {
		t.Errorf("hash %v: s = %d; the buckets hold %d", h, s, sum)
	}
}

// Batches are all or nothing, and the bound holds for them too.
func TestBatchesKeepTheBound(t *testing.T) {
	srv := redistest.Start(t)
	const limit, interval, k = 50, 100 * time.Millisecond, 5
	var ls []*Limiter
	for range 3 {
		ls = append(ls, limiter(t, cluster(t, srv, WithInstances(3)), "batch", limit, interval, WithBuckets(k)))
	}
	g := hammer(t, ls, 2, 7, 5)
	if most, end := busiest(g.list, interval.Microseconds()); most > limit {
		t.Fatalf("%d allowed in the interval ending at %dµs; the limit is %d", most, end, limit)
	}
	if err := blockedOnlyWhenFull(g.list, (interval / k).Microseconds(), k, limit, 7); err != nil {
		t.Error(err)
	}
	checkHash(t, client(t, srv.Addr), ls[0])
	for _, x := range g.list {
		if x.n != 7 && x.n != 0 {
			t.Fatalf("a grant of %d; want whole batches of 7", x.n)
		}
	}
	if d := ls[0].AllowN(bg, limit+1); d.Allowed || d.Reason != flow.ExceedsLimit {
		t.Errorf("AllowN(limit+1) = %+v; want ExceedsLimit", d)
	}
}

// Every key the cluster writes expires once it no longer counts: the
// limit's when its newest bucket has left the window, k to k+1 bucket widths
// after its last grant; the heartbeat's three periods after the last beat;
// New's check's within a millisecond. Each has such a ttl whenever it is
// seen, whenever that is: a key may be gone by then, but not before it
// stops counting. Once the instance leaves, nothing is left.
func TestKeysExpireOnceTheyNoLongerCount(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr)
	const heartbeat = 50 * time.Millisecond
	c := cluster(t, srv, WithPrefix("ttl"), withHeartbeat(heartbeat))
	const interval, k = 100 * time.Millisecond, 4
	width := interval / k
	l := limiter(t, c, "short", 3, interval, WithBuckets(k))
	allowed := 0
	var last time.Time // before the last grant's round trip
	for range 5 {      // 3 allowed, 2 blocked: a block must not strip the ttl
		before := time.Now()
		if l.allow(bg).Allowed {
			allowed, last = allowed+1, before
		}
	}
	if allowed != 3 {
		t.Fatalf("allowed %d of 5; want the limit, 3", allowed)
	}
	switch ttl := rdb.PTTL(bg, l.redisKey()).Val(); {
	case ttl == -2 && time.Since(last) < k*width:
		t.Errorf("the limit's key is gone %v after its last grant; it counts for %v at least", time.Since(last), k*width)
	case ttl == -1 || ttl > (k+1)*width:
		t.Errorf("PTTL of the limit's key = %v; want at most %v", ttl, (k+1)*width)
	}
	if !waitFor(5*time.Second, func() bool { return rdb.Exists(bg, "ttl:instances").Val() == 1 }) {
		t.Fatal("no heartbeat key")
	}
	bounds := map[string]time.Duration{
		l.redisKey():        (k + 1) * width,
		"ttl:instances":     3 * heartbeat,
		"ttl:{check}:1µs:1": time.Millisecond, // New's check: a window of 1µs
	}
	for _, key := range rdb.Keys(bg, "ttl:*").Val() {
		bound, ok := bounds[key]
		if !ok {
			t.Errorf("key %q: not one the cluster writes", key)
			continue
		}
		// -2: it expired since KEYS listed it.
		if ttl := rdb.PTTL(bg, key).Val(); ttl == -1 || ttl > bound {
			t.Errorf("PTTL %s = %v; want at most %v", key, ttl, bound)
		}
	}
	c.Close() // the heartbeat stops, and the instance leaves
	if !waitFor(5*time.Second, func() bool { return len(rdb.Keys(bg, "ttl:*").Val()) == 0 }) {
		t.Errorf("keys left behind: %v", rdb.Keys(bg, "ttl:*").Val())
	}
}

func TestScriptsAreLoadedAgainAfterScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr)
	// One heartbeat, at the start, which must be over before the count:
	// its own script load is not this test's.
	c := cluster(t, srv, withHeartbeat(time.Hour))
	if !waitFor(5*time.Second, c.joined.Load) {
		t.Fatal("the first heartbeat did not reach Redis")
	}
	l := limiter(t, c, "flush", 5, time.Minute)
	for range 3 {
		if !l.allow(bg).Allowed {
			t.Fatal("blocked under the limit")
		}
	}
	loads := c.Stats().ScriptLoads
	if err := rdb.ScriptFlush(bg).Err(); err != nil {
		t.Fatal(err)
	}
	allowed := 0
	for range 4 {
		if l.allow(bg).Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("allowed %d after the flush; want the 2 left of the limit", allowed)
	}
	if s := c.Stats(); s.ScriptLoads != loads+1 || s.Failures != 0 || s.Fallbacks != 0 {
		t.Errorf("stats %+v; want one more script load (from %d), no failure, no fallback", s, loads)
	}
	if ok := rdb.ScriptExists(bg, limitScript.Hash()).Val(); len(ok) != 1 || !ok[0] {
		t.Error("the limit script is not loaded after the retry")
	}
}

func TestLeaseCutsRoundTripsAndReleaseGivesPermitsBack(t *testing.T) {
	srv := redistest.Start(t)
	m := clock.NewManual(0)
	a := cluster(t, srv, WithInstances(2), WithClock(m))
	b := cluster(t, srv, WithInstances(2), WithClock(m))
	la := limiter(t, a, "lease", 20, time.Minute, WithLease(10, time.Hour))
	lb := limiter(t, b, "lease", 20, time.Minute, WithLease(10, time.Hour))
	for range 10 {
		if !la.allow(bg).Allowed {
			t.Fatal("blocked under the limit")
		}
	}
	if n := a.Stats().RoundTrips; n != 1 {
		t.Errorf("10 decisions took %d round trips; want 1, the rest from the lease", n)
	}
	count := func(l *Limiter, tries int) (n int) {
		for range tries {
			if l.allow(bg).Allowed {
				n++
			}
		}
		return n
	}
	la.allow(bg) // 1 more: a second round trip, leasing the 9 left
	if n := count(lb, 30); n != 0 {
		t.Fatalf("b allowed %d; want none: a holds the whole limit", n)
	}
	if err := la.Release(bg); err != nil {
		t.Fatal(err)
	}
	lb.blockedUntil.Store(0) // b cached its block; a release is news it cannot know
	if n := count(lb, 30); n != 9 {
		t.Errorf("b allowed %d after a's release; want the 9 a gave back", n)
	}
	if n := count(la, 5); n != 0 {
		t.Errorf("a allowed %d after releasing its lease; want none", n)
	}
}

func TestAnExpiredLeaseIsGivenBackByTheNextRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	m := clock.NewManual(0)
	a := cluster(t, srv, WithInstances(2), WithClock(m))
	b := cluster(t, srv, WithInstances(2), WithClock(m))
	la := limiter(t, a, "expiry", 10, time.Minute, WithLease(10, 10*time.Millisecond))
	lb := limiter(t, b, "expiry", 10, time.Minute)
	if !la.allow(bg).Allowed { // takes all 10: 1 spent, 9 leased
		t.Fatal("blocked")
	}
	if lb.allow(bg).Allowed {
		t.Fatal("b allowed while a holds the whole limit")
	}
	m.Advance(10 * time.Millisecond) // the lease expires, unspent
	// The whole limit is counted in Redis (1 spent, 9 leased): only if the
	// round trip gives the 9 back can it allow.
	if !la.allow(bg).Allowed {
		t.Fatal("a blocked: its round trip should give the expired 9 back and take 1")
	}
	if n := a.Stats().RoundTrips; n != 2 {
		t.Errorf("a made %d round trips; want 2: an expired lease is not spent", n)
	}
}

// A lease lives for its ttl, however long: one far in the future does not
// wrap around to the past and leave the lease unspent.
func TestALeaseOfAnyTTLIsSpent(t *testing.T) {
	srv := redistest.Start(t)
	m := clock.NewManual(int64(time.Hour))
	c := cluster(t, srv, WithInstances(1), WithClock(m))
	l := limiter(t, c, "forever", 100, time.Minute, WithLease(10, math.MaxInt64))
	for i := range 10 {
		if d := l.allow(bg); !d.Allowed {
			t.Fatalf("decision %d: %+v; want allowed, under the limit", i, d)
		}
	}
	if n := c.Stats().RoundTrips; n != 1 {
		t.Errorf("10 decisions took %d round trips; want 1, the other 9 spent from the lease", n)
	}
}

func TestSpendingALeaseAllocatesNothing(t *testing.T) {
	srv := redistest.Start(t)
	m := clock.NewManual(0)
	l := limiter(t, cluster(t, srv, WithInstances(1), WithClock(m)), "allocs", 1_000_000, time.Minute, WithLease(1_000_000, time.Hour))
	if !l.allow(bg).Allowed {
		t.Fatal("blocked")
	}
	if a := testing.AllocsPerRun(1000, func() { l.allow(bg) }); a != 0 {
		t.Errorf("spending a lease allocates %v per decision; want 0", a)
	}
	if raceDetector {
		return // the guard pools its entries, and sync.Pool drops some under -race
	}
	// Through a guard's cluster rule too.
	g, err := slidegate.New(slidegate.WithCluster(l.c), slidegate.WithClock(m))
	if err != nil {
		t.Fatal(err)
	}
	err = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "r", Limit: 1_000_000, Interval: slidegate.Duration(time.Minute), Cluster: true, Lease: 1_000_000}}})
	if err != nil {
		t.Fatal(err)
	}
	enter := func() {
		e, err := g.Enter(bg, "r")
		if err != nil {
			t.Fatal(err)
		}
		e.Exit(nil)
	}
	enter() // takes the lease
	if a := testing.AllocsPerRun(1000, enter); a != 0 {
		t.Errorf("Enter+Exit with a leased cluster rule allocates %v; want 0", a)
	}
}

func TestFallbackModes(t *testing.T) {
	// Nothing listens on port 1: every round trip fails at once.
	for _, tc := range []struct {
		fallback FallbackPolicy
		want     int
	}{{Local, 5}, {FailOpen, 20}, {FailClosed, 0}} {
		t.Run(tc.fallback.String(), func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
			defer rdb.Close()
			m := clock.NewManual(0)
			c, err := New(rdb, WithInstances(2), WithFallback(tc.fallback), WithClock(m))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			l, err := c.NewLimiter("down", 10, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			allowed := 0
			for range 20 {
				if l.allow(bg).Allowed {
					allowed++
				}
			}
			if allowed != tc.want {
				t.Errorf("allowed %d of 20 with Redis down; want %d (limit 10 over 2 instances)", allowed, tc.want)
			}
			if s := c.Stats(); s.Healthy || s.Fallbacks != 20 || s.RoundTrips != 0 {
				t.Errorf("stats %+v: want down, 20 fallbacks, and no round trip: New found Redis down", s)
			}
		})
	}
}

func TestHeartbeatCountsInstances(t *testing.T) {
	srv := redistest.Start(t)
	opts := []Option{WithPrefix("beat"), withHeartbeat(20 * time.Millisecond)}
	var cs []*Cluster
	for i := range 3 {
		cs = append(cs, cluster(t, srv, append(opts, withInstanceID(fmt.Sprint("i", i)))...))
	}
	all := func(n int) bool {
		for _, c := range cs {
			if c.Stats().Instances != n {
				return false
			}
		}
		return true
	}
	if !waitFor(5*time.Second, func() bool { return all(3) }) {
		t.Fatalf("instances %d, %d, %d; want 3 each", cs[0].Stats().Instances, cs[1].Stats().Instances, cs[2].Stats().Instances)
	}
	cs[2].Close()
	cs = cs[:2]
	if !waitFor(5*time.Second, func() bool { return all(2) }) {
		t.Fatalf("instances %d, %d after one left; want 2", cs[0].Stats().Instances, cs[1].Stats().Instances)
	}
}

// gated holds each script call, once held is set, until the test releases
// it or the call's deadline passes, as a Redis that answers when the test
// says would; arrived tells the test of each call held.
type gated struct {
	*redis.Client
	held     atomic.Bool
	arrived  chan struct{}
	releases chan struct{}
}

func (g *gated) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if g.held.Load() {
		g.arrived <- struct{}{}
		select {
		case <-g.releases:
		case <-ctx.Done():
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(ctx.Err())
			return cmd
		}
	}
	return g.Client.EvalSha(ctx, sha, keys, args...)
}

// Requests that find a lease's round trip under way wait for its permits.
// When they cannot be served within the timeout, with Redis answering every
// round trip that had the whole timeout, they are blocked: they do not fall
// back, nor take Redis for down. Here Redis answers the first round trip,
// which leases one permit, and never the round trips that the requests
// waiting for it then make with what is left of their timeouts.
func TestQueuedLeaseRequestsNeitherFallBackNorMarkRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	g := &gated{Client: client(t, srv.Addr), arrived: make(chan struct{}, 16), releases: make(chan struct{}, 1)}
	// The timeout bounds how long the blocked requests wait, and the test
	// with them; the first round trip must fit in it on a loaded machine.
	// One instance: a fallback would allow every request.
	c, err := New(g, WithInstances(1), WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l := limiter(t, c, "queue", 100, time.Minute, WithLease(2, time.Hour))
	var queued atomic.Int64
	l.queued = func() { queued.Add(1) }
	g.held.Store(true)

	const waiters = 4
	decisions := make(chan flow.Decision, 1+waiters)
	go func() { decisions <- l.allow(bg) }()
	<-g.arrived // the first round trip is under way
	for range waiters {
		go func() { decisions <- l.allow(bg) }()
	}
	if !waitFor(testTimeout, func() bool { return queued.Load() == waiters }) {
		t.Fatalf("%d requests wait for the round trip under way; want %d", queued.Load(), waiters)
	}
	g.releases <- struct{}{} // Redis answers it: 1 permit and a lease of 1
	allowed := 0
	for range 1 + waiters {
		switch d := <-decisions; {
		case d.Allowed:
			allowed++
		case d.Reason != flow.RateLimited:
			t.Errorf("a waiting request: %+v; want allowed or RateLimited", d)
		}
	}
	if allowed != 2 {
		t.Errorf("allowed %d; want 2: the first request and the one that spent the lease", allowed)
	}
	if s := c.Stats(); !s.Healthy || s.Failures != 0 || s.Fallbacks != 0 {
		t.Errorf("stats %+v: want healthy, no failure, no fallback", s)
	}
}

// Under a burst from many goroutines, leasing limiters on several instances
// allow no more than the limit within one interval, every permit spent
// having been counted in Redis first, and no fewer than the limit less the
// leases left unspent.
func TestLeasingLimitersAllowTheLimitUnderABurst(t *testing.T) {
	srv := redistest.Start(t)
	const limit, lease, instances, workers, each = 300, 2, 3, 8, 40
	var ls []*Limiter
	for range instances {
		// One instance configured: a fallback would allow the whole limit
		// again.
		ls = append(ls, limiter(t, cluster(t, srv, WithInstances(1)), "burst", limit, time.Minute, WithLease(lease, time.Hour)))
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range instances * workers {
		wg.Go(func() {
			l := ls[i%instances]
			for range each {
				if l.allow(bg).Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got > limit || got < limit-instances*(lease-1) {
		t.Errorf("allowed %d of %d; want the limit, %d, less at most %d left in leases", got, instances*workers*each, limit, instances*(lease-1))
	}
	for _, l := range ls {
		if s := l.c.Stats(); !s.Healthy || s.Failures != 0 || s.Fallbacks != 0 {
			t.Errorf("stats %+v: want healthy, no failure, no fallback", s)
		}
	}
}

// The server's clock stepping back a little counts in the newest bucket;
// stepping back more than an interval forgets the buckets ahead instead of
// blocking everything until the clock catches up. Redis's clock cannot be
// moved, so the test writes buckets ahead of it.
func TestServerClockSteppingBack(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr)
	const width = int64(time.Second / 10 / time.Microsecond)
	now, err := rdb.Time(bg).Result()
	if err != nil {
		t.Fatal(err)
	}
	open := now.UnixMicro() / width
	for _, tc := range []struct {
		ahead int64 // buckets
		allow bool
	}{{ahead: 5, allow: false}, {ahead: 1000, allow: true}} {
		l := limiter(t, cluster(t, srv, WithInstances(1)), fmt.Sprint("step", tc.ahead), 10, time.Second, WithBuckets(10))
		b := fmt.Sprint(open + tc.ahead)
		if err := rdb.HSet(bg, l.redisKey(), b, 10, "o", b, "s", 10).Err(); err != nil {
			t.Fatal(err)
		}
		if got := l.allow(bg).Allowed; got != tc.allow {
			t.Errorf("%d buckets ahead: Allow = %v; want %v", tc.ahead, got, tc.allow)
		}
		if tc.allow {
			if f, _ := rdb.HGetAll(bg, l.redisKey()).Result(); f[b] != "" || f["o"] == b {
				t.Errorf("%d buckets ahead: hash %v still holds the bucket ahead", tc.ahead, f)
			}
		}
	}
}

// The heartbeat key lives as long as its longest-counting instance: one that
// beats fast does not cut short the life of one that beats slowly.
func TestHeartbeatKeyOutlivesItsSlowestInstance(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr)
	slow := cluster(t, srv, WithPrefix("ttl"), withHeartbeat(time.Minute), withInstanceID("slow"))
	fast := cluster(t, srv, WithPrefix("ttl"), withHeartbeat(10*time.Millisecond), withInstanceID("fast"))
	if !waitFor(5*time.Second, func() bool { return slow.joined.Load() && fast.Stats().Instances == 2 }) {
		t.Fatalf("the slow instance joined: %v; the fast one counts %d; want both", slow.joined.Load(), fast.Stats().Instances)
	}
	time.Sleep(30 * time.Millisecond) // the fast instance beats again
	ttl, err := rdb.PTTL(bg, slow.instancesKey()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl < time.Minute {
		t.Errorf("the heartbeat key expires in %v; want the slow instance's 3 minutes", ttl)
	}
}
