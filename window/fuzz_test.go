package window

// Fuzz tests: the index and alignment arithmetic of the ring for any shape and
// any time, and the reference-model harnesses of model_test.go driven by a
// byte string, so that `go test -fuzz` can look for operation sequences the
// random tests miss. Plain `go test` runs the seeds.

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/timegrid"
)

// ---- Index and alignment arithmetic ----

// fzWidth maps raw to a valid bucket width for n buckets: near minWidth,
// near the largest width (maxTime/n), a power of two, raw>>3 itself (so that
// seeds can name a width), or spread over every scale.
func fzWidth(n int, raw uint64) int64 {
	lo, hi := int64(minWidth), int64(maxTime)/int64(n)
	var w int64
	switch raw % 8 {
	case 0:
		w = lo + int64(raw>>3%1000)
	case 1:
		w = hi - int64(raw>>3%1000)
	case 2:
		w = 1 << (10 + raw>>3%51)
	case 3:
		w = int64(raw >> 3 & (1<<61 - 1))
	default:
		nbits := raw >> 3 % 61
		w = lo + int64(raw>>9&(1<<nbits-1))
	}
	if w < lo || w > hi {
		w = lo + int64(uint64(w)%uint64(hi-lo+1))
	}
	return w
}

// fzCheckBucketArithmetic checks, for the ring r and any time x, what the rest
// of the package relies on: bucket starts are multiples of the width on the
// clock and the bucket of x starts at the largest one not after clamp(x);
// indexes are above n (so a read n buckets back never reaches index 0, the
// state of a slot never written) and small enough that the state word b<<1|1
// and startOf's product do not overflow; consecutive buckets are in
// consecutive slots modulo the number of slots.
func fzCheckBucketArithmetic(t *testing.T, r *ring, x int64) {
	t.Helper()
	w, n := r.width, r.n
	shape := fmt.Sprintf("%d buckets of %dns", n, w)
	ct := refClampTime(x)
	b := r.bucketOf(x)
	if b != r.bucketOf(ct) {
		t.Fatalf("%s: bucketOf(%d) = %d, but bucketOf(clamp = %d) = %d", shape, x, b, ct, r.bucketOf(ct))
	}
	if b <= uint64(n) {
		t.Fatalf("%s: bucketOf(%d) = %d, not above n", shape, x, b)
	}
	if b > math.MaxUint64>>2 {
		t.Fatalf("%s: bucketOf(%d) = %d: the state word b<<1|1 would overflow", shape, x, b)
	}
	if hi, lo := bits.Mul64(b, uint64(w)); hi != 0 || lo > math.MaxInt64 {
		t.Fatalf("%s: bucketOf(%d) = %d: b*width overflows in startOf", shape, x, b)
	}
	if r.grid.Offset%w != 0 {
		t.Fatalf("%s: offset %d is not a multiple of the width", shape, r.grid.Offset)
	}
	if r.grid.Offset > 4*maxTime {
		t.Fatalf("%s: offset %d is above 4*maxTime: a time plus the offset may reach 2^63, beyond the divisor's range", shape, r.grid.Offset)
	}
	if want := refFloorDiv(ct, w) + r.grid.Offset/w; int64(b) != want {
		t.Fatalf("%s: bucketOf(%d) = %d, want floor(%d/w) + offset/w = %d", shape, x, b, ct, want)
	}
	start := r.startOf(b)
	if start > ct || ct-start >= w {
		t.Fatalf("%s: bucketOf(%d) starts at %d: clamp(t) = %d is not in [start, start+w)", shape, x, start, ct)
	}
	if start%w != 0 {
		t.Fatalf("%s: bucketOf(%d) starts at %d, not a multiple of the width", shape, x, start)
	}
	if got := r.bucketOf(start); got != b {
		t.Fatalf("%s: bucketOf(start %d) = %d, want %d", shape, start, got, b)
	}
	if got := r.bucketOf(start + w - 1); got != b {
		t.Fatalf("%s: bucketOf(start+w-1 = %d) = %d, want %d", shape, start+w-1, got, b)
	}
	if start-1 >= -maxTime {
		if got := r.bucketOf(start - 1); got != b-1 {
			t.Fatalf("%s: bucketOf(start-1 = %d) = %d, want %d", shape, start-1, got, b-1)
		}
	}
	if start+w <= maxTime {
		if got := r.bucketOf(start + w); got != b+1 {
			t.Fatalf("%s: bucketOf(start+w = %d) = %d, want %d", shape, start+w, got, b+1)
		}
	}

	p := uint64(r.slots.N())
	if p != uint64(n) {
		t.Fatalf("%s: %d slots, want n = %d", shape, p, n)
	}
	if uint64(len(r.words))%p != 0 || len(r.words) == 0 {
		t.Fatalf("%s: %d words in %d slots", shape, len(r.words), p)
	}
	per := len(r.words) / int(p) // words per slot
	s := r.slotOf(b)
	if s != int(b%p)*per {
		t.Fatalf("%s: slotOf(%d) = %d, want (b mod %d) * %d = %d", shape, b, s, p, per, int(b%p)*per)
	}
	if got, want := r.slotOf(b+1), (s+per)%len(r.words); got != want {
		t.Fatalf("%s: bucket %d is in slot word %d, but bucket %d in %d, want %d", shape, b, s, b+1, got, want)
	}
}

// fzCheckMonotonic checks that bucketOf does not decrease in t, and that the
// distance between the buckets of two times is that between their clock
// buckets.
func fzCheckMonotonic(t *testing.T, r *ring, t1, t2 int64) {
	t.Helper()
	lo, hi := min(t1, t2), max(t1, t2)
	blo, bhi := r.bucketOf(lo), r.bucketOf(hi)
	if blo > bhi {
		t.Fatalf("%d buckets of %dns: bucketOf(%d) = %d > bucketOf(%d) = %d", r.n, r.width, lo, blo, hi, bhi)
	}
	if got, want := int64(bhi-blo), refFloorDiv(refClampTime(hi), r.width)-refFloorDiv(refClampTime(lo), r.width); got != want {
		t.Fatalf("%d buckets of %dns: bucketOf(%d) - bucketOf(%d) = %d, want %d", r.n, r.width, hi, lo, got, want)
	}
	if next := r.bucketOf(refSatAdd(lo, 1)); next != blo && next != blo+1 {
		t.Fatalf("%d buckets of %dns: bucketOf(%d) = %d, bucketOf(%d+1) = %d", r.n, r.width, lo, blo, lo, next)
	}
}

func fzEdgeTimes(w int64) []int64 {
	return []int64{
		0, 1, -1, w - 1, w, -w, -w - 1, 7*w + w/2, -7*w - w/2,
		maxTime, maxTime - 1, maxTime + 1, maxTime - w, maxTime - maxTime%w, maxTime - maxTime%w - 1,
		-maxTime, -maxTime + 1, -maxTime - 1, -maxTime + w, -maxTime + maxTime%w, -maxTime + maxTime%w - 1,
		math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1 << 62, -(1 << 62),
	}
}

// TestBucketIndexArithmeticHoldsForEdgeShapesAndTimes checks the index arithmetic for edge
// shapes (smallest and largest widths, widths dividing maxTime or not) at
// edge times (around 0, bucket boundaries, ±maxTime, the int64 limits).
func TestBucketIndexArithmeticHoldsForEdgeShapesAndTimes(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 16, 17, 1000, maxBuckets} {
		hi := int64(maxTime) / int64(n)
		for _, w := range []int64{int64(minWidth), int64(minWidth) + 1, 1024, 7000, 1e6, 5e8, 1 << 20, 3 << 30, hi - 1, hi} {
			r := newRing(n, time.Duration(w), rollingKinds, nil)
			times := fzEdgeTimes(w)
			for i, x := range times {
				fzCheckBucketArithmetic(t, r, x)
				fzCheckMonotonic(t, r, x, times[(i+1)%len(times)])
			}
		}
	}
}

// FuzzBucketIndexArithmetic checks the index arithmetic for any shape and
// any two times.
func FuzzBucketIndexArithmetic(f *testing.F) {
	for _, s := range []struct {
		n      uint16
		w      int64
		t1, t2 int64
	}{
		{0, 1000, 0, -1},                              // 1 bucket of 1µs
		{9, 7000, -1, 7000},                           // 10 buckets of 7µs
		{15, 1e6, 123456789, -123456789},              // 16 buckets of 1ms
		{2, 1024, maxTime, maxTime + 1},               // 3 buckets of 1024ns, which divides maxTime
		{0, maxTime, math.MinInt64, math.MaxInt64},    // 1 bucket as wide as can be
		{2, maxTime / 3, -maxTime, -maxTime - 1},      //
		{maxBuckets - 1, 1000, maxTime - 1, -maxTime}, // 65536 buckets
		{999, 5e8, -(1 << 62), 1 << 62},               //
	} {
		f.Add(s.n, uint64(s.w)<<3|3, s.t1, s.t2)
	}
	f.Fuzz(func(t *testing.T, nRaw uint16, wRaw uint64, t1, t2 int64) {
		n := int(nRaw)%maxBuckets + 1
		w := fzWidth(n, wRaw)
		if err := timegrid.CheckWindow(time.Duration(int64(n)*w), n); err != nil {
			t.Fatalf("fzWidth(%d, %d) = %d: %v", n, wRaw, w, err)
		}
		r := newRing(n, time.Duration(w), rollingKinds, nil)
		fzCheckBucketArithmetic(t, r, t1)
		fzCheckBucketArithmetic(t, r, t2)
		fzCheckMonotonic(t, r, t1, t2)
		// The extremes clamp to the bucket of ±maxTime.
		if r.bucketOf(math.MaxInt64) != r.bucketOf(maxTime) || r.bucketOf(math.MinInt64) != r.bucketOf(-maxTime) {
			t.Fatalf("%d buckets of %dns: the int64 limits do not clamp to ±maxTime", n, w)
		}
	})
}

// ---- Operation sequences from a byte string ----

// fzBytes draws the generator's choices from a byte string, reading
// zeros once it is exhausted.
type fzBytes struct {
	data []byte
	i    int
}

func (b *fzBytes) next() byte {
	var x byte
	if b.i < len(b.data) {
		x = b.data[b.i]
	}
	b.i++
	return x
}

func (b *fzBytes) IntN(n int) int {
	if n <= 256 {
		return int(b.next()) % n
	}
	return int(b.Uint64() % uint64(n))
}

func (b *fzBytes) Uint64() uint64 {
	var x uint64
	for i := 0; i < 8; i++ {
		x |= uint64(b.next()) << (8 * i)
	}
	return x
}

func (b *fzBytes) exhausted() bool { return b.i >= len(b.data) }

var (
	fzCounts = []int{1, 2, 3, 4, 5, 8, 10, 16, 17}
	fzWidths = []int64{1000, 1001, 1024, 7000, 1e6, 1 << 20, 5e8, -1, -2} // -1: maxTime/n, -2: maxTime/n - 1
)

// fzShape decodes a shape: the number of buckets, their width, the time the
// clock starts at, and whether the clock may visit extreme times.
func fzShape(shape uint16, src modelEntropy) (n int, w, start int64, extremes bool) {
	n = fzCounts[int(shape)%len(fzCounts)]
	w = fzWidths[int(shape)/len(fzCounts)%len(fzWidths)]
	switch w {
	case -1:
		w = maxTime / int64(n)
	case -2:
		w = maxTime/int64(n) - 1
	}
	extremes = shape&0x8000 != 0
	span := int64(n) * w
	start = refSatAdd(modelRand64(src, refSatMul(6, span)), -refSatMul(3, span))
	return n, w, start, extremes
}

const fzMaxSteps = 1000

// fzSeeds adds a few operation strings for each of a few shapes.
func fzSeeds(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i, shape := range []uint16{0, 2, 7, 9 + 4, 18 + 2, 27 + 8, 54 + 6, 63 + 1, 72 + 3, 0x8000 | 11, 0x8000 | 61} {
		ops := make([]byte, 300+200*i)
		for j := range ops {
			ops[j] = byte(rng.Uint32())
		}
		f.Add(shape, ops)
	}
	f.Add(uint16(2), []byte{})
	f.Add(uint16(3), []byte{0, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 60, 0, 0, 70, 3, 0, 70, 3})
}

// FuzzCounterMatchesReferenceModel decodes a byte string into a Counter's
// shape and a sequence of operations, and checks every read against the
// reference model after every operation.
func FuzzCounterMatchesReferenceModel(f *testing.F) {
	fzSeeds(f)
	f.Fuzz(func(t *testing.T, shape uint16, ops []byte) {
		src := &fzBytes{data: ops}
		n, w, start, extremes := fzShape(shape, src)
		h := newModelCounterHarness(t, fmt.Sprintf("Counter of %d buckets of %dns from %d", n, w, start), n, w, start)
		h.tl.extremes = extremes
		for !src.exhausted() && h.step < fzMaxSteps {
			h.doStep(src)
		}
	})
}

// FuzzRollingWindowMatchesReferenceModel is FuzzCounterMatchesReferenceModel
// for RollingWindow, with and without IgnoreCurrentBucket.
func FuzzRollingWindowMatchesReferenceModel(f *testing.F) {
	fzSeeds(f)
	f.Fuzz(func(t *testing.T, shape uint16, ops []byte) {
		src := &fzBytes{data: ops}
		n, w, start, extremes := fzShape(shape, src)
		h := newModelRollingHarness(t, fmt.Sprintf("RollingWindow of %d buckets of %dns from %d", n, w, start), n, w, start)
		h.tl.extremes = extremes
		for !src.exhausted() && h.step < fzMaxSteps {
			h.doStep(src)
		}
	})
}
