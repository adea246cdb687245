package window

import (
	"math/rand/v2"
	"testing"
	"time"
)

// recordTheLongWay is RecordBatchAt as it was before its fast path was
// written out: count, then raise. The test below holds the two to the same
// counts, maxima and reports.
func (k *Sketch) recordTheLongWay(now int64, d time.Duration, n int64) bool {
	st := k.pick()
	b := k.grid.Index(now)
	h := int(b & 1)
	ns := max(int64(d), 0)
	var word = &st.over[h]
	if ns >= int64(sketchRange) {
		st.overTotal.Add(uint64(max(n, 1)))
	} else {
		c, j := sketchBin(ns)
		p := st.chunk(c)
		word = &p[h*sketchSub+j]
		p[sketchTotal+j].Add(uint64(max(n, 1)))
	}
	if !k.count(st, b, word) {
		return false
	}
	return k.raise(st, b, kindMax.clamp(ns))
}

// TestASketchRecordsAsItDidTheLongWay records the same random latencies,
// at random times (the same half, the next, one left behind, one a whole
// interval late), in two Sketches, one through RecordBatchAt and one the
// long way: every read and every report must agree.
func TestASketchRecordsAsItDidTheLongWay(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 5))
	fast, clk := newTestSketch(t, 10*time.Second)
	slow, _ := newTestSketch(t, 10*time.Second)
	now := clk.Now()
	for i := range 20000 {
		now += rng.Int64N(int64(300 * time.Millisecond))
		at := now
		if rng.IntN(10) == 0 {
			at -= rng.Int64N(int64(12 * time.Second)) // sometimes too late for its half
		}
		d := time.Duration(rng.Int64N(1 << uint(rng.IntN(40))))
		if rng.IntN(100) == 0 {
			d = sketchRange + time.Duration(rng.Int64N(1000)) // beyond the bins
		}
		n := rng.Int64N(3)
		if got, want := fast.RecordBatchAt(at, d, n), slow.recordTheLongWay(at, d, n); got != want {
			t.Fatalf("step %d: RecordBatchAt reported %v, the long way %v", i, got, want)
		}
		var a, b sketchCounts
		fast.merge(now, &a)
		slow.merge(now, &b)
		if a != b {
			t.Fatalf("step %d: the halves read %+v, the long way %+v", i, a, b)
		}
		var ta, tb SketchTotals
		fast.TotalsInto(&ta)
		slow.TotalsInto(&tb)
		if ta != tb {
			t.Fatalf("step %d: the totals read %+v, the long way %+v", i, ta, tb)
		}
	}
}

// TestASketchCountsInAChunkItsResetMissed makes the one case the fast path
// must not take: a chunk allocated while its half was being reset keeps the
// words of an earlier bucket, all zero, while the half holds the current
// one. A latency counted there must count for the current bucket.
func TestASketchCountsInAChunkItsResetMissed(t *testing.T) {
	k, clk := newTestSketch(t, 10*time.Second)
	now := clk.Now()
	k.RecordAt(now, time.Microsecond) // the half now holds now's bucket
	b := k.grid.Index(now)
	d := 3 * time.Millisecond
	c, _ := sketchBin(int64(d))
	if k.base.chunks[c].Load() != nil {
		t.Fatal("the chunk of 3 ms is there already")
	}
	p := new(sketchChunk)
	for j := range p[:2*sketchSub] {
		p[j].Store(pack(b-2, 0)) // as a reset in progress for an earlier bucket would leave it
	}
	k.base.chunks[c].Store(p)
	if !k.RecordAt(now, d) {
		t.Fatal("RecordAt reported false")
	}
	if got := k.SummaryAt(now); got.Count != 2 || got.Max != d {
		t.Fatalf("read %+v, want 2 latencies and the maximum %v", got, d)
	}
}
