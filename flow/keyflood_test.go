package flow

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// floodScale is the tests' flood: keys per interval, and the budget that
// gives the sketch as many bytes per key as flowlimits.DefaultKeyMemory gives ten
// million. BenchmarkKeyedQPSFlood runs the ten million themselves.
func floodScale() (keys int, mem int64) {
	keys = 1_000_000
	if testing.Short() || raceEnabled {
		keys = 250_000
	}
	return keys, flowlimits.DefaultKeyMemory * int64(keys) / 10_000_000
}

// TestAFloodOfDistinctKeysRefusesFewKeysWithinHalfTheirLimit: a flood of
// distinct keys per interval, each at 40% of its limit of 10 per second,
// as many per byte of budget as ten million in flowlimits.DefaultKeyMemory, refuses
// under 0.1% of their requests in the interval after the first.
func TestAFloodOfDistinctKeysRefusesFewKeysWithinHalfTheirLimit(t *testing.T) {
	keys, budget := floodScale()
	f := flood(t, keys, 4, func() *KeyedQPS {
		mem, _ := NewKeyMemory(budget)
		q, err := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{{Limit: 10, Interval: time.Second}}, Clock: clock.NewManual(0), KeyMemory: mem})
		if err != nil {
			t.Fatal(err)
		}
		return q
	})
	second, third := f.rate()
	t.Logf("%d keys × 4 in an interval, %.1f MiB budget: refused %.4f%% in the second interval, %.4f%% in the third; %.1f MiB held", keys, float64(budget)/(1<<20), 100*second, 100*third, float64(f.bytes)/(1<<20))
	if second >= 0.001 || third >= 0.001 {
		t.Errorf("keys at 40%% of their limit refused %.4f%% and %.4f%% of the time, want under 0.1%%", 100*second, 100*third)
	}
	if f.bytes < int(budget)*3/4 {
		t.Errorf("the limiter holds %d bytes of its %d: the flood did not fill the budget, the test tests nothing", f.bytes, budget)
	}
}

// TestKeyedQPSHeapIsWhatItsBudgetAllows: however many distinct keys come,
// a KeyedQPS holds at most its budget and its floor, and the heap it takes
// is what Bytes says, within 2% and 64 KiB.
func TestKeyedQPSHeapIsWhatItsBudgetAllows(t *testing.T) {
	keys, budget := floodScale()
	keys *= 2 // twice the keys the budget is for
	var mem *KeyMemory
	f := flood(t, keys, 1, func() *KeyedQPS {
		mem, _ = NewKeyMemory(budget)
		q, err := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{{Limit: 10, Interval: time.Second}}, Clock: clock.NewManual(0), KeyMemory: mem})
		if err != nil {
			t.Fatal(err)
		}
		return q
	})
	floor := int64(keyShardBytes + keyShards*(sketchBytes(minSketchBlocks)+(&keyConfig{wins: make([]keyWindow, 1), stride: flowlimits.DefaultKeyBuckets + 1}).entriesBytes(floorRoom)))
	t.Logf("%d keys: %.2f MiB held (the budget %.2f MiB, the floor %.2f MiB), heap %.2f MiB", keys, float64(f.bytes)/(1<<20), float64(budget)/(1<<20), float64(floor)/(1<<20), float64(f.heap)/(1<<20))
	if int64(f.bytes) > budget+floor || mem.inUse() != int64(f.bytes) {
		t.Errorf("the limiter holds %d bytes (its budget says %d), above its budget %d and its floor %d", f.bytes, mem.inUse(), budget, floor)
	}
	if d := f.heap - int64(f.bytes); d > int64(f.bytes)/50+64<<10 || -d > int64(f.bytes)/50+64<<10 {
		t.Errorf("the heap grew by %d bytes, the limiter says it holds %d", f.heap, f.bytes)
	}
}

// TestKeyMemoryIsGivenBackWhenItsLimitersAreGone: the bytes limiters drew
// from a shared budget go back to it once they are collected.
func TestKeyMemoryIsGivenBackWhenItsLimitersAreGone(t *testing.T) {
	mem, _ := NewKeyMemory(8 << 20)
	func() {
		q, err := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{{Limit: 10, Interval: time.Second}}, KeyMemory: mem, Clock: clock.NewManual(0)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100_000 {
			q.AllowNAt(int64(i), "k"+string(rune(i)), 1)
		}
		c, err := NewConcurrency(ConcurrencySettings{PerKey: true, Limit: 10, KeyMemory: mem})
		if err != nil {
			t.Fatal(err)
		}
		th, err := NewThrottle(ThrottleSettings{PerKey: true, Limit: 10, Interval: time.Second, MaxWait: 0, KeyMemory: mem})
		if err != nil {
			t.Fatal(err)
		}
		if mem.inUse() < int64(q.bytes()+c.keys.bytes()/2+th.keys.bytes()/2) {
			t.Fatalf("the budget says %d bytes in use, the limiters hold more", mem.inUse())
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for mem.inUse() != 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := mem.inUse(); n != 0 {
		t.Fatalf("%d bytes still in use once the limiters are gone", n)
	}
}

// TestKeyedConcurrencyAndThrottleTakeWhatTheBudgetHas: a keyed limiter of
// fixed size takes at most a sixteenth of a budget, and its floor when
// the budget is spent.
func TestKeyedConcurrencyAndThrottleTakeWhatTheBudgetHas(t *testing.T) {
	mem, _ := NewKeyMemory(1 << 20)
	c, _ := NewConcurrency(ConcurrencySettings{PerKey: true, Limit: 10, KeyMemory: mem}) // wants 1 MiB
	if b := len(c.keys.cells) * 8; b != 64<<10 {
		t.Errorf("a keyed concurrency limit took %d bytes of a budget of 1 MiB, want 64 KiB", b)
	}
	none, _ := NewKeyMemory(0)
	th, _ := NewThrottle(ThrottleSettings{PerKey: true, Limit: 10, Interval: time.Second, MaxWait: 0, KeyMemory: none})
	if b := len(th.keys.blocks) * keyBlockBytes; b != minKeyBlocks*keyBlockBytes || none.inUse() != int64(b) {
		t.Errorf("a keyed throttle took %d bytes of a budget of 0 (which says %d), want its floor %d", b, none.inUse(), minKeyBlocks*keyBlockBytes)
	}
}

// TestKeyedQPSCountsTheSizesItHas: the sizes the accounting uses are the
// types' own.
func TestKeyedQPSCountsTheSizesItHas(t *testing.T) {
	if s := unsafe.Sizeof(hotKey{}); s != hotKeyBytes {
		t.Errorf("a hotKey takes %d bytes, the accounting says %d", s, hotKeyBytes)
	}
	if s := unsafe.Sizeof(hotWindow{}); s != hotWindowBytes {
		t.Errorf("a hotWindow takes %d bytes, the accounting says %d", s, hotWindowBytes)
	}
	if s := unsafe.Sizeof(KeyedQPS{}); s > keyShardBytes {
		t.Errorf("a KeyedQPS takes %d bytes, the accounting says %d", s, keyShardBytes)
	}
}

// TestKeyCountEstimatesDistinctKeys: the count of a generation's keys is
// within 20% of their number (three standard errors), and keys that come
// back are not counted again. The keys' hashes are fixed (a fixed mix of
// ten seeds), not maphash's random seed: three standard errors are missed
// once in some 300 draws, and a test must not fail by chance.
func TestKeyCountEstimatesDistinctKeys(t *testing.T) {
	mix := func(x uint64) uint64 { // splitmix64's finalizer
		x += 0x9E3779B97F4A7C15
		x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
		x = (x ^ x>>27) * 0x94D049BB133111EB
		return x ^ x>>31
	}
	for seed := range uint64(10) {
		for _, n := range []int{10, 1000, 100_000} {
			c := newKeyCount()
			for range 3 {
				for i := range n {
					c.add(mix(seed<<32 | uint64(i)))
				}
			}
			if e := c.estimate(); e < 0.8*float64(n) || e > 1.2*float64(n) {
				t.Errorf("seed %d: %d keys, each three times, estimated %.0f", seed, n, e)
			}
		}
	}
}

// TestKeyIndexFindsWhatItHoldsAfterRemovals: an index that keys come into
// and go from, as entries change hands, finds every key it holds and none
// it does not, whatever the runs its removals moved, and keys whose hashes
// share their top half are told apart.
func TestKeyIndexFindsWhatItHoldsAfterRemovals(t *testing.T) {
	const n = 64
	x := newKeyIndex(n)
	hot := make([]hotKey, n) // entry e holds hash hot[e].hash while used
	used := map[uint64]int32{}
	free := make([]int32, n)
	for e := range free {
		free[e] = int32(e)
	}
	r := uint64(1)
	for i := range 20000 {
		r = r*6364136223846793005 + 1442695040888963407
		// Few distinct hashes, in long runs, in two halves: the top half
		// of a hash is one of two.
		h := r>>7&0xFF | r>>20&1<<32
		if e, ok := used[h]; ok && i%3 != 0 {
			x.remove(h, e, hot)
			delete(used, h)
			free = append(free, e)
		} else if !ok && len(free) > 0 {
			e := free[len(free)-1]
			free = free[:len(free)-1]
			hot[e].hash = h
			x.put(h, e, hot)
			used[h] = e
		}
		for k := range uint64(512) {
			k = k&0xFF | k>>8<<32
			e, ok := x.find(k, hot)
			if want, held := used[k]; ok != held || ok && e != want {
				t.Fatalf("step %d: find(%#x) = %d, %v; want %d, %v", i, k, e, ok, want, held)
			}
		}
	}
}
