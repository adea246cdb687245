package flow

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A key that filled the limit alone gets no more once others come; the
// others get their shares over the limit; nobody below their share is
// refused.
func TestFairShareKeepsEachKeysShare(t *testing.T) {
	for _, stripes := range []bool{false, true} {
		t.Run(fmt.Sprint("striped=", stripes), func(t *testing.T) { testFairShareKeepsEachKeysShare(t, stripes) })
	}
}

// stripedShare makes f's counts per processor, as contention would.
func stripedShare(f *fairShare) *fairShare {
	f.pool.grow()
	f.grow()
	return f
}

func testFairShareKeepsEachKeysShare(t *testing.T, stripes bool) {
	f := newFairShare()
	if stripes {
		stripedShare(f)
	}
	const limit = 12
	held := map[string][]pick{}
	now := int64(0)
	take := func(key string) bool {
		now += recount // requests a millisecond apart, each with a fresh count of the busy lanes
		p := f.pick(key)
		if !f.admit(now, limit, &p) {
			return false
		}
		held[key] = append(held[key], p)
		return true
	}
	for range limit {
		if !take("slow") {
			t.Fatal("a key alone was refused below the limit")
		}
	}
	if take("slow") {
		t.Fatal("a key alone was admitted over the limit")
	}
	// Two more keys, in lanes of their own (a key whose two lanes are both
	// the slow key's shares its fate: one chance in 2,016), then three
	// busy keys in at most six lanes: each new key gets at least ⌈12/6⌉ = 2.
	for _, key := range apart(f, 2, "slow") {
		for i := range 2 {
			if !take(key) {
				t.Fatalf("%s refused its request %d with %d in flight: below its share", key, i+1, f.inFlight())
			}
		}
	}
	if take("slow") {
		t.Fatal("the key over its share was admitted at the limit")
	}
	if got := f.inFlight(); got > 2*limit {
		t.Fatalf("%d in flight, above twice the limit", got)
	}
	// The slow key's requests end: while in flight stays at the limit, it
	// gets none back.
	for _, p := range held["slow"][:4] {
		f.leave(p.lane, p.cell)
	}
	held["slow"] = held["slow"][4:]
	if f.inFlight() != limit {
		t.Fatalf("%d in flight, want the limit", f.inFlight())
	}
	if take("slow") {
		t.Fatal("the key over its share was admitted at the limit after some of its requests ended")
	}
}

// However keys come and go, in flight never goes past the limit plus one
// share per lane, and a key alone in its lanes is never refused while it
// holds less than its share.
func TestFairShareBoundsWhatGoesOverTheLimit(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		f := newFairShare()
		if seed%2 == 1 {
			stripedShare(f)
		}
		limit := 1 + rng.Int64N(100)
		var lanes []pick
		for i := range 20000 {
			if len(lanes) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(lanes))
				f.leave(lanes[i].lane, lanes[i].cell)
				lanes[i] = lanes[len(lanes)-1]
				lanes = lanes[:len(lanes)-1]
				continue
			}
			key := fmt.Sprint(rng.IntN(1 + rng.IntN(300)))
			p := f.pick(key)
			if f.admit(int64(i)*int64(time.Millisecond), limit, &p) {
				lanes = append(lanes, p)
			}
			if got := f.inFlight(); got > 2*limit || got != int64(len(lanes)) {
				t.Fatalf("seed %d, limit %d: %d in flight, %d admitted", seed, limit, got, len(lanes))
			}
		}
		for _, l := range lanes {
			f.leave(l.lane, l.cell)
		}
		busy := false
		for i := range uint8(fairLanes) {
			busy = busy || f.laneHeld(i) != 0
		}
		if f.inFlight() != 0 || busy {
			t.Fatalf("seed %d: counts left after every request ended", seed)
		}
	}
}

// The mean of a window leaves out the response times over four times its
// median, and is the exact mean when there are none.
func TestRTBinsMeanLeavesOutOutliers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var b rtBins
	for trial := range 200 {
		n := 1 + rng.IntN(500)
		rts := make([]int64, n)
		for i := range rts {
			rts[i] = int64(time.Millisecond) + rng.Int64N(int64(time.Millisecond))
			if rng.IntN(20) == 0 { // 5% a hundred times slower
				rts[i] *= 100
			}
			b.add(rts[i])
		}
		sorted := slices.Sorted(slices.Values(rts))
		med := sorted[(n+1)/2-1]
		var sum, kept int64
		outliers := false
		for _, rt := range rts {
			if rt > 4*med {
				outliers = true
				continue
			}
			sum += rt
			kept++
		}
		want := sum / kept
		got, mean := b.take()
		if got != int64(n) {
			t.Fatalf("trial %d: %d samples taken, want %d", trial, got, n)
		}
		if !outliers && mean != want {
			t.Fatalf("trial %d: mean %v without outliers, want the exact %v", trial, time.Duration(mean), time.Duration(want))
		}
		if d := float64(mean - want); d > 0.0443*float64(want) || -d > 0.0443*float64(want) {
			t.Fatalf("trial %d: mean %v, want %v", trial, time.Duration(mean), time.Duration(want))
		}
		if b.count.Load() != 0 || b.sum.Load() != 0 {
			t.Fatalf("trial %d: left after take", trial)
		}
	}
}

// apart returns n keys whose lanes are not those of the given keys, nor
// each other's.
func apart(f *fairShare, n int, keys ...string) []string {
	used := map[uint8]bool{}
	for _, k := range keys {
		a, b := f.lanesOf(k)
		used[a], used[b] = true, true
	}
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprint("key-", i)
		if a, b := f.lanesOf(k); !used[a] && !used[b] {
			used[a], used[b] = true, true
			out = append(out, k)
		}
	}
	return out
}

// TestAFairShareUnderContentionKeepsItsBounds admits requests from many
// goroutines on every processor, through an adaptive limit held at 6 (its
// counts per processor or not): with
// one key, never more than the limit inside at once (a key alone gets no
// share past it); with many, never more than twice the limit.
func TestAFairShareUnderContentionKeepsItsBounds(t *testing.T) {
	for i, keys := range []int{1, 5, 1, 5} {
		const limit = 6
		a, err := NewAdaptive(AdaptiveSettings{InitialLimit: limit, MinLimit: limit, MaxLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if i >= 2 { // with the counts per processor, as contention on enough processors makes them
			stripedShare(a.fair)
		}
		var inside, worst, allowed atomic.Int64
		var wg sync.WaitGroup
		for g := range 4 * runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprint("key-", g%keys)
				for i := range 3000 {
					var p Permit
					if !a.Acquire(&p, key).Allowed {
						runtime.Gosched()
						continue
					}
					allowed.Add(1)
					now := inside.Add(1)
					worst.Store(max(worst.Load(), now))
					if i%3 == 0 {
						runtime.Gosched()
					}
					inside.Add(-1)
					p.Done(Succeeded)
				}
			}()
		}
		wg.Wait()
		bound := int64(2 * limit)
		if keys == 1 {
			bound = limit
		}
		if w := worst.Load(); w > bound || allowed.Load() == 0 {
			t.Fatalf("%d keys: %d inside at once (bound %d), %d allowed", keys, w, bound, allowed.Load())
		}
		if got := a.fair.inFlight(); got != 0 {
			t.Fatalf("%d keys: %d in flight after every request ended", keys, got)
		}
		for l := range uint8(fairLanes) {
			if n := a.fair.laneHeld(l); n != 0 {
				t.Fatalf("%d keys: lane %d holds %d after every request ended", keys, l, n)
			}
		}
	}
}
