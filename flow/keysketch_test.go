package flow

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/timegrid"
)

// refSlots is where a key of hash h has its counters, written the plain
// way: three distinct pairs of its block, each pair's bit offset split in
// a word and an offset in it.
func refSlots(k *keySketch, h uint64) (words [sketchProbes]int, offs [sketchProbes]uint) {
	base := int(h&k.mask) * blockWords
	pairs := uint64(256) >> k.shift
	x := h >> 20
	a := x % pairs
	d := (x>>6)%pairs | 1
	f := (x >> 12) % pairs &^ 1
	if f == 0 {
		f = 2
	}
	for i, p := range []uint64{a, a ^ d, a ^ f} {
		bit := p * 2 << k.shift
		words[i], offs[i] = base+int(bit/64), uint(bit%64)
	}
	return words, offs
}

// refEstimate is the key's least counter in each generation, previous and
// current, read counter by counter.
func refEstimate(k *keySketch, h uint64) [2]int64 {
	words, offs := refSlots(k, h)
	w := uint(1) << k.shift
	est := [2]int64{-1, -1}
	for i := range words {
		for g, at := range [2]uint{offs[i] + w*uint(1-k.gen&1), offs[i] + w*uint(k.gen&1)} {
			c := int64(k.cells[words[i]] >> at & (1<<w - 1))
			if est[g] < 0 || c < est[g] {
				est[g] = c
			}
		}
	}
	return est
}

func TestASketchKeepsEachKeysCountersWhereThePlainFormulaPutsThem(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int64{10, 100, 1000, 100000} {
		k := newKeySketch(limit)
		for range 6 {
			k = k.grown()
		}
		for i := range k.cells {
			k.cells[i] = r.Uint64()
		}
		for range 20000 {
			h := r.Uint64()
			k.gen = r.Uint64N(8)
			sl := k.slots(h)
			words, offs := refSlots(&k, h)
			for i := range sketchProbes {
				if int(sl.words[i]) != words[i] || uint(sl.offs[i]) != offs[i] {
					t.Fatalf("limit %d, hash %#x, probe %d: word %d offset %d, want %d %d", limit, h, i, sl.words[i], sl.offs[i], words[i], offs[i])
				}
			}
			var looked keySlots
			if got, want := k.look(h, &looked), refEstimate(&k, h); got != want || looked != sl {
				t.Fatalf("limit %d, hash %#x, generation %d: look %v at %+v, want %v at %+v", limit, h, k.gen, got, looked, want, sl)
			}
			v := int64(r.Uint64N(k.top() + 3))
			g := k.gen - r.Uint64N(2)
			before := refEstimate(&k, h)
			k.raise(&sl, g, v)
			after := refEstimate(&k, h)
			at := 1 - int(k.gen-g)
			want := before
			want[at] = max(before[at], min(v, int64(k.top())))
			if after != want {
				t.Fatalf("limit %d, hash %#x: raise of generation %d to %d made %v of %v, want %v", limit, h, g, v, after, before, want)
			}
		}
	}
}

// A sketch that remembers the bucket of its last decision answers as one
// that finds every bucket anew, whatever the times it is given: later,
// earlier, in other generations, out of the clock's range.
func TestASketchFindsItsLastBucketAsADivisionWould(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, iv := range []time.Duration{time.Second, time.Hour, 7 * time.Millisecond} {
		w := keyWindow{limit: 10, k: 20, grid: alignedGrid(iv, 20), interval: iv}
		fast, slow := newKeySketch(10), newKeySketch(10)
		now := int64(0)
		for i := range 200000 {
			switch r.IntN(100) {
			case 0:
				now += int64(iv) * int64(r.IntN(3)) // generations on
			case 1:
				now -= int64(r.IntN(int(iv))) // a caller's earlier time
			case 2:
				now = timegrid.MaxTime + int64(r.IntN(1000)) - 500 // the clock's edge
			case 3:
				now = -timegrid.MaxTime - int64(r.IntN(1000)) + 500
			case 4:
				now = 0
			default:
				now += r.Int64N(int64(iv) / 200)
			}
			slow.forget()
			bf, qf := fast.advance(&w, now)
			bs, qs := slow.advance(&w, now)
			if bf != bs || qf != qs || fast.gen != slow.gen {
				t.Fatalf("interval %v, step %d, time %d: bucket %d, quiet %v, generation %d; found anew: %d, %v, %d", iv, i, now, bf, qf, fast.gen, bs, qs, slow.gen)
			}
			h := r.Uint64()
			var sf, ss keySlots
			ef, es := fast.look(h, &sf), slow.look(h, &ss)
			fast.raise(&sf, fast.gen, 1+ef[1])
			slow.raise(&ss, slow.gen, 1+es[1])
		}
		for i := range fast.cells {
			if fast.cells[i] != slow.cells[i] {
				t.Fatalf("interval %v: cell %d is %#x, found anew %#x", iv, i, fast.cells[i], slow.cells[i])
			}
		}
	}
}
