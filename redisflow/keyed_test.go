package redisflow

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/redistest"
)

// keyed returns c's keyed limiter of windows, on the Redis server's clock.
func keyed(t testing.TB, c *Cluster, name string, windows ...flow.KeyWindow) *KeyedLimiter {
	t.Helper()
	l, err := c.NewKeyedLimiter(name, windows)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNewKeyedLimiterReturnsAnErrorNamingABadArgument(t *testing.T) {
	c, err := New(client(t, "127.0.0.1:1"), WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	long := strings.Repeat("k", 257)
	for _, tc := range []struct {
		name    string
		windows []flow.KeyWindow
		want    string
	}{
		{"", []flow.KeyWindow{{Limit: 1, Interval: time.Second}}, "name is empty"},
		{"r", nil, "windows: 0 given"},
		{"r", make([]flow.KeyWindow, flowlimits.MaxKeyWindows+1), "windows: 9 given"},
		{"r", []flow.KeyWindow{{Limit: 1, Interval: time.Second, Buckets: -1}}, "windows[0].buckets = -1"},
		{"r", []flow.KeyWindow{{Limit: 1, Interval: time.Second, Buckets: flowlimits.MaxKeyBuckets + 1}}, "windows[0].buckets = 101"},
		{"r", []flow.KeyWindow{{Limit: 1, Interval: time.Second}, {Limit: 1, Interval: 0}}, "windows[1].interval = 0s"},
		{"r", []flow.KeyWindow{{Limit: 1, Interval: 15 * time.Microsecond}}, "windows[0].interval = 15µs: must be positive and divide into 20 buckets"},
		{"r", []flow.KeyWindow{{Limit: -1, Interval: time.Second}}, "windows[0].limit = -1"},
		{"r", []flow.KeyWindow{{Limit: flowlimits.MaxLimit + 1, Interval: time.Second}}, "windows[0].limit = 4294967296"},
		{"r", []flow.KeyWindow{{Limit: 1, Interval: time.Second, Overrides: map[string]int64{"a": -2}}}, `windows[0].overrides = "a": -2`},
		{"r", []flow.KeyWindow{{Limit: 1, Interval: time.Second, Overrides: map[string]int64{long: 2}}}, "windows[0].overrides: a key of 257 bytes"},
		{"r", []flow.KeyWindow{{Limit: 1, Interval: time.Second}, {Limit: 5, Interval: time.Second, Buckets: 20}}, "windows[1]: interval 1s and 20 buckets, as windows[0]"},
	} {
		_, err := c.NewKeyedLimiter(tc.name, tc.windows)
		if !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewKeyedLimiter(%q, %v) = %v; want errInvalidConfig saying %q", tc.name, tc.windows, err, tc.want)
		}
	}
}

// The overrides are the limiter's own: changing the map given changes
// nothing.
func TestKeyedLimiterCopiesItsOverrides(t *testing.T) {
	c, err := New(client(t, "127.0.0.1:1"), WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := map[string]int64{"a": 0}
	l := keyed(t, c, "copy", flow.KeyWindow{Limit: 5, Interval: time.Second, Overrides: o})
	o["a"] = 5
	if d, j := l.allowKey(bg, "a"); d.Allowed || d.Reason != flow.ExceedsLimit || j != 0 {
		t.Errorf("AllowKey(a) = %+v by window %d; want ExceedsLimit by window 0, a's override being 0 when the limiter was made", d, j)
	}
}

// A key's override holds instead of the limit; an override of 0 refuses
// every request of its key, and a request above a window's limit for its
// key is refused, both without a round trip and without allocating.
func TestKeyedOverridesAndExceedsLimit(t *testing.T) {
	srv := redistest.Start(t)
	c := cluster(t, srv, WithInstances(1))
	l := keyed(t, c, "overrides",
		flow.KeyWindow{Limit: 3, Interval: time.Minute, Overrides: map[string]int64{"vip": 6, "banned": 0}},
		flow.KeyWindow{Limit: 100, Interval: time.Hour, Overrides: map[string]int64{"capped": 2}})
	for key, want := range map[string]int{"plain": 3, "vip": 6, "capped": 2, "banned": 0} {
		allowed := 0
		for range 8 {
			if d, _ := l.allowKey(bg, key); d.Allowed {
				allowed++
			}
		}
		if allowed != want {
			t.Errorf("key %q: %d of 8 allowed; want its limit, %d", key, allowed, want)
		}
	}
	trips := c.Stats().RoundTrips
	for _, tc := range []struct {
		key    string
		n      int64
		window int
	}{{"banned", 1, 0}, {"plain", 4, 0}, {"vip", 7, 0}, {"capped", 3, 1}} {
		if d, j := l.AllowKeyN(bg, tc.key, tc.n); d.Allowed || d.Reason != flow.ExceedsLimit || j != tc.window {
			t.Errorf("AllowKeyN(%q, %d) = %+v by window %d; want ExceedsLimit by window %d", tc.key, tc.n, d, j, tc.window)
		}
	}
	if got := c.Stats().RoundTrips - trips; got != 0 {
		t.Errorf("%d round trips for requests above their limits; want none", got)
	}
	if a := testing.AllocsPerRun(100, func() { l.AllowKeyN(bg, "plain", 4) }); a != 0 {
		t.Errorf("a request above its limit allocates %v; want 0", a)
	}
}

// A refusal from Redis is remembered: the key's requests are refused
// without a round trip, and without allocating, until RetryAfter has
// passed; then the key asks Redis again. Other keys, and smaller requests
// than the one refused, still ask.
func TestKeyedRefusalsAreRememberedUntilTheyCouldFit(t *testing.T) {
	srv := redistest.Start(t)
	m := clock.NewManual(0)
	c := cluster(t, srv, WithInstances(1), WithClock(m))
	l := keyed(t, c, "remember", flow.KeyWindow{Limit: 3, Interval: time.Hour})
	for range 3 {
		l.allowKey(bg, "a")
	}
	d, j := l.allowKey(bg, "a")
	if d.Allowed || d.Reason != flow.RateLimited || j != 0 || d.RetryAfter <= 0 || d.RetryAfter > time.Hour+time.Hour/10 {
		t.Fatalf("the fourth request: %+v by window %d; want refused by window 0, with a RetryAfter within the interval and a bucket", d, j)
	}
	trips := c.Stats().RoundTrips
	m.Advance(d.RetryAfter - time.Nanosecond)
	if d2, j2 := l.allowKey(bg, "a"); d2.Allowed || d2.RetryAfter != time.Nanosecond || j2 != 0 {
		t.Errorf("1ns before the refusal ends: %+v by window %d; want refused, 1ns left, by window 0", d2, j2)
	}
	if a := testing.AllocsPerRun(100, func() { l.allowKey(bg, "a") }); a != 0 {
		t.Errorf("a remembered refusal allocates %v; want 0", a)
	}
	if got := c.Stats().RoundTrips - trips; got != 0 {
		t.Errorf("%d round trips while the refusal holds; want none", got)
	}
	l.allowKey(bg, "b")
	if got := c.Stats().RoundTrips - trips; got != 1 {
		t.Errorf("another key: %d round trips; want 1", got)
	}
	m.Advance(time.Nanosecond)
	l.allowKey(bg, "a") // Redis's clock did not move: refused again, by Redis
	if got := c.Stats().RoundTrips - trips; got != 2 {
		t.Errorf("once the refusal ended: %d round trips in all; want 2, the key asking Redis again", got)
	}
}

// Every window's string lives a little more than its interval after its
// key's last grant, and then goes; refusals do not prolong it.
func TestKeyedKeysExpireOnceTheyNoLongerCount(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr)
	c := cluster(t, srv, WithPrefix("ttl"), WithInstances(1))
	l := keyed(t, c, "short",
		flow.KeyWindow{Limit: 2, Interval: 100 * time.Millisecond, Buckets: 4},
		flow.KeyWindow{Limit: 50, Interval: 300 * time.Millisecond, Buckets: 3})
	for range 4 { // 2 allowed, 2 refused
		l.allowKey(bg, "u")
	}
	keys := rdb.Keys(bg, "ttl:k:*").Val()
	if len(keys) != 2 {
		t.Fatalf("keys %v; want the two windows'", keys)
	}
	for _, k := range keys {
		ttl := rdb.PTTL(bg, k).Val()
		// At most the interval and a bucket past the grant.
		limit := 125 * time.Millisecond
		if strings.Contains(k, ":300ms:") {
			limit = 400 * time.Millisecond
		}
		if ttl <= 0 || ttl > limit {
			t.Errorf("PTTL %s = %v; want within (0, %v]", k, ttl, limit)
		}
	}
	if !waitFor(5*time.Second, func() bool { return len(rdb.Keys(bg, "ttl:k:*").Val()) == 0 }) {
		t.Errorf("keys left behind: %v", rdb.Keys(bg, "ttl:k:*").Val())
	}
}

// Two clients hammer a few keys at once, on Redis's clock: no key's window
// holds more than its limit in any interval of its length, wherever it
// starts, counting both clients' grants at the server's time.
func TestKeyedNoIntervalHoldsMoreThanTheLimitAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	windows := []flow.KeyWindow{
		{Limit: 8, Interval: 100 * time.Millisecond, Buckets: 4, Overrides: map[string]int64{"vip": 15}},
		{Limit: 30, Interval: 500 * time.Millisecond, Buckets: 5},
	}
	keys := []string{"a", "b", "vip", "{a}"}
	var mu sync.Mutex
	grants := map[string][]grant{}
	refused := map[string]int{}
	trace := func(now int64, key string, n int64, j int) {
		mu.Lock()
		defer mu.Unlock()
		if j >= 0 {
			refused[key]++
			return
		}
		grants[key] = append(grants[key], grant{now, n})
	}
	overloaded := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, key := range keys {
			g := grants[key]
			if refused[key] == 0 || len(g) == 0 || g[len(g)-1].at-g[0].at < 4*windows[1].Interval.Microseconds() {
				return false
			}
		}
		return true
	}
	var ls []*KeyedLimiter
	for range 2 {
		l := keyed(t, cluster(t, srv, WithInstances(2)), "hammer", windows...)
		l.trace = trace
		ls = append(ls, l)
	}
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for i, l := range ls {
		for w := range 2 {
			wg.Go(func() {
				for r := 0; !overloaded() && time.Now().Before(deadline); r++ {
					l.AllowKeyN(bg, keys[(i+w+r)%len(keys)], 1+int64(r%2))
				}
			})
		}
	}
	wg.Wait()
	if !overloaded() {
		t.Fatalf("in a minute, not every key was refused with grants spanning 4 intervals: grants %d, refusals %v", len(grants), refused)
	}
	for _, l := range ls {
		if s := l.c.Stats(); !s.Healthy || s.Failures != 0 || s.Fallbacks != 0 {
			t.Fatalf("stats %+v: want every decision taken by Redis", s)
		}
	}
	for _, key := range keys {
		for j, w := range windows {
			limit := ls[0].windows[j].limitFor(key)
			if most, end := busiest(grants[key], w.Interval.Microseconds()); most > limit {
				t.Errorf("key %q: %d granted in the %v ending at %dµs; the limit is %d", key, most, w.Interval, end, limit)
			}
		}
	}
}
