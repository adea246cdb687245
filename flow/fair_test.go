package flow

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A key that filled the limit alone gets no more once others come; the
// others get their shares over the limit; nobody below their share is
// refused.
func TestFairShareKeepsEachKeysShare(t *testing.T) {
	f := newFairShare()
	const limit = 12
	held := map[string][]uint8{}
	now := int64(0)
	take := func(key string) bool {
		now += recount // requests a millisecond apart, each with a fresh count of the busy lanes
		p := f.pick(key)
		if !f.admit(now, limit, p) {
			return false
		}
		held[key] = append(held[key], p.lane)
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
				t.Fatalf("%s refused its request %d with %d in flight: below its share", key, i+1, f.inflight.Load())
			}
		}
	}
	if take("slow") {
		t.Fatal("the key over its share was admitted at the limit")
	}
	if got := f.inflight.Load(); got > 2*limit {
		t.Fatalf("%d in flight, above twice the limit", got)
	}
	// The slow key's requests end: while in flight stays at the limit, it
	// gets none back.
	for _, lane := range held["slow"][:4] {
		f.leave(lane)
	}
	held["slow"] = held["slow"][4:]
	if f.inflight.Load() != limit {
		t.Fatalf("%d in flight, want the limit", f.inflight.Load())
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
		limit := 1 + rng.Int64N(100)
		var lanes []uint8
		for i := range 20000 {
			if len(lanes) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(lanes))
				f.leave(lanes[i])
				lanes[i] = lanes[len(lanes)-1]
				lanes = lanes[:len(lanes)-1]
				continue
			}
			key := fmt.Sprint(rng.IntN(1 + rng.IntN(300)))
			p := f.pick(key)
			if f.admit(int64(i)*int64(time.Millisecond), limit, p) {
				lanes = append(lanes, p.lane)
			}
			if got := f.inflight.Load(); got > 2*limit {
				t.Fatalf("seed %d, limit %d: %d in flight", seed, limit, got)
			}
		}
		for _, l := range lanes {
			f.leave(l)
		}
		busy := false
		for i := range f.lanes {
			busy = busy || f.lanes[i].Load() != 0
		}
		if f.inflight.Load() != 0 || busy {
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
