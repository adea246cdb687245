package flow

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

func mustKeyedConcurrency(t testing.TB, limit int64, overrides map[string]int64, keys int) *Concurrency {
	t.Helper()
	c, err := NewConcurrency(ConcurrencySettings{PerKey: true, Limit: limit, Overrides: overrides, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// hostileKeys are keys an attacker might send: empty, long, binary, and
// near the keys of the overrides.
func hostileKeys() []string {
	return []string{"", "\x00", "\xff\xfe", strings.Repeat("a", 1<<16), "vip\x00", "vip ", "VIP", "vi", "vipp", strings.Repeat("\x00", 64)}
}

// sketchIsEmpty reports whether every counter of the sketch is 0.
func (c *keyConcurrency) sketchIsEmpty() bool {
	for i := range c.cells {
		if c.cells[i].Load() != 0 {
			return false
		}
	}
	return true
}

// TestKeyedConcurrencyNeverExceedsAnyKeysLimit runs random acquisitions and
// releases of many more keys than the sketch has counters, hostile keys
// and keys with overrides among them, against an exact model of each key's
// places: no key is ever allowed beyond its limit, a key's InFlight is
// never below its places, the keys with overrides are decided exactly, and
// once everything is released the sketch is empty again.
func TestKeyedConcurrencyNeverExceedsAnyKeysLimit(t *testing.T) {
	overrides := map[string]int64{"vip": 5, "banned": 0, "one": 1}
	for _, limit := range []int64{1, 2, 3} {
		c := mustKeyedConcurrency(t, limit, overrides, 1) // 64 blocks: 512 counters
		r := rand.New(rand.NewPCG(uint64(limit), 7))
		keys := hostileKeys()
		for i := range 3000 {
			keys = append(keys, "user-"+strconv.Itoa(i))
		}
		keys = append(keys, "vip", "banned", "one")
		held := map[string]int64{}
		type hold struct {
			key string
			p   *Permit
			n   int64
		}
		var holds []hold
		var allowedN, refused int
		for step := range 200000 {
			if len(holds) > 0 && (r.IntN(2) == 0 || len(holds) > 4000) {
				i := r.IntN(len(holds))
				h := holds[i]
				h.p.Done(Succeeded)
				if r.IntN(4) == 0 {
					h.p.Done(Succeeded) // a second release gives nothing back
				}
				held[h.key] -= h.n
				holds[i] = holds[len(holds)-1]
				holds = holds[:len(holds)-1]
				continue
			}
			key := keys[r.IntN(len(keys))]
			n := int64(1 + r.IntN(2))
			p := new(Permit)
			d := c.AcquireN(p, key, n)
			lim := c.keys.limitOf(key)
			if _, ok := overrides[key]; ok {
				if want := held[key]+n <= lim; d.Allowed != want {
					t.Fatalf("step %d: key %q with an override, %d held, %d more of %d: allowed %v, want %v", step, key, held[key], n, lim, d.Allowed, want)
				}
			}
			if !d.Allowed {
				refused++
				if n <= lim && d.Reason != ConcurrencyLimited || n > lim && d.Reason != ExceedsLimit {
					t.Fatalf("step %d: %d of %d refused with %v", step, n, lim, d.Reason)
				}
				if c.InFlight(key)+n <= lim {
					t.Fatalf("step %d: key %q refused %d with %d in flight of %d", step, key, n, c.InFlight(key), lim)
				}
				continue
			}
			allowedN++
			held[key] += n
			if held[key] > lim {
				t.Fatalf("step %d: key %q holds %d places, limit %d", step, key, held[key], lim)
			}
			holds = append(holds, hold{key, p, n})
			if got := c.InFlight(key); got < held[key] {
				t.Fatalf("step %d: InFlight(%q) = %d below its %d places", step, key, got, held[key])
			}
		}
		if allowedN < 1000 || refused < 1000 {
			t.Fatalf("limit %d: %d allowed, %d refused: the test did not reach the limits", limit, allowedN, refused)
		}
		for _, h := range holds {
			h.p.Done(Succeeded)
		}
		if !c.keys.sketchIsEmpty() {
			t.Fatalf("limit %d: the sketch holds places after every permit was released", limit)
		}
		for _, s := range c.keys.limits.Load().pins.slots {
			if n := s.e.inflight.Load(); n != 0 {
				t.Fatalf("override %q holds %d after every permit was released", s.key, n)
			}
		}
	}
}

// keysInDistinctBlocks returns n keys whose hashes fall in distinct blocks
// of a sketch with the given mask: keys that share no counter.
func keysInDistinctBlocks(seed maphash.Seed, mask uint64, n int) []string {
	seen := map[uint64]bool{}
	var keys []string
	for i := 0; len(keys) < n; i++ {
		key := "k" + strconv.Itoa(i)
		if b := maphash.String(seed, key) & mask; !seen[b] {
			seen[b] = true
			keys = append(keys, key)
		}
	}
	return keys
}

// TestKeyedConcurrencyIsExactForKeysThatShareNoCounter: keys alone in their
// blocks are decided exactly as a Concurrency of their own would decide.
func TestKeyedConcurrencyIsExactForKeysThatShareNoCounter(t *testing.T) {
	c := mustKeyedConcurrency(t, 4, nil, 100)
	keys := keysInDistinctBlocks(c.keys.seed, c.keys.mask, 50)
	exact := map[string]*Concurrency{}
	for _, key := range keys {
		exact[key], _ = NewConcurrency(ConcurrencySettings{Limit: 4})
	}
	var holds []*Permit
	var kps []*Permit
	r := rand.New(rand.NewPCG(1, 2))
	for step := range 50000 {
		if len(kps) > 0 && r.IntN(2) == 0 {
			i := r.IntN(len(kps))
			kps[i].Done(Succeeded)
			holds[i].Done(Succeeded)
			kps[i], holds[i] = kps[len(kps)-1], holds[len(holds)-1]
			kps, holds = kps[:len(kps)-1], holds[:len(holds)-1]
			continue
		}
		key := keys[r.IntN(len(keys))]
		n := int64(r.IntN(6))
		kp, p := new(Permit), new(Permit)
		got, want := c.AcquireN(kp, key, n), exact[key].AcquireN(p, "", n)
		if got != want {
			t.Fatalf("step %d: key %q, %d places: %+v, a Concurrency of its own %+v", step, key, n, got, want)
		}
		if got.Allowed && n > 0 {
			kps, holds = append(kps, kp), append(holds, p)
		}
		if c.InFlight(key) != exact[key].InFlight("") {
			t.Fatalf("step %d: InFlight(%q) = %d, exactly %d", step, key, c.InFlight(key), exact[key].InFlight(""))
		}
	}
}

// TestKeyedConcurrencyNeverExceedsTheLimitUnderRace has goroutines acquire
// and release places of a few keys and of many, in a sketch small enough
// that they all collide, and checks each key's true count whenever it is
// allowed. Reading the counters' values as the adds return them, instead
// of again after the last add, lets two acquirers of one key in (see
// KeyedConcurrency): under the race detector, which widens the windows
// between the adds, this test caught that in every run tried, and without
// it in about one run of three.
func TestKeyedConcurrencyNeverExceedsTheLimitUnderRace(t *testing.T) {
	for _, limit := range []int64{1, 2} {
		c := mustKeyedConcurrency(t, limit, map[string]int64{"vip": 3}, 1)
		keys := []string{"a", "b", "c", "vip"}
		for i := range 500 {
			keys = append(keys, "user-"+strconv.Itoa(i))
		}
		truth := map[string]*atomic.Int64{}
		for _, key := range keys {
			truth[key] = new(atomic.Int64)
		}
		var over atomic.Int64
		var allowedN atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), uint64(limit)))
				var p Permit
				for i := range 50000 {
					key := keys[r.IntN(4)]
					if i%4 == 3 {
						key = keys[r.IntN(len(keys))]
					}
					if !c.Acquire(&p, key).Allowed {
						continue
					}
					allowedN.Add(1)
					if truth[key].Add(1) > c.keys.limitOf(key) {
						over.Add(1)
					}
					if i%16 == 0 {
						runtime.Gosched()
					}
					truth[key].Add(-1)
					p.Done(Succeeded)
					p.Done(Succeeded)
				}
			}()
		}
		wg.Wait()
		if over.Load() != 0 {
			t.Fatalf("limit %d: %d times a key held more than its limit", limit, over.Load())
		}
		if allowedN.Load() < 1000 {
			t.Fatalf("limit %d: only %d allowed", limit, allowedN.Load())
		}
		if !c.keys.sketchIsEmpty() || c.InFlight("vip") != 0 {
			t.Fatalf("limit %d: places left after every permit was released", limit)
		}
	}
}

// refusalRate puts keys keys in flight with one place each, then asks for
// one place for each of probes keys never seen, releasing it at once, and
// returns the share refused.
func refusalRate(t *testing.T, limit int64, sized, keys, probes int) float64 {
	c := mustKeyedConcurrency(t, limit, nil, sized)
	ps := make([]Permit, keys)
	for i := range ps {
		c.Acquire(&ps[i], "busy-"+strconv.Itoa(i))
	}
	refused := 0
	var p Permit
	for i := range probes {
		if c.Acquire(&p, "cold-"+strconv.Itoa(i)).Allowed {
			p.Done(Succeeded)
		} else {
			refused++
		}
	}
	return float64(refused) / float64(probes)
}

// TestKeyedConcurrencyRefusesFewColdKeys measures what the sketch costs:
// how often a key holding nothing is refused its first place, with as many
// keys in flight as the limiter was sized for, and twice as many. The
// rates are those KeyedConcurrency's doc gives.
func TestKeyedConcurrencyRefusesFewColdKeys(t *testing.T) {
	const sized, probes = 4096, 100000
	for _, tc := range []struct {
		limit int64
		load  int
		most  float64
	}{{1, 1, 0.02}, {1, 2, 0.05}, {2, 1, 0.001}, {2, 2, 0.002}} {
		rate := refusalRate(t, tc.limit, sized, tc.load*sized, probes)
		t.Logf("limit %d, %d× the keys sized for in flight: %.3f%% of cold keys refused", tc.limit, tc.load, 100*rate)
		if rate > tc.most {
			t.Errorf("limit %d, %d× the keys: %.3f%% of cold keys refused, expected at most %.1f%%", tc.limit, tc.load, 100*rate, 100*tc.most)
		}
	}
}

func TestKeyedConcurrencyPermitReleaseIsIdempotent(t *testing.T) {
	c := mustKeyedConcurrency(t, 2, map[string]int64{"vip": 2}, 0)
	for _, key := range []string{"k", "vip"} {
		var a, b Permit
		if !c.AcquireN(&a, key, 2).Allowed {
			t.Fatalf("%q: 2 of 2 refused", key)
		}
		if c.Acquire(&b, key).Allowed {
			t.Fatalf("%q: a third place of 2 allowed", key)
		}
		var wg sync.WaitGroup
		for range 8 { // racing releases of one permit release once
			wg.Add(1)
			go func() { defer wg.Done(); a.Done(Succeeded) }()
		}
		wg.Wait()
		b.Done(Succeeded) // never allowed
		var zero Permit
		zero.Done(Succeeded)
		if got := c.InFlight(key); got != 0 {
			t.Fatalf("%q: InFlight = %d after releasing a permit of 2 many times", key, got)
		}
		// A released Permit can be reused.
		if !c.Acquire(&a, key).Allowed || c.InFlight(key) != 1 {
			t.Fatalf("%q: reusing a released Permit failed", key)
		}
		a.Done(Succeeded)
		a.Done(Succeeded)
		if c.InFlight(key) != 0 {
			t.Fatalf("%q: a reused Permit released twice", key)
		}
	}
	if !c.keys.sketchIsEmpty() {
		t.Fatal("the sketch holds places after every release")
	}
}

func TestKeyedConcurrencyEdgeCases(t *testing.T) {
	c := mustKeyedConcurrency(t, 3, map[string]int64{"banned": 0, "vip": 10}, 0)
	var p Permit
	if d := c.AcquireN(nil, "k", 1); d.Reason != ExceedsLimit {
		t.Fatalf("a nil permit: %+v", d)
	}
	if d := c.AcquireN(&p, "k", 4); d.Reason != ExceedsLimit || d.RetryAfter != 0 {
		t.Fatalf("4 places of 3: %+v", d)
	}
	if d := c.AcquireN(&p, "k", 0); !d.Allowed || c.InFlight("k") != 0 {
		t.Fatal("0 places must be allowed and take nothing")
	}
	if d := c.AcquireN(&p, "k", -5); !d.Allowed || c.InFlight("k") != 0 {
		t.Fatal("negative places must be allowed and take nothing")
	}
	if d := c.Acquire(&p, "banned"); d.Reason != ExceedsLimit {
		t.Fatalf("an override of 0: %+v", d)
	}
	if d := c.AcquireN(&p, "vip", 10); !d.Allowed {
		t.Fatalf("10 places of an override of 10: %+v", d)
	}
	if c.InFlight("vip") != 10 || c.keys.limitOf("vip") != 10 || c.keys.limitOf("k") != 3 || c.keys.limitOf("banned") != 0 {
		t.Fatal("InFlight or LimitOf of the overrides")
	}
	p.Done(Succeeded)
	// Lowering the limit keeps the places held, which count against it.
	var a, b Permit
	c.AcquireN(&a, "k", 3)
	overrides := map[string]int64{"vip": 10, "banned": 0}
	if err := c.Set(2, overrides); err != nil || c.limitNow() != 2 || c.keys.limitOf("vip") != 10 {
		t.Fatalf("Set(2, the same overrides): %v, limit %d, vip's %d", err, c.limitNow(), c.keys.limitOf("vip"))
	}
	if c.AcquireN(&b, "k", 2).Allowed || c.InFlight("k") != 3 {
		t.Fatal("a key above a lowered limit must be refused, keeping its places")
	}
	a.Done(Succeeded)
	if !c.AcquireN(&b, "k", 2).Allowed {
		t.Fatal("after releasing, the lowered limit allows")
	}
	b.Done(Succeeded)
	if err := c.Set(-1, overrides); !errors.Is(err, config.ErrInvalid) || c.limitNow() != 2 {
		t.Fatalf("Set(-1) = %v, limit now %d", err, c.limitNow())
	}
	z := mustKeyedConcurrency(t, 0, nil, 0)
	if d := z.Acquire(&p, "k"); d.Reason != ExceedsLimit {
		t.Fatalf("limit 0: %+v", d)
	}
}

func TestKeyedConcurrencyConfigErrorsNameTheFieldAndValue(t *testing.T) {
	for _, tc := range []struct {
		limit     int64
		overrides map[string]int64
		keys      int
		option    string
		message   string
	}{
		{-1, nil, 0, "limit", "limit = -1: must be between 0 and 4294967295"},
		{maxLimit + 1, nil, 0, "limit", "limit = 4294967296"},
		{1, nil, -1, "keys", "keys = -1: must be between 0 and 262144"},
		{1, nil, flowlimits.MaxKeysInFlight + 1, "keys", "keys = 262145"},
		{1, map[string]int64{"ok": 1, "bad": -2}, 0, "overrides", `overrides = "bad": -2: must be between 0 and 4294967295`},
		{1, map[string]int64{"big": maxLimit + 1}, 0, "overrides", `overrides = "big": 4294967296`},
	} {
		_, err := NewConcurrency(ConcurrencySettings{PerKey: true, Limit: tc.limit, Overrides: tc.overrides, Keys: tc.keys})
		var ce *configError
		if !errors.As(err, &ce) || !errors.Is(err, config.ErrInvalid) || ce.Field != tc.option || !strings.Contains(err.Error(), tc.message) {
			t.Errorf("NewKeyedConcurrency(%d, %v, %d) = %v, want a ConfigError of %s saying %q", tc.limit, tc.overrides, tc.keys, err, tc.option, tc.message)
		}
	}
}

func TestKeyedConcurrencyAllocatesNothing(t *testing.T) {
	c := mustKeyedConcurrency(t, 10, map[string]int64{"vip": 5}, 0)
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	long := strings.Repeat("x", 4096)
	i := 0
	if a := testing.AllocsPerRun(10000, func() {
		var p, q, r Permit
		c.Acquire(&p, keys[i%len(keys)])
		c.Acquire(&q, "vip")
		c.Acquire(&r, long)
		c.InFlight(keys[i%len(keys)])
		p.Done(Succeeded)
		q.Done(Succeeded)
		r.Done(Succeeded)
		i++
	}); a != 0 {
		t.Fatalf("acquiring and releasing allocate %v times", a)
	}
}

// TestKeyedConcurrencyMemoryIsFixedWhateverTheKeys: a flood of distinct
// keys, each holding a place, grows nothing; the keys with overrides keep
// their whole limits through it; Bytes says what the limiter takes; and the
// sketch's blocks are cache lines.
func TestKeyedConcurrencyMemoryIsFixedWhateverTheKeys(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := mustKeyedConcurrency(t, 1, map[string]int64{"vip": 3}, 1<<14)
	runtime.GC()
	runtime.ReadMemStats(&after)
	made := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if b := int64(c.keys.bytes()); made > b+b/20 || made < b-b/20 {
		t.Fatalf("the limiter took %d bytes of heap, Bytes says %d", made, b)
	}
	if addr := uintptr(unsafe.Pointer(&c.keys.cells[0])); addr%64 != 0 {
		t.Fatalf("the sketch starts at %#x, not on a cache line", addr)
	}
	bytes := c.keys.bytes()
	ps := make([]Permit, 100000)
	keys := make([]string, len(ps))
	for i := range keys {
		keys[i] = "flood-" + strconv.Itoa(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&before)
	allowedN := 0
	for i := range ps {
		if c.Acquire(&ps[i], keys[i]).Allowed {
			allowedN++
		}
	}
	runtime.ReadMemStats(&after)
	// TotalAlloc counts the whole process (the runtime, the testing
	// package): a few bytes are theirs; one allocation per key would be
	// megabytes.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4096 || c.keys.bytes() != bytes {
		t.Fatalf("%d keys allocated %d bytes; Bytes went from %d to %d", len(ps), grew, bytes, c.keys.bytes())
	}
	var vip [3]Permit
	for i := range vip {
		if !c.Acquire(&vip[i], "vip").Allowed {
			t.Fatalf("the override's place %d refused while the sketch is flooded", i+1)
		}
	}
	t.Logf("a flood of %d keys in a sketch sized for %d: %d allowed", len(ps), 1<<14, allowedN)
	for i := range ps {
		ps[i].Done(Succeeded)
	}
	if !c.keys.sketchIsEmpty() {
		t.Fatal("the sketch holds places after the flood was released")
	}
}

// TestKeyedConcurrencyOverridesAreMatchedWhole: a key that only resembles
// an override's (a prefix, a suffix, a NUL, another case) gets the default
// limit, and an override's key longer than any sane one still works.
func TestKeyedConcurrencyOverridesAreMatchedWhole(t *testing.T) {
	long := strings.Repeat("k", 1<<16)
	c := mustKeyedConcurrency(t, 1, map[string]int64{"vip": 100, long: 7}, 0)
	for _, key := range hostileKeys() {
		if got := c.keys.limitOf(key); got != 1 {
			t.Errorf("LimitOf(%.20q) = %d, want the default 1", key, got)
		}
	}
	if c.keys.limitOf(long) != 7 || c.keys.limitOf(long[1:]) != 1 {
		t.Fatal("a long override's key must be matched whole")
	}
	// A key whose hash equals an override's (one chance in 2^64, forced
	// here) is still not taken for it.
	pins := c.keys.limits.Load().pins
	pins.index[maphash.String(c.keys.seed, "impostor")] = pins.index[maphash.String(c.keys.seed, "vip")]
	var p Permit
	if c.keys.limitOf("impostor") != 1 || !c.Acquire(&p, "impostor").Allowed || c.InFlight("vip") != 0 {
		t.Fatal("a key sharing an override's hash was taken for it")
	}
}

// Two requests in flight per user, five for one of them.
func ExampleConcurrency_perKey() {
	limiter, err := NewConcurrency(ConcurrencySettings{PerKey: true, Limit: 2, Overrides: map[string]int64{"batch-job": 5}})
	if err != nil {
		panic(err)
	}
	var first, second, third Permit
	fmt.Println(limiter.Acquire(&first, "alice").Allowed)
	fmt.Println(limiter.Acquire(&second, "alice").Allowed)
	fmt.Println(limiter.Acquire(&third, "alice").Reason)
	fmt.Println(limiter.AcquireN(&third, "batch-job", 5).Allowed)
	first.Done(Succeeded) // when alice's first request is done
	fmt.Println(limiter.InFlight("alice"))
	// Output:
	// true
	// true
	// concurrency limited
	// true
	// 1
}
