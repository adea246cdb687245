package flow

import (
	"errors"

	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// admissions records, per key, the times at which a KeyedQPS allowed its
// requests, to check every interval of every window afterwards.
type admissions map[string][]int64

func (a admissions) add(key string, now, n int64) {
	for range n {
		a[key] = append(a[key], now)
	}
}

// check fails if any key was allowed more than its limit in any interval of
// the window's length, wherever it starts: for each admission, those in the
// interval ending with it.
func (a admissions) check(t *testing.T, w KeyWindow) int64 {
	t.Helper()
	worst := int64(0)
	for key, times := range a {
		limit := w.Limit
		if o, ok := w.Overrides[key]; ok {
			limit = o
		}
		slices.Sort(times)
		first := 0
		for i, at := range times {
			for times[first] <= at-int64(w.Interval) {
				first++
			}
			n := int64(i - first + 1)
			worst = max(worst, n)
			if n > limit {
				t.Fatalf("key %q: %d allowed in the %v up to %v, limit %d", key, n, w.Interval, time.Duration(at), limit)
			}
		}
	}
	return worst
}

func mustKeyed(t testing.TB, c clock.Clock, ws ...KeyWindow) *KeyedQPS {
	t.Helper()
	q, err := NewKeyedQPS(KeyedQPSSettings{Windows: ws, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestKeyedQPSNeverExceedsAnyKeysLimitInAnyInterval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keys  int // distinct keys: beyond hot entries and the sketch's first width
		step  time.Duration
		batch int64
	}{
		{"few keys", 10, 7 * time.Millisecond, 1},
		{"keys overflow the hot entries", 20000, 50 * time.Microsecond, 1},
		{"batches", 3000, 300 * time.Microsecond, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clock.NewManual(0)
			ws := []KeyWindow{
				{Limit: 5, Interval: time.Second},
				{Limit: 12, Interval: 10 * time.Second, Buckets: 5, Overrides: map[string]int64{"k1": 30, "k2": 0}},
			}
			q := mustKeyed(t, c, ws...)
			r := rand.New(rand.NewPCG(1, uint64(tc.keys)))
			got := admissions{}
			got2 := admissions{}
			now := int64(0)
			for range 200000 {
				now += r.Int64N(int64(tc.step))
				// A few hot keys take most requests; the rest scan.
				key := "k" + strconv.Itoa(r.IntN(4))
				if r.IntN(3) == 0 {
					key = "k" + strconv.Itoa(r.IntN(tc.keys))
				}
				n := 1 + r.Int64N(tc.batch)
				if d, j := q.AllowNAt(now, key, n); d.Allowed {
					if j != -1 {
						t.Fatalf("allowed with window %d", j)
					}
					got.add(key, now, n)
					got2.add(key, now, n)
				}
			}
			w0, w1 := got.check(t, ws[0]), got2.check(t, ws[1])
			if w0 < ws[0].Limit || w1 < ws[1].Limit {
				t.Fatalf("busiest key allowed %d and %d in an interval: the limits were never reached, the test tests nothing", w0, w1)
			}
		})
	}
}

// The attack the anchors fail: a key at its limit while an attacker sends
// keys enough to fill every table, in scans and in bursts at bucket edges.
func TestKeyedQPSHotKeyIsNotResetByKeysThatDisplaceIt(t *testing.T) {
	c := clock.NewManual(0)
	w := KeyWindow{Limit: 10, Interval: time.Second}
	q := mustKeyed(t, c, w)
	got := admissions{}
	now := int64(0)
	attacker := 0
	for round := range 40 {
		// The hot key asks far over its limit, spread over the second...
		for i := range 100 {
			at := now + int64(i)*int64(10*time.Millisecond)
			if d, _ := q.AllowNAt(at, "hot", 1); d.Allowed {
				got.add("hot", at, 1)
			}
			// ... while attackers, each using most of its own limit, try to
			// take every entry (its own keys' admissions are checked too).
			for range 30 {
				key := "a" + strconv.Itoa(attacker%50000)
				attacker++
				for range 6 {
					if d, _ := q.AllowNAt(at, key, 1); d.Allowed {
						got.add(key, at, 1)
					}
				}
			}
		}
		// Bursts right at a bucket edge.
		edge := now + int64(time.Second) - 1
		for range 20 {
			if d, _ := q.AllowNAt(edge, "hot", 1); d.Allowed {
				got.add("hot", edge, 1)
			}
		}
		now += int64(time.Second)
		_ = round
	}
	got.check(t, w)
	if n := len(got["hot"]); n < 40*5 {
		t.Fatalf("the hot key was allowed %d requests in 40 s at a limit of 10/s: starved", n)
	}
	if b := q.bytes(); b > flowlimits.DefaultKeyMemory {
		t.Fatalf("limiter takes %d bytes, above its bound %d", b, flowlimits.DefaultKeyMemory)
	}
}

func TestKeyedQPSRefusalByOneWindowCountsInNone(t *testing.T) {
	c := clock.NewManual(0)
	q := mustKeyed(t, c, KeyWindow{Limit: 3, Interval: time.Second}, KeyWindow{Limit: 2, Interval: time.Minute})
	for i := range 2 {
		if d, j := q.AllowNAt(int64(i), "u", 1); !d.Allowed || j != -1 {
			t.Fatalf("request %d refused by window %d", i, j)
		}
	}
	d, j := q.AllowNAt(2, "u", 1)
	if d.Allowed || j != 1 || d.Reason != RateLimited {
		t.Fatalf("third request: %+v by window %d, want refused by window 1", d, j)
	}
	// The per-second window counted only the two allowed: had it counted the
	// refused one, a batch of one more would not fit in it.
	// They leave the minute window when its bucket (3 s) is k+1 = 21
	// buckets old.
	if want := 63*time.Second - 2; d.RetryAfter != want {
		t.Fatalf("RetryAfter = %v, want %v: when the minute window's bucket of the two leaves it", d.RetryAfter, want)
	}
	// A refusal by the first window leaves the second untouched: after the
	// minute, the key has its two again.
	later := int64(63 * time.Second)
	for i := range 2 {
		if d, j := q.AllowNAt(later+int64(i), "u", 1); !d.Allowed {
			t.Fatalf("after the minute, request %d refused by window %d", i, j)
		}
	}
}

func TestKeyedQPSFirstWindowRefusalLeavesOthersUncounted(t *testing.T) {
	c := clock.NewManual(0)
	q := mustKeyed(t, c, KeyWindow{Limit: 1, Interval: time.Second}, KeyWindow{Limit: 3, Interval: time.Minute})
	// One allowed per second: refused ones must not use up the minute's 3.
	allowed := 0
	for i := range 100 {
		if d, _ := q.AllowNAt(int64(i)*int64(10*time.Millisecond), "u", 1); d.Allowed {
			allowed++
		}
	}
	if allowed != 1 {
		t.Fatalf("allowed %d in the first second, want 1", allowed)
	}
	for s := 1; s <= 3; s++ {
		at := int64(s)*int64(1100*time.Millisecond) + int64(time.Second)
		d, j := q.AllowNAt(at, "u", 1)
		if want := s < 3; d.Allowed != want {
			t.Fatalf("second %d: allowed = %v by window %d, want %v: refusals by the first window were counted in the second", s, d.Allowed, j, want)
		}
	}
}

func TestKeyedQPSOverrides(t *testing.T) {
	c := clock.NewManual(0)
	q := mustKeyed(t, c, KeyWindow{Limit: 2, Interval: time.Second, Overrides: map[string]int64{"big": 50, "banned": 0}})
	count := func(key string) (n int) {
		for i := range 100 {
			if d, _ := q.AllowNAt(int64(i), key, 1); d.Allowed {
				n++
			}
		}
		return n
	}
	for key, want := range map[string]int{"big": 50, "banned": 0, "other": 2} {
		if got := count(key); got != want {
			t.Errorf("key %q: allowed %d of 100, want %d", key, got, want)
		}
	}
	if d, _ := q.AllowNAt(200, "banned", 1); d.Reason != ExceedsLimit {
		t.Errorf("a key overridden to 0: reason %v, want ExceedsLimit", d.Reason)
	}
}

func TestKeyedQPSRetryAfterIsWhenTheKeyFits(t *testing.T) {
	for _, cold := range []bool{false, true} {
		t.Run(fmt.Sprint("cold=", cold), func(t *testing.T) {
			c := clock.NewManual(0)
			q := mustKeyed(t, c, KeyWindow{Limit: 4, Interval: time.Second, Buckets: 4})
			now := int64(100 * time.Millisecond)
			if !cold {
				for range 4 {
					q.AllowNAt(now, "u", 1)
					now += int64(100 * time.Millisecond)
				}
			} else {
				// A cold key refused by the sketch: fill the first
				// generation to the limit without turning hot (the key
				// is seeded, so use batches of the limit's half).
				q.AllowNAt(now, "u", 2)
				now += int64(300 * time.Millisecond)
			}
			for {
				d, _ := q.AllowNAt(now, "u", 2)
				if d.Allowed {
					break
				}
				if d.RetryAfter <= 0 {
					t.Fatalf("refused with RetryAfter %v", d.RetryAfter)
				}
				// A moment before RetryAfter it does not fit; at it, it does
				// (checked by going on).
				if d2, _ := q.AllowNAt(now+int64(d.RetryAfter)-1, "u", 2); d2.Allowed {
					t.Fatalf("fits before RetryAfter %v", d.RetryAfter)
				}
				now += int64(d.RetryAfter)
			}
		})
	}
}

func TestKeyedQPSConfigErrorsNameTheWindow(t *testing.T) {
	for _, tc := range []struct {
		ws   []KeyWindow
		want string
	}{
		{nil, "windows"},
		{[]KeyWindow{{Limit: -1, Interval: time.Second}}, "windows[0].limit"},
		{[]KeyWindow{{Limit: 1, Interval: time.Second}, {Limit: 1}}, "windows[1].interval"},
		{[]KeyWindow{{Limit: 1, Interval: time.Second, Buckets: 101}}, "windows[0].buckets"},
		{[]KeyWindow{{Limit: 1, Interval: time.Second, Overrides: map[string]int64{"a": -2}}}, "windows[0].overrides"},
		{make([]KeyWindow, flowlimits.MaxKeyWindows+1), "windows"},
	} {
		_, err := NewKeyedQPS(KeyedQPSSettings{Windows: tc.ws})
		var ce *configError
		if !errors.As(err, &ce) || ce.Field != tc.want {
			t.Errorf("%+v: error %v, want one naming %s", tc.ws, err, tc.want)
		}
	}
}

func TestKeyedQPSAllocatesNothing(t *testing.T) {
	c := clock.NewManual(0)
	q := mustKeyed(t, c, KeyWindow{Limit: 100, Interval: time.Second}, KeyWindow{Limit: 1000, Interval: time.Minute})
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	now := int64(0)
	for i := range 200000 { // warm: tables and sketches at their size
		now += 1000
		q.AllowNAt(now, keys[i%len(keys)], 1)
	}
	i := 0
	if a := testing.AllocsPerRun(10000, func() {
		now += 1000
		q.AllowNAt(now, keys[i%len(keys)], 1)
		q.AllowNAt(now, "hot", 1)
		i++
	}); a != 0 {
		t.Fatalf("AllowNAt allocates %v times per call", a)
	}
}

// A key that turns hot early in a generation brings the counts of the one
// before into its exact window.
func TestKeyedQPSKeyTurningHotKeepsItsPastCounts(t *testing.T) {
	c := clock.NewManual(0)
	w := KeyWindow{Limit: 10, Interval: time.Second}
	q := mustKeyed(t, c, w)
	got := admissions{}
	ask := func(at time.Duration, n int) {
		for range n {
			if d, _ := q.AllowNAt(int64(at), "u", 1); d.Allowed {
				got.add("u", int64(at), 1)
			}
		}
	}
	ask(950*time.Millisecond, 5) // cold: at most half the limit
	ask(1050*time.Millisecond, 20)
	ask(2050*time.Millisecond, 20)
	got.check(t, w)
	if n := len(got["u"]); n != 15 {
		t.Fatalf("allowed %d, want 5 + 5 + 5", n)
	}
}

func TestKeyedQPSGenerationsStartAtMultiplesOfTheInterval(t *testing.T) {
	for _, iv := range []time.Duration{time.Second, 7 * time.Millisecond, time.Minute, 24 * time.Hour} {
		for _, k := range []int{1, 3, 10, 100} {
			if iv%time.Duration(k) != 0 {
				continue
			}
			g := alignedGrid(iv, k)
			for _, at := range []int64{0, int64(iv), -int64(iv), 5 * int64(iv)} {
				if b := g.Index(at); b%uint64(k) != 0 || g.Index(at-1)%uint64(k) != uint64(k-1) {
					t.Errorf("interval %v, %d buckets: a generation does not start at %v", iv, k, time.Duration(at))
				}
			}
		}
	}
}

// Many goroutines deciding for overlapping keys: no key over its limit, and
// the race detector sees the shards' locking. A driver moves the clock
// between phases, so every decision of a phase has the same time.
func TestKeyedQPSConcurrentCallersKeepEveryKeysLimit(t *testing.T) {
	c := clock.NewManual(0)
	ws := []KeyWindow{{Limit: 20, Interval: time.Second}, {Limit: 50, Interval: 5 * time.Second, Buckets: 5}}
	q := mustKeyed(t, c, ws...)
	got := admissions{}
	var mu sync.Mutex
	for phase := range 200 {
		now := int64(phase) * int64(37*time.Millisecond)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(phase), uint64(w)))
				mine := admissions{}
				for range 300 {
					key := "k" + strconv.Itoa(r.IntN(8))
					if r.IntN(2) == 0 {
						key = "cold" + strconv.Itoa(r.IntN(5000))
					}
					if d, _ := q.AllowNAt(now, key, 1); d.Allowed {
						mine.add(key, now, 1)
					}
				}
				mu.Lock()
				for k, v := range mine {
					got[k] = append(got[k], v...)
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	for _, w := range ws {
		if worst := got.check(t, w); worst < w.Limit {
			t.Fatalf("the busiest key reached %d of %d: the limit was never tested", worst, w.Limit)
		}
	}
}

// Keys that collide in one limiter's sketch do not collide in another's:
// the hash is seeded per limiter, so no one can prepare keys that share a
// hot key's counters.
func TestKeyedQPSHashIsSeededPerLimiter(t *testing.T) {
	a := mustKeyed(t, clock.NewManual(0), KeyWindow{Limit: 1, Interval: time.Second})
	b := mustKeyed(t, clock.NewManual(0), KeyWindow{Limit: 1, Interval: time.Second})
	same := 0
	for i := range 100 {
		k := "key-" + strconv.Itoa(i)
		if a.hash(k) == b.hash(k) {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("%d of 100 keys hash alike in two limiters", same)
	}
}

func TestKeyedQPSSetKeepsCountsAndMovesOverrides(t *testing.T) {
	c := clock.NewManual(0)
	q := mustKeyed(t, c, KeyWindow{Limit: 2, Interval: time.Second, Overrides: map[string]int64{"a": 5}})
	for range 4 {
		q.AllowNAt(0, "a", 1)
	}
	q.AllowNAt(0, "b", 1) // cold
	if err := q.Set([]KeyWindow{{Limit: 3, Interval: time.Second, Overrides: map[string]int64{"b": 4}}}); err != nil {
		t.Fatal(err)
	}
	if d, _ := q.AllowNAt(1, "a", 1); d.Allowed {
		t.Fatal("a, 4 counted, allowed under the limit of 3 after losing its override")
	}
	for i := range 3 {
		if d, _ := q.AllowNAt(1, "b", 1); !d.Allowed {
			t.Fatalf("b, 1 counted and overridden to 4, refused its request %d", i+2)
		}
	}
	if d, _ := q.AllowNAt(1, "b", 1); d.Allowed {
		t.Fatal("b allowed a fifth under its override of 4: its count before the override was lost")
	}
	for _, bad := range [][]KeyWindow{
		{{Limit: -1, Interval: time.Second}},
		{{Limit: 3, Interval: time.Second, Buckets: flowlimits.MaxKeyBuckets + 1}},
	} {
		if err := q.Set(bad); err == nil {
			t.Errorf("Set(%+v) accepted", bad)
		}
	}
}

// Keys that each use half their limit, steadily, more of them than the
// entries a limiter starts with: they are refused no more than keys alone
// would be, for the entries grow to hold them.
func TestKeyedQPSManySteadyKeysGetExactWindows(t *testing.T) {
	const keys, limit = 20000, 10
	c := clock.NewManual(0)
	q := mustKeyed(t, c, KeyWindow{Limit: limit, Interval: time.Second})
	period := int64(1100 * time.Millisecond)
	var asked, refused int
	for round := range 8 {
		for k := range keys {
			at := int64(round)*period + int64(k)*(period/keys)
			for range limit / 2 {
				d, _ := q.AllowNAt(at, "user-"+strconv.Itoa(k), 1)
				if round > 0 {
					asked++
					if !d.Allowed {
						refused++
					}
				}
			}
		}
	}
	if rate := float64(refused) / float64(asked); rate > 0.001 {
		t.Fatalf("%d of %d refused (%.3f%%) from keys within their limit", refused, asked, 100*rate)
	}
	if b := q.bytes(); b > flowlimits.DefaultKeyMemory {
		t.Fatalf("%d bytes, over the bound %d", b, flowlimits.DefaultKeyMemory)
	}
}

// keysInShard returns n keys of q's shard sh.
func keysInShard(q *KeyedQPS, sh uint64, n int, prefix string) []string {
	var ks []string
	for i := 0; len(ks) < n; i++ {
		k := prefix + strconv.Itoa(i)
		if q.hash(k)>>shardShift == sh {
			ks = append(ks, k)
		}
	}
	return ks
}

// An eviction decided at a time earlier than the victim's last bucket, in an
// earlier sketch generation (a caller that read the clock, then stalled),
// hands all the victim's counts back to the sketch.
func TestKeyedQPSEvictionAtAnEarlierTimeKeepsTheCounts(t *testing.T) {
	c := clock.NewManual(0)
	w := KeyWindow{Limit: 10, Interval: time.Second}
	// A budget of 0: each shard keeps its floor of entries, no more.
	none, _ := NewKeyMemory(0)
	q, err := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{w}, Clock: c, KeyMemory: none})
	if err != nil {
		t.Fatal(err)
	}
	fs := keysInShard(q, 0, floorRoom, "f")
	n := keysInShard(q, 0, 1, "n")[0]
	a := admissions{}
	sec := int64(time.Second)
	t0, t1, t2, t3 := 10*sec+900e6, 12*sec-100e3, 12*sec+500e3, 12*sec+2e6
	for _, f := range fs { // every entry of the shard, taken in generation 10
		for range 6 {
			if d, _ := q.AllowNAt(t0, f, 1); d.Allowed {
				a.add(f, t0, 1)
			}
		}
	}
	for _, f := range fs { // each 3 requests, hot, in generation 12
		for range 3 {
			if d, _ := q.AllowNAt(t2, f, 1); d.Allowed {
				a.add(f, t2, 1)
			}
		}
	}
	// A caller that read the clock at t1 (generation 11) just before t2
	// takes the mutex now: its key, past half its limit, takes the entry
	// of one of them, at 3 of 10.
	for range 6 {
		if d, _ := q.AllowNAt(t1, n, 1); d.Allowed {
			a.add(n, t1, 1)
		}
	}
	var gone []string
	for _, f := range fs {
		if _, hot := q.shards[0].index.find(q.hash(f), q.shards[0].hot); !hot {
			gone = append(gone, f)
		}
	}
	if len(gone) != 1 {
		t.Fatalf("test setup: %d keys lost their entries, want 1", len(gone))
	}
	got := 0
	for range 20 {
		if d, _ := q.AllowNAt(t3, gone[0], 1); d.Allowed {
			a.add(gone[0], t3, 1)
			got++
		}
	}
	t.Logf("the key that lost its entry allowed %d more at t3 (3 already in the last %v)", got, time.Duration(t3-t2))
	if got > 7 {
		t.Fatalf("allowed %d more: its 3 of generation 12 were lost", got)
	}
	a.check(t, w)
}

// Overrides that change from one Set to the next do not grow the entries:
// keys that lose their overrides go back to the sketch, but for the room
// the shard has for hot keys.
func TestKeyedQPSSetDoesNotGrowEntriesWithChangingOverrides(t *testing.T) {
	c := clock.NewManual(0)
	q := mustKeyed(t, c, KeyWindow{Limit: 10, Interval: time.Second})
	entries := func() (n int) {
		for i := range q.shards {
			n += len(q.shards[i].hot)
		}
		return n
	}
	for round := range 50 {
		o := map[string]int64{}
		for i := range 2000 {
			o["blocked-"+strconv.Itoa(round)+"-"+strconv.Itoa(i)] = 0
		}
		if err := q.Set([]KeyWindow{{Limit: 10, Interval: time.Second, Overrides: o}}); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Minute)
	}
	if n := entries(); n > flowlimits.DefaultHotKeys+2000 {
		t.Fatalf("%d hot entries after 50 reloads of 2,000 overrides each, want at most %d", n, flowlimits.DefaultHotKeys+2000)
	}
	for i := range 2000 {
		if d, _ := q.AllowNAt(c.Now(), "blocked-49-"+strconv.Itoa(i), 1); d.Allowed {
			t.Fatalf("key %d overridden to 0 allowed", i)
		}
	}
	if d, _ := q.AllowNAt(c.Now(), "blocked-48-7", 1); !d.Allowed {
		t.Fatal("a key no longer overridden is refused")
	}
	if top := q.topAt(c.Now(), -1, false); len(top) != 0 {
		t.Fatalf("Top(-1) = %v", top)
	}
}

// Keys that read the same once cut are one key in Top.
func TestKeyedQPSTopAddsUpKeysThatReadTheSame(t *testing.T) {
	long := strings.Repeat("k", flowlimits.MaxShownKeyLength)
	// Overrides of the window's own limit count the keys exactly from
	// their first request: in the sketch, a seed under which two of them
	// share their counters would refuse the second one early, and change
	// the counts Top adds up.
	exact := map[string]int64{long + "a": 2, long + "b": 2, "\xff": 2}
	q := mustKeyed(t, clock.NewManual(0), KeyWindow{Limit: 2, Interval: time.Second, Overrides: exact})
	for _, key := range []string{long + "a", long + "b", "\xff"} {
		for range 3 { // 2 allowed, 1 blocked
			q.AllowNAt(0, key, 1)
		}
	}
	top := q.topAt(0, 10, false)
	if len(top) != 2 || top[0].Key != long || top[0].Allowed != 4 || top[0].Blocked != 2 || top[1].Key != "\uFFFD" {
		t.Fatalf("Top = %+v, want %q with both keys' counts, then the bad byte shown as U+FFFD", top, long)
	}
}
