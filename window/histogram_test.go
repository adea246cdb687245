package window

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// relErr returns |got-want| / want.
func relErr(got, want int64) float64 {
	return math.Abs(float64(got-want)) / float64(want)
}

func checkBin(t *testing.T, d int64) {
	t.Helper()
	i := histBin(d)
	if i < 0 || i >= histBins {
		t.Fatalf("histBin(%d) = %d, out of [0, %d)", d, i, histBins)
	}
	if d >= int64(HistogramRange) {
		if i != histOverflow {
			t.Fatalf("histBin(%d) = %d, want the overflow bin %d", d, i, histOverflow)
		}
		return
	}
	if i == histOverflow {
		t.Fatalf("histBin(%d) is the overflow bin below HistogramRange", d)
	}
	if d >= int64(time.Microsecond) {
		if e := relErr(histMid(i), d); e > 1.0/128 {
			t.Fatalf("latency %d: bin %d midpoint %d is off by %.4f%%, more than 1/128", d, i, histMid(i), e*100)
		}
	}
}

func TestHistogramBinsAreWithinOnePercent(t *testing.T) {
	for _, d := range []int64{-5, 0, 1, 7, 8, 999, 1000, 1023, 1024, 1025, 2047, 2048, 1e6, 1e9, 6e10, int64(HistogramRange) - 1, int64(HistogramRange), math.MaxInt64} {
		checkBin(t, d)
	}
	// Every bin edge, from both sides.
	for i := 1; i < histOverflow; i++ {
		shift := max(i/histSub-1, 0)
		lo := int64(i-shift*histSub) << shift << histUnitShift
		checkBin(t, lo)
		checkBin(t, lo-1)
		if histBin(lo) != i {
			t.Fatalf("lower edge %d of bin %d maps to bin %d", lo, i, histBin(lo))
		}
		if histBin(lo-1) != i-1 {
			t.Fatalf("%d, just below bin %d, maps to bin %d", lo-1, i, histBin(lo-1))
		}
	}
}

func FuzzHistogramBin(f *testing.F) {
	f.Add(int64(1000))
	f.Add(int64(123456789))
	f.Add(int64(-1))
	f.Fuzz(func(t *testing.T, d int64) { checkBin(t, d) })
}

// nearestRank returns the q-quantile of sorted by nearest rank.
func nearestRank(sorted []int64, q float64) int64 {
	rank := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return sorted[rank-1]
}

func TestHistogramQuantilesMatchExactOnesWithinOnePercent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	distributions := map[string]func() int64{
		"uniform 1µs-1s":  func() int64 { return int64(time.Microsecond) + rng.Int64N(int64(time.Second)) },
		"log-uniform":     func() int64 { return int64(math.Exp(rng.Float64()*math.Log(6e10/1e3)) * 1e3) },
		"bimodal":         func() int64 { return []int64{2e6, 300e6}[rng.IntN(2)] + rng.Int64N(1e5) },
		"one value":       func() int64 { return 4321000 },
		"heavy tail 5min": func() int64 { return min(int64(1e6/math.Pow(rng.Float64()+1e-9, 1.2)), 300e9) },
	}
	for name, next := range distributions {
		t.Run(name, func(t *testing.T) {
			c := clock.NewManual(0)
			h, err := NewHistogram(4, 4*time.Second, WithClock(c))
			if err != nil {
				t.Fatal(err)
			}
			var all []int64
			for i := 0; i < 20000; i++ {
				c.Set(int64(i) * int64(150*time.Microsecond)) // 3 s of time, spread over three buckets
				d := next()
				all = append(all, d)
				h.Record(time.Duration(d))
			}
			slices.Sort(all)
			s := h.Summary()
			if s.Count != int64(len(all)) {
				t.Fatalf("Count = %d, want %d", s.Count, len(all))
			}
			if int64(s.Max) != all[len(all)-1] {
				t.Fatalf("Max = %d, want exactly %d", s.Max, all[len(all)-1])
			}
			for _, tc := range []struct {
				q   float64
				got time.Duration
			}{{0.5, s.P50}, {0.9, s.P90}, {0.99, s.P99}, {0.999, s.P999}, {0, h.Quantile(0)}, {1, h.Quantile(1)}} {
				want := nearestRank(all, tc.q)
				if e := relErr(int64(tc.got), want); e > 1.0/128 {
					t.Errorf("q=%v: got %v, exact %v, off by %.3f%%", tc.q, tc.got, time.Duration(want), e*100)
				}
			}
		})
	}
}

func TestHistogramViewsSeeOnlyTheirBuckets(t *testing.T) {
	c := clock.NewManual(0)
	h, err := NewHistogram(10, 10*time.Second, WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	last, err := h.View(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Nine seconds of 1 ms latencies, then one second of 100 ms latencies.
	for sec := 0; sec < 10; sec++ {
		d := time.Millisecond
		if sec == 9 {
			d = 100 * time.Millisecond
		}
		for i := 0; i < 100; i++ {
			c.Set(int64(sec)*int64(time.Second) + int64(i)*int64(10*time.Millisecond))
			h.Record(d)
		}
	}
	if got := last.Summary(); got.Count != 100 || relErr(int64(got.P50), int64(100*time.Millisecond)) > 0.008 || got.Max != 100*time.Millisecond {
		t.Fatalf("last second: %+v, want 100 latencies of 100ms", got)
	}
	all := h.Summary()
	if all.Count != 1000 || relErr(int64(all.P50), int64(time.Millisecond)) > 0.008 || relErr(int64(all.P90), int64(time.Millisecond)) > 0.008 {
		t.Fatalf("whole interval: %+v, want P50 and P90 of 1ms", all)
	}
	if relErr(int64(all.P99), int64(100*time.Millisecond)) > 0.008 {
		t.Fatalf("whole interval P99 = %v, want 100ms", all.P99)
	}
	// Ten seconds later everything has left the window.
	c.Advance(10 * time.Second)
	if got := h.Summary(); got != (Summary{}) {
		t.Fatalf("after the interval passed: %+v, want empty", got)
	}
}

func TestHistogramQuantileEdges(t *testing.T) {
	c := clock.NewManual(0)
	h, err := NewHistogram(1, time.Second, WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Quantile(0.5); got != 0 {
		t.Fatalf("empty histogram quantile = %v, want 0", got)
	}
	h.Record(-time.Second) // counts as 0
	h.Record(10 * time.Minute)
	if s := h.Summary(); s.Count != 2 || s.Max != MaxValue-1 || s.P999 != MaxValue-1 {
		t.Fatalf("summary %+v: want count 2, max and P999 saturated at MaxValue-1 (10m is beyond the range)", s)
	}
	for _, q := range []float64{math.NaN(), -1, 0} {
		if got := h.Quantile(q); got > 10*time.Nanosecond {
			t.Fatalf("Quantile(%v) = %v, want the smallest latency", q, got)
		}
	}
	if got := h.Quantile(2); got != MaxValue-1 {
		t.Fatalf("Quantile(2) = %v, want the largest latency", got)
	}
	var zero HistogramView
	if zero.Summary() != (Summary{}) || zero.Quantile(0.5) != 0 || zero.Duration() != 0 {
		t.Fatal("the zero HistogramView must read as empty")
	}
}

func TestHistogramBucketBytesIsWhatIsAllocated(t *testing.T) {
	h, err := NewHistogram(4, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(h.r.words) * 8 / 4; got != HistogramBucketBytes {
		t.Fatalf("a bucket takes %d bytes, HistogramBucketBytes says %d", got, HistogramBucketBytes)
	}
}
