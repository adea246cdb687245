package flow

import (
	"runtime"
	"testing"
	"time"
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
	per := heapPerQPS(t, 4000, func() *QPS { return mustQPS(t, 100, time.Second) })
	t.Logf("%.0f B per limiter", per)
	if per > 640 {
		t.Fatalf("a QPS limiter with %d buckets takes %.0f B of heap, want at most 640", DefaultBuckets, per)
	}
}
