package flow

import (
	"runtime"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/stripe"
)

// heapPerQPS returns the heap, in bytes, that each of n limiters made by
// newQ holds once made.
func heapPerQPS(t *testing.T, n int, newQ func() *QPS) float64 {
	t.Helper()
	qs := make([]*QPS, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range qs {
		qs[i] = newQ()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(qs)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// TestQPSTakesAtMost640BytesOfHeap: a limiter without warm-up or borrowing
// takes at most 640 B with the default buckets, so that a resource with a
// QPS rule and a breaker fits in 3 KB.
func TestQPSTakesAtMost640BytesOfHeap(t *testing.T) {
	per := heapPerQPS(t, 4000, func() *QPS { return mustQPS(t, QPSSettings{Limit: 100, Interval: time.Second}) })
	t.Logf("%.0f B per limiter", per)
	if per > 640 {
		t.Fatalf("a QPS limiter with %d buckets takes %.0f B of heap, want at most 640", flowlimits.DefaultBuckets, per)
	}
}

// TestQPSBorrowingAndStripingCostWhatTheDocumentationSays: borrowing adds
// no memory; striping adds its cells, 64 bytes each, and their index.
func TestQPSBorrowingAndStripingCostWhatTheDocumentationSays(t *testing.T) {
	c := clock.NewManual(0)
	plain := heapPerQPS(t, 4000, func() *QPS { return mustQPS(t, QPSSettings{Limit: 100, Interval: time.Second, Clock: c}) })
	borrowing := heapPerQPS(t, 4000, func() *QPS {
		q := mustQPS(t, QPSSettings{Limit: 100, Interval: time.Second, Clock: c})
		q.AllowN(100)
		if d := q.AllowPriorityN(1, time.Second); d.Allowed {
			t.Fatalf("test setup: borrowed from an empty leaving bucket: %+v", d)
		}
		return q
	})
	if borrowing > plain+16 {
		t.Errorf("a limiter that was asked to borrow takes %.0f B, one that was not %.0f B", borrowing, plain)
	}
	cells := float64(stripe.Count())
	stripedHeap := heapPerQPS(t, 1000, func() *QPS {
		q := mustQPS(t, QPSSettings{Limit: 100, Interval: time.Second, Clock: c})
		q.stripe()
		return q
	})
	if extra := stripedHeap - plain; extra < 64*cells || extra > 64*cells+64 {
		t.Errorf("striping adds %.0f B for %v cells, want 64 per cell and at most 64 more", extra, cells)
	}
	t.Logf("plain %.0f B, asked to borrow %.0f B, striped (%v cells) %.0f B", plain, borrowing, cells, stripedHeap)
}
