package flow

import (
	"errors"
	"hash/maphash"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// randomOverrides returns overrides for some of keys, each of limit 0 to
// most.
func randomOverrides(r *rand.Rand, keys []string, most int64) map[string]int64 {
	o := map[string]int64{}
	for _, k := range keys {
		if r.IntN(3) == 0 {
			o[k] = r.Int64N(most + 1)
		}
	}
	return o
}

// TestKeyedConcurrencySetKeepsWhatEveryKeyHolds runs random acquisitions,
// releases and Sets (limits changed, overrides given, changed and taken
// away, the keys that hold places among them) against an exact model of
// each key's places: no key is allowed beyond the limit in force, a key's
// InFlight is never below its places, and once everything is released every
// key can take its whole limit again.
func TestKeyedConcurrencySetKeepsWhatEveryKeyHolds(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 3))
		keys := []string{"a", "b", "c", "d", ""}
		for i := range 200 {
			keys = append(keys, "user-"+strconv.Itoa(i))
		}
		few := keys[:6]
		c := mustKeyedConcurrency(t, 2, randomOverrides(r, few, 3), 1) // 64 blocks: keys collide
		type hold struct {
			key string
			p   *Permit
			n   int64
		}
		var holds []hold
		held := map[string]int64{}
		allowedN := 0
		for step := range 20000 {
			switch op := r.IntN(20); {
			case op == 0:
				if err := c.Set(r.Int64N(4), randomOverrides(r, few, 3)); err != nil {
					t.Fatal(err)
				}
			case op < 8 && len(holds) > 0:
				i := r.IntN(len(holds))
				h := holds[i]
				h.p.Done(Succeeded)
				held[h.key] -= h.n
				holds[i] = holds[len(holds)-1]
				holds = holds[:len(holds)-1]
			default:
				key := few[r.IntN(len(few))]
				if r.IntN(4) == 0 {
					key = keys[r.IntN(len(keys))]
				}
				n := int64(1 + r.IntN(2))
				p := new(Permit)
				if !c.AcquireN(p, key, n).Allowed {
					continue
				}
				allowedN++
				held[key] += n
				if lim := c.keys.limitOf(key); held[key] > lim {
					t.Fatalf("seed %d, step %d: key %q holds %d places, limit %d", seed, step, key, held[key], lim)
				}
				if got := c.InFlight(key); got < held[key] {
					t.Fatalf("seed %d, step %d: InFlight(%q) = %d below its %d places", seed, step, key, got, held[key])
				}
				holds = append(holds, hold{key, p, n})
			}
		}
		if allowedN < 1000 {
			t.Fatalf("seed %d: only %d allowed", seed, allowedN)
		}
		for _, h := range holds {
			h.p.Done(Succeeded)
		}
		if !c.keys.sketchIsEmpty() {
			t.Fatalf("seed %d: the sketch holds places after every permit was released", seed)
		}
		for _, key := range keys {
			var p Permit
			if lim := c.keys.limitOf(key); lim > 0 && !c.AcquireN(&p, key, lim).Allowed {
				t.Fatalf("seed %d: key %q refused its whole limit %d with nothing held", seed, key, lim)
			}
			p.Done(Succeeded)
		}
	}
}

// TestKeyedConcurrencySetUnderRaceKeepsEveryKeyWithinItsLimit has
// goroutines acquire and release places of a few keys while another gives
// those keys overrides and takes them away, again and again, at the same
// limit as every other key's: no key ever holds more than that limit.
func TestKeyedConcurrencySetUnderRaceKeepsEveryKeyWithinItsLimit(t *testing.T) {
	const limit = 2
	keys := []string{"a", "b", "c", "d"}
	c := mustKeyedConcurrency(t, limit, nil, 1)
	var truth [4]atomic.Int64
	var over, allowedN atomic.Int64
	stop := make(chan struct{})
	var sets sync.WaitGroup
	sets.Add(1)
	go func() {
		defer sets.Done()
		r := rand.New(rand.NewPCG(1, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			o := map[string]int64{}
			for _, k := range keys {
				if r.IntN(2) == 0 {
					o[k] = limit
				}
			}
			if err := c.Set(limit, o); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 2))
			var p Permit
			for range 30000 {
				i := r.IntN(len(keys))
				if !c.Acquire(&p, keys[i]).Allowed {
					continue
				}
				allowedN.Add(1)
				if truth[i].Add(1) > limit {
					over.Add(1)
				}
				truth[i].Add(-1)
				p.Done(Succeeded)
			}
		}()
	}
	wg.Wait()
	close(stop)
	sets.Wait()
	if over.Load() != 0 {
		t.Fatalf("%d times a key held more than its limit of %d", over.Load(), limit)
	}
	if allowedN.Load() < 1000 {
		t.Fatalf("only %d allowed", allowedN.Load())
	}
	if err := c.Set(limit, nil); err != nil {
		t.Fatal(err)
	}
	if !c.keys.sketchIsEmpty() {
		t.Fatal("the sketch holds places after every permit was released")
	}
}

// TestKeyedThrottleSetKeepsEveryKeysPace runs random reservations,
// cancellations and Sets (limits changed, overrides given, changed and
// taken away, the keys that were paced among them) on a clock that moves
// forward: no key's places overlap, each place taking the pace of the
// limits it was given under.
func TestKeyedThrottleSetKeepsEveryKeysPace(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 5))
		c := clock.NewManual(0)
		keys := []string{"a", "b", "c", "d", ""}
		for i := range 200 {
			keys = append(keys, "user-"+strconv.Itoa(i))
		}
		few := keys[:6]
		th := mustKeyedThrottle(t, 3, time.Second, 300*time.Millisecond, randomOverrides(r, few, 4), 1, c)
		given := paces{}
		allowedN := 0
		for range 20000 {
			switch op := r.IntN(20); {
			case op == 0:
				if err := th.Set(1+r.Int64N(4), randomOverrides(r, few, 4)); err != nil {
					t.Fatal(err)
				}
			case op < 5:
				c.Advance(time.Duration(r.IntN(100)) * time.Millisecond)
			default:
				key := few[r.IntN(len(few))]
				if r.IntN(4) == 0 {
					key = keys[r.IntN(len(keys))]
				}
				n := int64(1 + r.IntN(2))
				now := c.Now()
				lim := th.keys.limitOf(key)
				res := th.ReserveNAt(now, key, n)
				if !res.Allowed || r.IntN(5) == 0 && res.CancelAt(now) {
					continue
				}
				allowedN++
				start := now + int64(res.Wait)
				given[key] = append(given[key], place{start, start + paceCost(n, lim, uint64(time.Second))})
			}
		}
		given.check(t)
		if allowedN < 1000 {
			t.Fatalf("seed %d: only %d allowed", seed, allowedN)
		}
	}
}

// TestKeyedThrottleSetUnderRaceKeepsEveryKeysPace has goroutines reserve
// places of a few keys, on a clock another goroutine advances, while a
// third gives those keys overrides and takes them away, again and again,
// at the same limit as every other key's: no key's places overlap.
func TestKeyedThrottleSetUnderRaceKeepsEveryKeysPace(t *testing.T) {
	const limit = 1000
	c := clock.NewManual(0)
	keys := []string{"a", "b", "c", "d"}
	th := mustKeyedThrottle(t, limit, time.Second, 5*time.Millisecond, nil, 1, c)
	stop := make(chan struct{})
	var sets sync.WaitGroup
	sets.Add(1)
	go func() {
		defer sets.Done()
		r := rand.New(rand.NewPCG(1, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			o := map[string]int64{}
			for _, k := range keys {
				if r.IntN(2) == 0 {
					o[k] = limit
				}
			}
			if err := th.Set(limit, o); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var mu sync.Mutex
	given := paces{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 4))
			mine := paces{}
			for i := range 20000 {
				if i%50 == 0 {
					c.Advance(time.Millisecond)
				}
				key := keys[r.IntN(len(keys))]
				now := c.Now()
				res := th.ReserveNAt(now, key, 1)
				if !res.Allowed {
					continue
				}
				start := now + int64(res.Wait)
				mine[key] = append(mine[key], place{start, start + paceCost(1, limit, uint64(time.Second))})
			}
			mu.Lock()
			for k, ps := range mine {
				given[k] = append(given[k], ps...)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stop)
	sets.Wait()
	given.check(t)
	if n := len(given["a"]); n < 100 {
		t.Fatalf("only %d places for a busy key", n)
	}
}

// TestKeyedSetRefusesBadLimitsAndKeepsThoseInForce: a bad limit or
// override is a ConfigError naming it, and the limits stay.
func TestKeyedSetRefusesBadLimitsAndKeepsThoseInForce(t *testing.T) {
	over := map[string]int64{"vip": 5}
	c := mustKeyedConcurrency(t, 2, over, 0)
	th := mustKeyedThrottle(t, 2, time.Second, 0, over, 0, clock.NewManual(0))
	for _, tc := range []struct {
		limit     int64
		overrides map[string]int64
		option    string
	}{
		{-1, nil, "limit"},
		{maxLimit + 1, nil, "limit"},
		{3, map[string]int64{"a": 1, "z": -1, "b": maxLimit + 1}, "overrides"},
	} {
		for name, set := range map[string]func(int64, map[string]int64) error{"KeyedConcurrency": c.Set, "KeyedThrottle": th.Set} {
			err := set(tc.limit, tc.overrides)
			var ce *configError
			if !errors.As(err, &ce) || ce.Field != tc.option {
				t.Errorf("%s.Set(%d, %v) = %v, want a ConfigError of %s", name, tc.limit, tc.overrides, err, tc.option)
			}
		}
	}
	if c.limitNow() != 2 || c.keys.limitOf("vip") != 5 || th.limitNow() != 2 || th.keys.limitOf("vip") != 5 {
		t.Fatal("a refused Set changed the limits")
	}
	if err := th.Set(0, nil); err == nil {
		t.Fatal("a keyed throttle paces at least 1 request per interval")
	}
	bad := maps.Clone(over)
	bad["b"] = maxLimit + 1
	err := c.Set(1, bad)
	if err == nil || err.Error() != `flow: invalid configuration: overrides = "b": 4294967296: must be between 0 and 4294967295` {
		t.Fatalf("Set with a bad override = %v", err)
	}
}

// TestOverridesSharingAHashAreEachFound: keys whose hashes are equal (one
// chance in 2^64 per pair, forced here) are chained, each found whole.
func TestOverridesSharingAHashAreEachFound(t *testing.T) {
	e1, e2 := new(pinnedCount), new(pinnedCount)
	tab := pinTable[pinnedCount]{
		index: map[uint64]int32{7: 1},
		slots: []pinSlot[pinnedCount]{{e: e1, key: "one", limit: 1, next: -1}, {e: e2, key: "two", limit: 2, next: 0}},
	}
	if s := tab.find(7, "one"); s == nil || s.e != e1 {
		t.Fatal("the first key of a chain not found")
	}
	if s := tab.find(7, "two"); s == nil || s.e != e2 {
		t.Fatal("the last key of a chain not found")
	}
	if tab.find(7, "three") != nil || tab.find(8, "one") != nil {
		t.Fatal("a key found that has no override")
	}
}

// TestAReservationUnderLimitsNoLongerInForceTakesNothing: a reservation
// in the sketch that finds, under its block's mutex, that Set put other
// limits in force since it read them (here, an override of its key) takes
// nothing there and is decided again, under the limits in force: their
// decisions could not have seen it. The test holds the key's block while
// the reservation waits for it and Set puts the override in force. (A
// KeyedConcurrency acquisition checks the same once counted, with no lock
// to hold it at; TestKeyedConcurrencySetUnderRace... races it.)
func TestAReservationUnderLimitsNoLongerInForceTakesNothing(t *testing.T) {
	th := mustKeyedThrottle(t, 2, time.Second, time.Second, nil, 0, clock.NewManual(0))
	b, _ := th.keys.counters(maphash.String(th.keys.seed, "a"))
	b.mu.Lock()
	done := make(chan Reservation)
	go func() { done <- th.ReserveNAt(0, "a", 1) }()
	// Give the reservation time to read the limits and wait for the
	// block; if it has not by then, it reads the new limits, and the test
	// holds all the same.
	time.Sleep(20 * time.Millisecond)
	if err := th.Set(2, map[string]int64{"a": 2}); err != nil {
		t.Fatal(err)
	}
	b.mu.Unlock()
	r := <-done
	if !r.Allowed || r.next == nil || b.writes != 0 {
		t.Fatalf("%+v, %d writes in the sketch: a reservation under limits no longer in force took its place there", r.Decision, b.writes)
	}
}

// TestThrottleSetLimitKeepsTheNextFreePlace: a new limit takes effect from
// the next free place on, which the last place given still ends at.
func TestThrottleSetLimitKeepsTheNextFreePlace(t *testing.T) {
	th, err := NewThrottle(ThrottleSettings{Limit: 1, Interval: time.Second, MaxWait: 0})
	if err != nil {
		t.Fatal(err)
	}
	if !th.AllowAt(0, "").Allowed {
		t.Fatal("the first request refused")
	}
	if err := th.Set(4, nil); err != nil {
		t.Fatal(err)
	}
	if d := th.AllowAt(int64(999*time.Millisecond), ""); d.Allowed || d.RetryAfter != time.Millisecond {
		t.Fatalf("before the last place ends: %+v, want a retry after 1ms", d)
	}
	for _, at := range []time.Duration{time.Second, 1250 * time.Millisecond} {
		if !th.AllowAt(int64(at), "").Allowed {
			t.Fatalf("at %v, on the new pace of 250ms: refused", at)
		}
	}
	if th.AllowAt(int64(1499*time.Millisecond), "").Allowed || th.limitNow() != 4 {
		t.Fatal("the new pace is not kept")
	}
	var ce *configError
	if err := th.Set(0, nil); !errors.As(err, &ce) || ce.Field != "limit" || th.limitNow() != 4 {
		t.Fatalf("SetLimit(0) = %v, limit %d", err, th.limitNow())
	}
	warm, err := NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, MaxWait: 0, WarmUp: 10 * time.Second, ColdFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Set(20, nil); !errors.As(err, &ce) || warm.limitNow() != 10 {
		t.Fatalf("a warming throttle's SetLimit = %v, limit %d", err, warm.limitNow())
	}
}

// BenchmarkKeyedOverride decides one request of a key with an override,
// among 10,000 overrides: a place taken and released in a KeyedConcurrency,
// a place given by a KeyedThrottle.
func BenchmarkKeyedOverride(b *testing.B) {
	overrides := map[string]int64{}
	for i := range 10000 {
		overrides["tenant-"+strconv.Itoa(i)] = maxLimit
	}
	b.Run("concurrency", func(b *testing.B) {
		c, _ := NewConcurrency(ConcurrencySettings{PerKey: true, Limit: 100, Overrides: overrides})
		b.ReportAllocs()
		for b.Loop() {
			var p Permit
			c.Acquire(&p, "tenant-17")
			p.Done(Succeeded)
		}
	})
	b.Run("throttle", func(b *testing.B) {
		th, _ := NewThrottle(ThrottleSettings{PerKey: true, Limit: 100, Interval: time.Second, MaxWait: time.Hour, Overrides: overrides, Clock: clock.NewManual(0)})
		b.ReportAllocs()
		now := int64(0)
		for b.Loop() {
			now += 100
			th.AllowNAt(now, "tenant-17", 1)
		}
	})
}
