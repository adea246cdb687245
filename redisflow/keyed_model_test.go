package redisflow

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/redistest"
)

// The keyed script reads the time in one line, which the tests replace so
// that the script takes it from its last two arguments (seconds and
// microseconds), as a KeyedLimiter with timeArgs gives them: every window
// is then driven by a manual clock, and the script's answers can be told in
// advance.
const (
	keyedTimeLine  = "local t = redis.call('TIME')"
	keyedGivenTime = "local t = { ARGV[#ARGV - 1], ARGV[#ARGV] }"
)

var keyedAtScript = &script{redis.NewScript(strings.Replace(keyedSource, keyedTimeLine, keyedGivenTime, 1)), "the keyed limit script, at the time given"}

// keyedAt returns c's keyed limiter of windows, on the time it is given.
func keyedAt(t testing.TB, c *Cluster, name string, windows []flow.KeyWindow) *KeyedLimiter {
	t.Helper()
	if n := strings.Count(keyedSource, keyedTimeLine); n != 1 {
		t.Fatalf("keyed.lua reads the time in %d lines like %q; the tests replace one", n, keyedTimeLine)
	}
	l, err := c.NewKeyedLimiter(name, windows)
	if err != nil {
		t.Fatal(err)
	}
	l.script, l.timeArgs = keyedAtScript, true
	return l
}

// keyedModel is an independent reference of what the keyed script decides:
// every window's counts per bucket, per key, kept whole.
type keyedModel struct {
	windows []flow.KeyWindow
	keys    map[string][]*modelWindow
}

type modelWindow struct {
	last   int64 // the bucket counted in last; meaningful when counts is not nil
	counts map[int64]int64
}

func (m *keyedModel) limit(j int, key string) int64 {
	if l, ok := m.windows[j].Overrides[key]; ok {
		return l
	}
	return m.windows[j].Limit
}

// decide returns the window that refuses n permits of key at now (µs), with
// the µs until they fit it, or -1, having counted them in every window.
func (m *keyedModel) decide(now int64, key string, n int64) (window int, retry int64) {
	if m.keys == nil {
		m.keys = map[string][]*modelWindow{}
	}
	ws := m.keys[key]
	if ws == nil {
		for range m.windows {
			ws = append(ws, &modelWindow{})
		}
		m.keys[key] = ws
	}
	window, retry = -1, 0
	opens := make([]int64, len(ws))
	for j, w := range ws {
		k := int64(m.windows[j].Buckets)
		width := m.windows[j].Interval.Microseconds() / k
		open := now / width
		counts := w.counts
		switch {
		case counts == nil:
		case w.last >= open && w.last-open <= k:
			open = w.last // the clock stepped back a little: the newest bucket
		case w.last > open || open-w.last > k:
			counts = nil // stepped back far, or every bucket left: forgotten
		}
		opens[j] = open
		var sum int64
		for b := open - k; b <= open; b++ {
			sum += counts[b]
		}
		if sum+n <= m.limit(j, key) {
			continue
		}
		need, b, freed := sum+n-m.limit(j, key), open-k, int64(0)
		for ; b < open; b++ {
			if freed += counts[b]; freed >= need {
				break
			}
		}
		if r := (b+k+1)*width - now; r > retry {
			window, retry = j, r
		}
	}
	if window >= 0 {
		return window, retry
	}
	for j, w := range ws {
		k := int64(m.windows[j].Buckets)
		if w.counts == nil || w.last < opens[j]-k || w.last > opens[j] {
			w.counts = map[int64]int64{} // nothing of what it held counts
		}
		w.counts[opens[j]] += n
		w.last = opens[j]
	}
	return -1, 0
}

// A keyedGrant is permits granted to a key at a time (µs).
type keyedGrant struct {
	key string
	at  int64
	n   int64
}

// Two clients decide on the same keys, in random order, at random times on
// one manual clock, through the real script in a real Redis: every
// decision is the reference model's (granted, or refused by the same window
// with the same RetryAfter), but where a client answers a refusal it
// remembers, which the model must refuse too, no sooner than it says; and
// no key's window holds more than its limit in any interval of its length.
// Then the clock steps back, a little and a lot, and the decisions are still
// the model's.
func TestKeyedLimiterDecidesAsTheModelAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	windows := []flow.KeyWindow{
		{Limit: 5, Interval: time.Second, Buckets: 4, Overrides: map[string]int64{"vip": 9, "banned": 0}},
		{Limit: 12, Interval: 3 * time.Second, Buckets: 3, Overrides: map[string]int64{"tight": 2}},
		{Limit: 30, Interval: 10 * time.Second, Buckets: 10},
	}
	m := clock.NewManual(1_700_000_000 * int64(time.Second))
	var ls []*KeyedLimiter
	for range 2 {
		ls = append(ls, keyedAt(t, cluster(t, srv, WithInstances(2), WithClock(m)), "model", windows))
	}
	model := &keyedModel{windows: windows}
	keys := []string{"a", "b", "vip", "tight", "banned", "", "{a}", "a}:model:1s:4"}
	rng := rand.New(rand.NewPCG(1, 2))
	var grants []keyedGrant
	refusals := 0
	check := func(step int, key string, n int64) {
		t.Helper()
		l := ls[rng.IntN(len(ls))]
		now := m.Now()
		trips := l.c.Stats().RoundTrips
		d, j := l.AllowKeyNAt(bg, now, key, n)
		cached := l.c.Stats().RoundTrips == trips
		us := now / int64(time.Microsecond)
		for w := range windows {
			if n > model.limit(w, key) {
				if d.Allowed || d.Reason != flow.ExceedsLimit || j != w || !cached {
					t.Fatalf("step %d: %q n=%d: %+v by window %d (cached %v); want ExceedsLimit by window %d without a round trip", step, key, n, d, j, cached, w)
				}
				return
			}
		}
		if n <= 0 {
			if !d.Allowed || j != -1 {
				t.Fatalf("step %d: %q n=%d: %+v by window %d; want allowed", step, key, n, d, j)
			}
			return
		}
		wantJ, wantRetry := model.decide(us, key, n)
		switch {
		case cached && d.Allowed:
			t.Fatalf("step %d: %q n=%d allowed without a round trip", step, key, n)
		case cached:
			// A remembered refusal: the model refuses too, and n fits no
			// sooner than the refusal says.
			if wantJ < 0 || d.Reason != flow.RateLimited || d.RetryAfter <= 0 || d.RetryAfter > time.Duration(wantRetry)*time.Microsecond {
				t.Fatalf("step %d: %q n=%d: remembered %+v by window %d; the model refuses by %d for %dµs", step, key, n, d, j, wantJ, wantRetry)
			}
		case wantJ < 0:
			if !d.Allowed || j != -1 {
				t.Fatalf("step %d at %dµs: %q n=%d: %+v by window %d; the model allows it", step, us, key, n, d, j)
			}
			grants = append(grants, keyedGrant{key, us, n})
		default:
			if d.Allowed || d.Reason != flow.RateLimited || j != wantJ || d.RetryAfter != time.Duration(wantRetry)*time.Microsecond {
				t.Fatalf("step %d at %dµs: %q n=%d: %+v by window %d; the model refuses by window %d for %dµs", step, us, key, n, d, j, wantJ, wantRetry)
			}
			refusals++
		}
	}
	const steps = 3000
	for step := range steps {
		m.Advance(time.Duration(rng.Int64N(int64(150*time.Millisecond))/1000*1000) + time.Microsecond)
		n := int64(1)
		switch rng.IntN(10) {
		case 0:
			n = rng.Int64N(4) // 0 to 3
		case 1:
			n = 10 // above most windows' limits
		}
		check(step, keys[rng.IntN(len(keys))], n)
	}
	for _, l := range ls {
		if s := l.c.Stats(); !s.Healthy || s.Failures != 0 || s.Fallbacks != 0 {
			t.Fatalf("stats %+v: want every decision taken by Redis", s)
		}
	}
	for _, key := range keys {
		var mine []grant
		for _, g := range grants {
			if g.key == key {
				mine = append(mine, grant{g.at, g.n})
			}
		}
		for j, w := range windows {
			if most, end := busiest(mine, w.Interval.Microseconds()); most > model.limit(j, key) {
				t.Errorf("key %q: %d granted in the %v ending at %dµs; its limit is %d", key, most, w.Interval, end, model.limit(j, key))
			}
		}
	}
	// The test exercises both answers of Redis: a test that saw none of
	// one kind would prove nothing of it.
	if len(grants) < steps/4 || refusals < steps/20 {
		t.Errorf("%d grants and %d refusals by Redis in %d steps: the test exercises too little", len(grants), refusals, steps)
	}
	t.Logf("%d grants, %d refusals by Redis in %d steps on a manual clock", len(grants), refusals, steps)

	// The server's clock steps back: a little (counted in the newest
	// bucket), and more than the longest interval (forgotten).
	for step := range 400 {
		switch rng.IntN(20) {
		case 0:
			m.Set(m.Now() - int64(rng.IntN(3000))*int64(time.Millisecond))
		case 1:
			m.Set(m.Now() - 20*int64(time.Second))
		default:
			m.Advance(time.Duration(rng.Int64N(int64(150*time.Millisecond))/1000*1000) + time.Microsecond)
		}
		// Remembered refusals are on the local clock, which stepped back
		// with the server's: start afresh, as a limiter of new rules would.
		for _, l := range ls {
			l.blocks.init()
		}
		check(steps+step, keys[rng.IntN(len(keys))], 1+rng.Int64N(2))
	}
}

// A refusal by one window counts in none: the windows before it, which the
// script counts in as it goes, get back their strings byte for byte, and
// their ttls; or, for a string that no longer counts anything, none.
func TestKeyedRefusalCountsInNoWindow(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr)
	m := clock.NewManual(1_700_000_000 * int64(time.Second))
	l := keyedAt(t, cluster(t, srv, WithInstances(1), WithClock(m)), "undo", []flow.KeyWindow{
		{Limit: 100, Interval: time.Second},
		{Limit: 100, Interval: time.Minute, Buckets: 6},
		{Limit: 3, Interval: time.Hour, Buckets: 60},
	})
	keys := l.redisKeys("u")
	for i := range 3 {
		if d, j := l.AllowKeyNAt(bg, m.Now(), "u", 1); !d.Allowed {
			t.Fatalf("request %d: %+v by window %d; want allowed, under every limit", i, d, j)
		}
		m.Advance(300 * time.Millisecond) // the first window moves on
	}
	for _, tc := range []struct {
		name  string
		ahead time.Duration
		gone  bool // the first window's string counts nothing any more
	}{{"the first window moved on", 300 * time.Millisecond, false}, {"the first window's string is stale", 2 * time.Second, true}} {
		m.Advance(tc.ahead)
		before, err := rdb.MGet(bg, keys...).Result()
		if err != nil {
			t.Fatal(err)
		}
		ttls := make([]time.Duration, len(keys))
		for i, k := range keys {
			ttls[i] = rdb.PTTL(bg, k).Val()
		}
		d, j := l.AllowKeyNAt(bg, m.Now(), "u", 1)
		if d.Allowed || j != 2 || d.Reason != flow.RateLimited || d.RetryAfter <= 0 || d.RetryAfter > time.Hour+time.Minute {
			t.Fatalf("%s: %+v by window %d; want refused by window 2, the hour's, with a RetryAfter within the hour", tc.name, d, j)
		}
		l.blocks.init() // the next case asks Redis again
		after, err := rdb.MGet(bg, keys...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			if i == 0 && tc.gone {
				if after[i] != nil {
					t.Errorf("%s: %s holds %q after the refusal; want it gone, as it counts nothing", tc.name, k, after[i])
				}
				continue
			}
			if before[i] == nil || before[i] != after[i] {
				t.Errorf("%s: %s: %q before the refusal, %q after; want it untouched", tc.name, k, before[i], after[i])
			}
			// The ttl given back is the one the string had, give or take
			// the time between the two reads (real time) and a
			// millisecond's rounding.
			if ttl := rdb.PTTL(bg, k).Val(); ttl <= 0 || ttl > ttls[i]+time.Millisecond {
				t.Errorf("%s: %s: ttl %v after the refusal, %v before; want no longer", tc.name, k, ttl, ttls[i])
			}
		}
	}
}

// decodeCells returns what a window's string holds: its newest bucket and
// its cumulative counts, by place.
func decodeCells(t *testing.T, v string) (last int64, cum []int64) {
	t.Helper()
	if len(v)%8 != 0 || len(v) < 24 {
		t.Fatalf("a window of %d bytes; want k+3 64-bit integers", len(v))
	}
	read := func(i int) int64 {
		var x uint64
		for b := 7; b >= 0; b-- {
			x = x<<8 | uint64(v[8*i+b])
		}
		return int64(x)
	}
	for i := 1; i < len(v)/8; i++ {
		cum = append(cum, read(i))
	}
	return read(0), cum
}

// Counts past 2^52, which a key granted large batches for long reaches,
// are rebased and stay exact: Lua's doubles hold integers exactly only to
// 2^53.
func TestKeyedCountsAreRebasedBeforeTheyLoseExactness(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr)
	m := clock.NewManual(1_700_000_000 * int64(time.Second))
	const k = 4
	l := keyedAt(t, cluster(t, srv, WithInstances(1), WithClock(m)), "big", []flow.KeyWindow{{Limit: flowlimits.MaxLimit, Interval: time.Second, Buckets: k}})
	key := l.redisKeys("u")[0]
	width := (time.Second / k).Microseconds()
	open := m.Now() / int64(time.Microsecond) / width
	// A window as a long life would leave it: every bucket before open
	// holds 2^52 - 10 (nothing granted in them), open holds 7 more.
	const high = 1<<52 - 10
	value := make([]byte, 8*(k+3))
	put := func(i int, x int64) {
		for b := range 8 {
			value[8*i+b] = byte(x >> (8 * b))
		}
	}
	put(0, open)
	for b := open - k - 1; b <= open; b++ {
		put(1+int(b%(k+2)), high)
	}
	put(1+int(open%(k+2)), high+7)
	if err := rdb.Set(bg, key, value, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n     int64
		allow bool
	}{{n: flowlimits.MaxLimit - 7, allow: true}, {n: 1, allow: false}} {
		if d, _ := l.AllowKeyNAt(bg, m.Now(), "u", tc.n); d.Allowed != tc.allow {
			t.Fatalf("AllowKeyN(%d) over a window holding 7: %+v; want allowed %v", tc.n, d, tc.allow)
		}
	}
	last, cum := decodeCells(t, rdb.Get(bg, key).Val())
	base := cum[(open-k-1)%(k+2)]
	if last != open || base != 0 || cum[open%(k+2)] != flowlimits.MaxLimit {
		t.Errorf("after the rebase: newest bucket %d, cum %v; want bucket %d, the window's base 0 and its newest bucket %d", last, cum, open, int64(flowlimits.MaxLimit))
	}
	if slices.Max(cum) >= 1<<52 {
		t.Errorf("cum %v: some count is still past 2^52", cum)
	}
	m.Advance(2 * time.Second) // every bucket leaves
	if d, _ := l.AllowKeyNAt(bg, m.Now(), "u", flowlimits.MaxLimit); !d.Allowed {
		t.Errorf("a whole limit once the window moved on: %+v; want allowed", d)
	}
}

// The model is the model: a spot check of it, by hand.
func TestKeyedModelByHand(t *testing.T) {
	m := &keyedModel{windows: []flow.KeyWindow{{Limit: 2, Interval: 4 * time.Microsecond, Buckets: 4}}}
	for _, tc := range []struct {
		now, n int64
		window int
		retry  int64
	}{
		{now: 0, n: 1, window: -1},
		{now: 2, n: 1, window: -1},
		{now: 3, n: 1, window: 0, retry: 2}, // bucket 0 leaves when bucket 5 opens, at 5
		{now: 5, n: 1, window: -1},
		{now: 6, n: 1, window: 0, retry: 1}, // bucket 2 leaves at 7
	} {
		if j, r := m.decide(tc.now, "k", tc.n); j != tc.window || r != tc.retry {
			t.Errorf("at %d: window %d, retry %d; want %d, %d", tc.now, j, r, tc.window, tc.retry)
		}
	}
}
