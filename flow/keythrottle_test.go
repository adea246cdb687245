package flow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/timegrid"
)

func mustKeyedThrottle(t testing.TB, limit int64, interval, maxWait time.Duration, overrides map[string]int64, keys int, c clock.Clock) *Throttle {
	t.Helper()
	th, err := NewThrottle(ThrottleSettings{Limit: limit, Interval: interval, MaxWait: maxWait, PerKey: true, Overrides: overrides, Keys: keys, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// A place is what one allowed reservation took: [start, end).
type place struct{ start, end int64 }

// paces records the places each key was given, and checks that no two of a
// key's overlap: each comes at least its pace per request after the one
// before it begins.
type paces map[string][]place

func (ps paces) check(t *testing.T) {
	t.Helper()
	for key, places := range ps {
		slices.SortFunc(places, func(a, b place) int { return cmp.Compare(a.start, b.start) })
		for i := 1; i < len(places); i++ {
			if places[i].start < places[i-1].end {
				t.Fatalf("key %.20q: a place at %d, %d ns after one at %d that takes until %d", key, places[i].start, places[i].start-places[i-1].start, places[i-1].start, places[i-1].end)
			}
		}
	}
}

// TestKeyedThrottleNeverPacesAKeyFasterThanItsLimit runs random
// reservations, allows and cancellations of many more keys than the sketch
// has counters, hostile keys and keys with overrides among them, on a
// clock that mostly moves forward: no key's places overlap (the places
// given back excepted), no wait exceeds the maximum, and the keys with
// overrides are decided exactly as a Throttle of their own would.
func TestKeyedThrottleNeverPacesAKeyFasterThanItsLimit(t *testing.T) {
	const interval, maxWait = time.Second, 300 * time.Millisecond
	overrides := map[string]int64{"vip": 50, "banned": 0, "slow": 1}
	for _, limit := range []int64{3, 10, 1000} {
		c := clock.NewManual(0)
		th := mustKeyedThrottle(t, limit, interval, maxWait, overrides, 1, c) // 64 blocks: 384 counters
		exact := map[string]*Throttle{}
		for key, l := range overrides {
			if l > 0 {
				exact[key] = mustThrottle(t, l, interval, maxWait, c)
			}
		}
		r := rand.New(rand.NewPCG(uint64(limit), 3))
		keys := hostileKeys()
		for i := range 2000 {
			keys = append(keys, "user-"+strconv.Itoa(i))
		}
		keys = append(keys, "vip", "banned", "slow")
		hot := []string{"user-0", "user-1", "user-2", "vip", "slow"}
		given := paces{}
		type held struct {
			key string
			r   Reservation
			x   Reservation // the exact throttle's, for an override
			at  int         // its place in given[key]
		}
		var pending []held
		now := int64(0)
		var allowedN, refused, back int
		for step := range 100000 {
			switch r.IntN(10) {
			case 0: // time goes on, now and then back a little
				now += int64(r.IntN(int(interval / time.Duration(limit) * 3)))
				if r.IntN(20) == 0 {
					now -= int64(r.IntN(int(time.Millisecond)))
				}
				continue
			case 1: // a pending reservation is cancelled
				if len(pending) == 0 {
					continue
				}
				i := r.IntN(len(pending))
				h := &pending[i]
				ok := h.r.CancelAt(now)
				if e := exact[h.key]; e != nil {
					if want := h.x.CancelAt(now); ok != want {
						t.Fatalf("step %d: cancelling %q's place: %v, a Throttle of its own %v", step, h.key, ok, want)
					}
				}
				if ok {
					back++
					given[h.key][h.at] = place{math.MinInt64, math.MinInt64} // given back
				}
				pending[i] = pending[len(pending)-1]
				pending = pending[:len(pending)-1]
				continue
			}
			key := keys[r.IntN(len(keys))]
			if r.IntN(2) == 0 {
				key = hot[r.IntN(len(hot))]
			}
			n := int64(1 + r.IntN(3))
			allow := r.IntN(3) == 0
			var res Reservation
			var d Decision
			if allow {
				d = th.AllowNAt(now, key, n)
			} else {
				res = th.ReserveNAt(now, key, n)
				d = res.Decision
			}
			lim := th.keys.limitOf(key)
			if e := exact[key]; e != nil {
				var want Decision
				var x Reservation
				if allow {
					want = e.AllowNAt(now, "", n)
				} else {
					x = e.ReserveNAt(now, "", n)
					want = x.Decision
				}
				if d != want {
					t.Fatalf("step %d: %q with an override, %d at %d: %+v, a Throttle of its own %+v", step, key, n, now, d, want)
				}
				if d.Allowed && !allow {
					pending = append(pending, held{key: key, r: res, x: x, at: len(given[key])})
				}
			} else if d.Allowed && !allow && d.Wait > 0 && r.IntN(4) == 0 {
				// Nothing was given in the block since: the place goes
				// back, as if never taken.
				if !res.CancelAt(now) {
					t.Fatalf("step %d: a place %v away, just reserved, not given back", step, d.Wait)
				}
				back++
				continue
			} else if d.Allowed && !allow && r.IntN(2) == 0 {
				pending = append(pending, held{key: key, r: res, at: len(given[key])})
			}
			if !d.Allowed {
				refused++
				if n > lim && d.Reason != ExceedsLimit || n <= lim && d.Reason != WaitTooLong && d.Reason != RateLimited {
					t.Fatalf("step %d: %d of %d refused with %v", step, n, lim, d.Reason)
				}
				continue
			}
			allowedN++
			if d.Wait > maxWait || allow && d.Wait != 0 {
				t.Fatalf("step %d: allowed with a wait of %v (Allow: %v), most %v", step, d.Wait, allow, maxWait)
			}
			start := max(now, -timegrid.MaxTime) + int64(d.Wait)
			given[key] = append(given[key], place{start, start + paceCost(n, lim, uint64(interval))})
		}
		if allowedN < 1000 || refused < 1000 || back < 100 {
			t.Fatalf("limit %d: %d allowed, %d refused, %d given back: the test did not reach the limits", limit, allowedN, refused, back)
		}
		for key, places := range given {
			given[key] = slices.DeleteFunc(places, func(p place) bool { return p.start == math.MinInt64 })
		}
		given.check(t)
	}
}

// TestKeyedThrottleIsExactForKeysThatShareNoBlock: keys alone in their
// blocks are decided, and their places given back, exactly as by a
// Throttle of their own.
func TestKeyedThrottleIsExactForKeysThatShareNoBlock(t *testing.T) {
	c := clock.NewManual(0)
	th := mustKeyedThrottle(t, 7, time.Second, 500*time.Millisecond, nil, 100, c)
	keys := keysInDistinctBlocks(th.keys.seed, th.keys.mask, 40)
	exact := map[string]*Throttle{}
	for _, key := range keys {
		exact[key] = mustThrottle(t, 7, time.Second, 500*time.Millisecond, c)
	}
	type held struct {
		r Reservation
		x Reservation
	}
	var pending []held
	r := rand.New(rand.NewPCG(4, 5))
	now := int64(0)
	for step := range 100000 {
		switch r.IntN(8) {
		case 0:
			now += int64(r.IntN(int(100 * time.Millisecond)))
			continue
		case 1:
			if len(pending) == 0 {
				continue
			}
			i := r.IntN(len(pending))
			if got, want := pending[i].r.CancelAt(now), pending[i].x.CancelAt(now); got != want {
				t.Fatalf("step %d: cancelling: %v, a Throttle of its own %v", step, got, want)
			}
			pending[i] = pending[len(pending)-1]
			pending = pending[:len(pending)-1]
			continue
		}
		key := keys[r.IntN(len(keys))]
		n := int64(r.IntN(9))
		if r.IntN(3) == 0 {
			if got, want := th.AllowNAt(now, key, n), exact[key].AllowNAt(now, "", n); got != want {
				t.Fatalf("step %d: Allow %d at %d: %+v, a Throttle of its own %+v", step, n, now, got, want)
			}
			continue
		}
		got, want := th.ReserveNAt(now, key, n), exact[key].ReserveNAt(now, "", n)
		if got.Decision != want.Decision {
			t.Fatalf("step %d: Reserve %d at %d: %+v, a Throttle of its own %+v", step, n, now, got.Decision, want.Decision)
		}
		if got.Allowed {
			pending = append(pending, held{got, want})
		}
	}
}

// TestKeyedThrottlePacesAnyRate: the pace is computed in nanoseconds from a
// 128-bit product, so rates far above 1,000 per second (where a pace in
// whole milliseconds rounds to nothing) and far below one a day are kept.
func TestKeyedThrottlePacesAnyRate(t *testing.T) {
	for _, tc := range []struct {
		limit    int64
		interval time.Duration
		pace     int64
		places   int64 // within the maximum wait of 36 years
	}{
		{1000, time.Second, 1e6, 5},
		{1001, time.Second, 999001, 5}, // rounded up: never faster than the limit
		{10000, time.Second, 1e5, 5},
		{1000000, time.Second, 1000, 5},
		{3, 10 * time.Nanosecond, 4, 5},
		{maxLimit, time.Nanosecond, 1, 5},
		{maxLimit, time.Second, 1, 5},
		{1, timegrid.MaxTime, timegrid.MaxTime, 2},
		{maxLimit, timegrid.MaxTime, 268435457, 5}, // 2^60 / (2^32-1), rounded up
	} {
		c := clock.NewManual(0)
		th := mustKeyedThrottle(t, tc.limit, tc.interval, timegrid.MaxTime, nil, 0, c)
		for i := range tc.places {
			d := th.ReserveNAt(0, "k", 1).Decision
			if !d.Allowed || int64(d.Wait) != i*tc.pace {
				t.Fatalf("%d per %v: place %d %+v, want a wait of %d ns", tc.limit, tc.interval, i, d, i*tc.pace)
			}
		}
	}
	// Many places at once take their pace together, rounded up once.
	th := mustKeyedThrottle(t, 3, time.Second, time.Hour, nil, 0, clock.NewManual(0))
	th.ReserveNAt(0, "k", 2)
	if d := th.ReserveNAt(0, "k", 1).Decision; d.Wait != 666666667 {
		t.Fatalf("after 2 of 3 per second: %+v, want a wait of 666666667ns", d)
	}
}

// FuzzKeyedThrottlePace checks the pace against exact arithmetic.
func FuzzKeyedThrottlePace(f *testing.F) {
	f.Add(int64(1), int64(1000), uint64(time.Second))
	f.Add(int64(maxLimit), int64(maxLimit), uint64(timegrid.MaxTime))
	f.Add(int64(7), int64(maxLimit), uint64(1))
	f.Fuzz(func(t *testing.T, n, limit int64, per uint64) {
		limit = 1 + (limit&math.MaxInt64)%maxLimit
		n = 1 + (n&math.MaxInt64)%limit
		per = 1 + per%uint64(timegrid.MaxTime)
		got := paceCost(n, limit, per)
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(n), new(big.Int).SetUint64(per)), big.NewInt(limit), new(big.Int))
		if r.Sign() != 0 {
			q.Add(q, big.NewInt(1))
		}
		if !q.IsInt64() || q.Int64() != got || got > int64(per) || got < 1 {
			t.Fatalf("paceCost(%d, %d, %d) = %d, want %v", n, limit, per, got, q)
		}
	})
}

// nextFree returns key's estimate: the time of its next free place, as the
// sketch has it.
func (t *keyThrottle) nextFree(key string) int64 {
	b, p := t.counters(maphash.String(t.seed, key))
	b.mu.Lock()
	defer b.mu.Unlock()
	return min(b.next[p[0]], b.next[p[1]], b.next[p[2]]) - paceBias
}

// coldWaits paces busy keys a second ahead, then asks, for each of probes
// keys never seen, when its next free place is, and returns the share
// that would have to wait.
func coldWaits(t *testing.T, sized, busy, probes int) float64 {
	th := mustKeyedThrottle(t, 1, time.Second, time.Hour, nil, sized, clock.NewManual(0))
	latest := int64(0) // the busy keys' latest next free place
	for i := range busy {
		d := th.ReserveNAt(0, "busy-"+strconv.Itoa(i), 1).Decision
		latest = max(latest, int64(d.Wait+time.Second))
	}
	waited := 0
	for i := range probes {
		if next := th.keys.nextFree("cold-" + strconv.Itoa(i)); next > 0 {
			waited++
			if next > latest {
				t.Fatalf("a cold key waits %v, longer than any busy key", time.Duration(next))
			}
		}
	}
	return float64(waited) / float64(probes)
}

// TestKeyedThrottleColdKeysRarelyWait measures what the sketch costs: how
// often a key not seen for a pace finds its place in the future, with as
// many keys paced as the limiter was sized for, and twice as many. The
// rates are those KeyedThrottle's doc gives.
func TestKeyedThrottleColdKeysRarelyWait(t *testing.T) {
	const sized, probes = 4096, 100000
	for _, tc := range []struct {
		load int
		most float64
	}{{1, 0.02}, {2, 0.05}} {
		rate := coldWaits(t, sized, tc.load*sized, probes)
		t.Logf("%d× the keys sized for paced ahead: %.3f%% of cold keys wait", tc.load, 100*rate)
		if rate > tc.most {
			t.Errorf("%d× the keys: %.3f%% of cold keys wait, expected at most %.1f%%", tc.load, 100*rate, 100*tc.most)
		}
	}
}

// collidingKeys returns two keys of the same block that do not share all
// three counters.
func collidingKeys(seed maphash.Seed, mask uint64) (string, string) {
	type seen struct {
		key   string
		combo uint64
	}
	first := map[uint64]seen{}
	for i := 0; ; i++ {
		key := "k" + strconv.Itoa(i)
		h := maphash.String(seed, key)
		combo := (h >> 32) % paceCombos
		o, ok := first[h&mask]
		if ok && o.combo != combo {
			return o.key, key
		}
		if !ok {
			first[h&mask] = seen{key, combo}
		}
	}
}

func TestKeyedThrottleCancelGivesBackOnlyTheLastPlaceOfItsBlock(t *testing.T) {
	c := clock.NewManual(0)
	th := mustKeyedThrottle(t, 10, time.Second, time.Second, map[string]int64{"vip": 10}, 0, c)
	for _, key := range []string{"k", "vip"} {
		th.ReserveN(key, 1)
		middle := th.ReserveN(key, 1) // 100 ms
		last := th.ReserveN(key, 1)   // 200 ms
		if middle.Cancel() {
			t.Fatalf("%q: a place in the middle of the queue was given back", key)
		}
		if !last.Cancel() || last.Cancel() {
			t.Fatalf("%q: the last place must be given back exactly once", key)
		}
		if d := th.ReserveN(key, 1).Decision; d.Wait != 200*time.Millisecond {
			t.Fatalf("%q: next place %v, want 200ms", key, d.Wait)
		}
		past := th.ReserveN(key, 1)
		if past.CancelAt(c.Now() + int64(past.Wait)) {
			t.Fatalf("%q: a place that has come cannot be given back", key)
		}
		blocked := th.ReserveNAt(0, key, 100)
		if blocked.Allowed || blocked.Cancel() {
			t.Fatalf("%q: cancelling a blocked reservation", key)
		}
	}
	// A key whose hash equals an override's (one chance in 2^64, forced
	// here) is paced as any other key, not as the override.
	imp := mustKeyedThrottle(t, 10, time.Second, time.Second, map[string]int64{"vip": 20}, 0, c)
	pins := imp.keys.limits.Load().pins
	pins.index[maphash.String(imp.keys.seed, "impostor")] = pins.index[maphash.String(imp.keys.seed, "vip")]
	if imp.keys.limitOf("impostor") != 10 || imp.ReserveNAt(0, "impostor", 11).Reason != ExceedsLimit || !imp.ReserveNAt(0, "vip", 20).Allowed {
		t.Fatal("a key sharing an override's hash was taken for it")
	}
	var zero Reservation
	if zero.Cancel() || zero.CancelAt(0) {
		t.Fatal("cancelling a zero Reservation")
	}
	// Another key's place in the block since keeps the place taken: its
	// counters may carry the other key's next free place now.
	a, b := collidingKeys(th.keys.seed, th.keys.mask)
	ra := th.ReserveNAt(0, a, 1)
	ra = th.ReserveNAt(0, a, 1) // 100 ms away
	th.ReserveNAt(0, b, 1)
	if ra.CancelAt(0) {
		t.Fatal("a place given back after another key's place in its block")
	}
	if d := th.ReserveNAt(0, a, 1).Decision; d.Wait != 200*time.Millisecond {
		t.Fatalf("after a cancel that could not give back: %+v, want 200ms", d)
	}
}

func TestKeyedThrottleWaitSleepsOnItsClockAndCancelGivesThePlaceBack(t *testing.T) {
	c := clock.NewManual(0)
	th := mustKeyedThrottle(t, 10, time.Second, time.Second, nil, 0, c)
	if err := th.Wait(context.Background(), "k"); err != nil { // first place: no wait
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- th.Wait(context.Background(), "k") }()
	for c.Sleepers() == 0 {
		runtime.Gosched()
	}
	c.Advance(100 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v", err)
	}
	// A cancelled wait gives its place back: the next request gets it.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- th.WaitN(ctx, "k", 1) }()
	for c.Sleepers() == 0 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait = %v", err)
	}
	if d := th.ReserveN("k", 1).Decision; !d.Allowed || d.Wait != 100*time.Millisecond {
		t.Fatalf("after the cancelled wait: %+v, want the cancelled place, 100ms away", d)
	}
	// Another key is paced on its own.
	if d := th.Allow("other"); !d.Allowed {
		t.Fatalf("another key: %+v", d)
	}
}

func TestKeyedThrottleWaitBlocks(t *testing.T) {
	c := clock.NewManual(0)
	th := mustKeyedThrottle(t, 1, time.Second, 500*time.Millisecond, map[string]int64{"banned": 0}, 0, c)
	th.Allow("k")
	var re *BlockError
	if err := th.Wait(context.Background(), "k"); !errors.As(err, &re) || re.Reason != WaitTooLong || re.RetryAfter != 500*time.Millisecond {
		t.Fatalf("Wait = %v, want a BlockError: wait too long, retry after 500ms", err)
	} else if !errors.Is(err, ErrBlocked) {
		t.Fatalf("errors.Is(%v, ErrBlocked) = false", err)
	}
	if d := th.AllowN("k", 1); d.Reason != RateLimited || d.RetryAfter != time.Second {
		t.Fatalf("Allow with the place a second away: %+v", d)
	}
	if err := th.WaitN(context.Background(), "k", 2); !errors.As(err, &re) || re.Reason != ExceedsLimit {
		t.Fatalf("WaitN(2) of 1 = %v", err)
	}
	if err := th.Wait(context.Background(), "banned"); !errors.As(err, &re) || re.Reason != ExceedsLimit {
		t.Fatalf("Wait for an override of 0 = %v", err)
	}
	th2 := mustKeyedThrottle(t, 1, 2*time.Hour, 3*time.Hour, nil, 0, c)
	th2.Allow("k")
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := th2.Wait(ctx, "k"); !errors.As(err, &re) || re.Reason != WaitTooLong || re.RetryAfter != 0 {
		t.Fatalf("a place beyond the context's deadline: %v", err)
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if err := th2.Wait(done, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a done context = %v", err)
	}
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	if err := th2.Wait(past, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline = %v", err)
	}
}

// TestKeyedThrottleConcurrentReservationsKeepEachKeysPace has goroutines
// reserve, and now and then give back, places of a few keys and of many,
// in a sketch small enough that they collide, on a clock another goroutine
// advances: no key's places overlap.
func TestKeyedThrottleConcurrentReservationsKeepEachKeysPace(t *testing.T) {
	c := clock.NewManual(0)
	th := mustKeyedThrottle(t, 1000, time.Second, 50*time.Millisecond, map[string]int64{"vip": 2000}, 1, c)
	keys := []string{"a", "b", "vip"}
	for i := range 1000 {
		keys = append(keys, "user-"+strconv.Itoa(i))
	}
	var mu sync.Mutex
	given := paces{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range 5000 {
				if i%100 == 0 {
					c.Advance(time.Millisecond)
				}
				key := keys[r.IntN(3)]
				if i%2 == 1 {
					key = keys[r.IntN(len(keys))]
				}
				now := c.Now()
				n := int64(1 + r.IntN(2))
				res := th.ReserveNAt(now, key, n)
				if !res.Allowed {
					continue
				}
				if res.Wait > 50*time.Millisecond {
					t.Errorf("a wait of %v, most 50ms", res.Wait)
					return
				}
				if r.IntN(4) == 0 && res.CancelAt(now) {
					continue // given back: no place taken
				}
				start := now + int64(res.Wait)
				mu.Lock()
				given[key] = append(given[key], place{start, start + paceCost(n, th.keys.limitOf(key), uint64(time.Second))})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	given.check(t)
	if len(given["a"]) < 100 {
		t.Fatalf("only %d places for a busy key", len(given["a"]))
	}
}

func TestKeyedThrottleConfigErrorsNameTheFieldAndValue(t *testing.T) {
	type args struct {
		limit             int64
		interval, maxWait time.Duration
		overrides         map[string]int64
		keys              int
	}
	ok := args{limit: 1, interval: time.Second}
	with := func(f func(*args)) args { a := ok; f(&a); return a }
	for _, tc := range []struct {
		args    args
		option  string
		message string
	}{
		{with(func(a *args) { a.limit = 0 }), "limit", "limit = 0: must be between 1 and 4294967295"},
		{with(func(a *args) { a.limit = maxLimit + 1 }), "limit", "limit = 4294967296"},
		{with(func(a *args) { a.interval = 0 }), "interval", "interval = 0s: must be positive"},
		{with(func(a *args) { a.interval = timegrid.MaxTime + 1 }), "interval", "must be positive and at most"},
		{with(func(a *args) { a.maxWait = -1 }), "max_wait", "max_wait = -1ns: must not be negative"},
		{with(func(a *args) { a.keys = -3 }), "keys", "keys = -3: must be between 0 and 262144"},
		{with(func(a *args) { a.overrides = map[string]int64{"x": -1} }), "overrides", `overrides = "x": -1`},
	} {
		a := tc.args
		_, err := NewThrottle(ThrottleSettings{PerKey: true, Limit: a.limit, Interval: a.interval, MaxWait: a.maxWait, Overrides: a.overrides, Keys: a.keys})
		var ce *configError
		if !errors.As(err, &ce) || !errors.Is(err, config.ErrInvalid) || ce.Field != tc.option || !strings.Contains(err.Error(), tc.message) {
			t.Errorf("NewKeyedThrottle(%+v) = %v, want a ConfigError of %s saying %q", a, err, tc.option, tc.message)
		}
	}
	th := mustKeyedThrottle(t, 5, time.Second, timegrid.MaxTime+5, map[string]int64{"vip": 9}, 0, clock.NewManual(0))
	if th.limitNow() != 5 || th.keys.limitOf("vip") != 9 || th.keys.limitOf("k") != 5 || th.per != uint64(time.Second) || th.maxWait != timegrid.MaxTime {
		t.Fatal("accessors")
	}
	if d := th.AllowNAt(0, "k", 0); !d.Allowed || d.Wait != 0 {
		t.Fatal("n = 0 must be allowed, taking nothing")
	}
	if r := th.ReserveNAt(0, "k", -1); !r.Allowed || r.Cancel() {
		t.Fatal("n < 0 must be allowed, taking nothing to give back")
	}
}

func TestKeyedThrottleAllocatesNothing(t *testing.T) {
	c := clock.NewManual(0)
	th := mustKeyedThrottle(t, 1000, time.Second, time.Second, map[string]int64{"vip": 5}, 0, c)
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	long := strings.Repeat("x", 4096)
	i := 0
	if a := testing.AllocsPerRun(10000, func() {
		c.Advance(time.Microsecond)
		th.Allow(keys[i%len(keys)])
		r := th.ReserveN("vip", 1)
		r.Cancel()
		r = th.ReserveN(long, 1)
		r.Cancel()
		i++
	}); a != 0 {
		t.Fatalf("deciding allocates %v times", a)
	}
}

// TestKeyedThrottleMemoryIsFixedWhateverTheKeys: a flood of distinct keys
// grows nothing and never paces a key with an override; Bytes says what
// the limiter takes; and the sketch's blocks are cache lines.
func TestKeyedThrottleMemoryIsFixedWhateverTheKeys(t *testing.T) {
	if s := unsafe.Sizeof(paceBlock{}); s != 64 {
		t.Fatalf("a block takes %d bytes, not a cache line", s)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := clock.NewManual(0)
	th := mustKeyedThrottle(t, 1, time.Minute, 0, map[string]int64{"vip": 1000}, 1<<13, c)
	runtime.GC()
	runtime.ReadMemStats(&after)
	made := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if b := int64(th.keys.bytes()); made > b+b/20 || made < b-b/20 {
		t.Fatalf("the limiter took %d bytes of heap, Bytes says %d", made, b)
	}
	if addr := uintptr(unsafe.Pointer(&th.keys.blocks[0])); addr%64 != 0 {
		t.Fatalf("the sketch starts at %#x, not on a cache line", addr)
	}
	keys := make([]string, 200000)
	for i := range keys {
		keys[i] = "flood-" + strconv.Itoa(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&before)
	allowedN := 0
	for _, key := range keys {
		if th.AllowNAt(0, key, 1).Allowed {
			allowedN++
		}
	}
	runtime.ReadMemStats(&after)
	// TotalAlloc counts the whole process (the runtime, the testing
	// package): a few bytes are theirs; one allocation per key would be
	// megabytes.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4096 {
		t.Fatalf("%d keys allocated %d bytes", len(keys), grew)
	}
	for i := range 1000 {
		if d := th.AllowNAt(int64(i)*int64(time.Minute/1000), "vip", 1); !d.Allowed {
			t.Fatalf("the override's request %d refused while the sketch is flooded: %+v", i, d)
		}
	}
	t.Logf("a flood of %d keys in a sketch sized for %d: %d allowed", len(keys), 1<<13, allowedN)
	// A pace on, every key is as new.
	for _, key := range keys {
		if next := th.keys.nextFree(key); next > int64(time.Minute) {
			t.Fatalf("a key's next place is at %v, a pace after the flood", time.Duration(next))
		}
	}
}

// Each user's requests spaced 100 ms apart, waiting at most 250 ms.
func ExampleThrottle_perKey() {
	c := clock.NewManual(0)
	limiter, err := NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, MaxWait: 250 * time.Millisecond, PerKey: true, Clock: c})
	if err != nil {
		panic(err)
	}
	for range 4 {
		r := limiter.ReserveN("alice", 1)
		fmt.Println(r.Allowed, r.Wait, r.Reason)
	}
	fmt.Println(limiter.Allow("bob").Allowed) // another key, paced on its own
	// Output:
	// true 0s not blocked
	// true 100ms not blocked
	// true 200ms not blocked
	// false 0s wait too long
	// true
}
