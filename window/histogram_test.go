package window

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
)

// relErr returns |got-want| / want.
func relErr(got, want int64) float64 {
	return math.Abs(float64(got-want)) / float64(want)
}

// The layouts' promises: relative error above a latency, absolute error
// below it.
var layouts = []struct {
	name   string
	l      *histLayout
	from   int64   // relative error bound from this latency up
	rel    float64 // the bound
	absMax int64   // absolute error bound below from
}{
	{"fine", fineBins, int64(time.Microsecond), 1.0 / 128, 4},
	{"compact", compactBins, 16 * int64(time.Microsecond), 1.0 / 32, 512},
}

func checkBin(t *testing.T, d int64) {
	t.Helper()
	for _, lt := range layouts {
		l := lt.l
		i := l.bin(d)
		if i < 0 || i >= l.bins {
			t.Fatalf("%s: bin(%d) = %d, out of [0, %d)", lt.name, d, i, l.bins)
		}
		if d >= int64(histogramRange) {
			if i != l.overflow {
				t.Fatalf("%s: bin(%d) = %d, want the overflow bin %d", lt.name, d, i, l.overflow)
			}
			continue
		}
		if i == l.overflow {
			t.Fatalf("%s: bin(%d) is the overflow bin below histogramRange", lt.name, d)
		}
		if d >= lt.from {
			if e := relErr(l.mid(i), d); e > lt.rel {
				t.Fatalf("%s: latency %d: bin %d midpoint %d is off by %.4f%%, more than %.4f%%", lt.name, d, i, l.mid(i), e*100, lt.rel*100)
			}
		} else if e := l.mid(i) - max(d, 0); e > lt.absMax || -e > lt.absMax {
			t.Fatalf("%s: latency %d: bin %d midpoint %d is off by %d ns, more than %d", lt.name, d, i, l.mid(i), e, lt.absMax)
		}
	}
}

func TestHistogramBinsAreWithinOnePercent(t *testing.T) {
	for _, d := range []int64{-5, 0, 1, 7, 8, 999, 1000, 1023, 1024, 1025, 2047, 2048, 1e6, 1e9, 6e10, int64(histogramRange) - 1, int64(histogramRange), math.MaxInt64} {
		checkBin(t, d)
	}
	// Every bin edge, from both sides.
	for _, lt := range layouts {
		l := lt.l
		for i := 1; i < l.overflow; i++ {
			shift := max(i>>l.sub-1, 0)
			lo := int64(i-shift<<l.sub) << shift << l.unit
			checkBin(t, lo)
			checkBin(t, lo-1)
			if l.bin(lo) != i {
				t.Fatalf("%s: lower edge %d of bin %d maps to bin %d", lt.name, lo, i, l.bin(lo))
			}
			if l.bin(lo-1) != i-1 {
				t.Fatalf("%s: %d, just below bin %d, maps to bin %d", lt.name, lo-1, i, l.bin(lo-1))
			}
		}
		if l.bins > maxBins {
			t.Fatalf("%s: %d bins, more than maxBins", lt.name, l.bins)
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

func TestHistogramQuantilesMatchExactOnes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	distributions := map[string]func() int64{
		"uniform 1µs-1s":  func() int64 { return int64(time.Microsecond) + rng.Int64N(int64(time.Second)) },
		"log-uniform":     func() int64 { return int64(math.Exp(rng.Float64()*math.Log(6e10/1e3)) * 1e3) },
		"bimodal":         func() int64 { return []int64{2e6, 300e6}[rng.IntN(2)] + rng.Int64N(1e5) },
		"one value":       func() int64 { return 4321000 },
		"heavy tail 5min": func() int64 { return min(int64(1e6/math.Pow(rng.Float64()+1e-9, 1.2)), 300e9) },
	}
	for _, lt := range layouts {
		for name, next := range distributions {
			t.Run(lt.name+"/"+name, func(t *testing.T) {
				c := clock.NewManual(0)
				opts := []Option{WithClock(c)}
				if lt.l == compactBins {
					opts = append(opts, Compact())
				}
				h, err := NewHistogram(4, 4*time.Second, opts...)
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
					if want < lt.from {
						if e := int64(tc.got) - want; e > lt.absMax || -e > lt.absMax {
							t.Errorf("q=%v: got %v, exact %v, off by %d ns", tc.q, tc.got, time.Duration(want), e)
						}
					} else if e := relErr(int64(tc.got), want); e > lt.rel {
						t.Errorf("q=%v: got %v, exact %v, off by %.3f%%", tc.q, tc.got, time.Duration(want), e*100)
					}
				}
			})
		}
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
	if whole, err := h.View(10 * time.Second); err != nil || whole != h {
		t.Fatalf("View(10s) = %p, %v; want the Histogram itself, %p", whole, err, h)
	}
	if _, err := last.View(2 * time.Second); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("View(2s) of a 1 s view: err = %v, want an config.ErrInvalid", err)
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
	if s := h.Summary(); s.Count != 2 || s.Max != maxValue-1 || s.P999 != maxValue-1 {
		t.Fatalf("summary %+v: want count 2, max and P999 saturated at maxValue-1 (10m is beyond the range)", s)
	}
	for _, q := range []float64{math.NaN(), -1, 0} {
		if got := h.Quantile(q); got > 10*time.Nanosecond {
			t.Fatalf("Quantile(%v) = %v, want the smallest latency", q, got)
		}
	}
	if got := h.Quantile(2); got != maxValue-1 {
		t.Fatalf("Quantile(2) = %v, want the largest latency", got)
	}
}

func TestHistogramBucketBytesIsWhatIsAllocated(t *testing.T) {
	h, err := NewHistogram(4, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(h.r.words) * 8 / 4; got != histogramBucketBytes {
		t.Fatalf("a bucket takes %d bytes, histogramBucketBytes says %d", got, histogramBucketBytes)
	}
	c, err := NewHistogram(4, 4*time.Second, Compact())
	if err != nil {
		t.Fatal(err)
	}
	if got := len(c.r.words) * 8 / 4; got != compactBucketBytes {
		t.Fatalf("a compact bucket takes %d bytes, compactBucketBytes says %d", got, compactBucketBytes)
	}
}

// A Summary's quantiles, found in one walk of the bins, are those QuantileAt
// finds one at a time, whatever the latencies: few or many, spread or
// bunched, beyond the range or not, in either layout.
func TestHistogramSummaryAgreesWithItsQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 300 {
		var opts []Option
		if round%2 == 1 {
			opts = append(opts, Compact())
		}
		h, err := NewHistogram(2, 2*time.Second, append(opts, WithClock(clock.NewManual(0)))...)
		if err != nil {
			t.Fatal(err)
		}
		n := rng.IntN(2000)
		top := int64(1) << (10 + rng.IntN(32)) // some rounds reach past 2^39 ns
		for range n {
			d := rng.Int64N(top)
			if rng.IntN(4) == 0 {
				d = top / int64(1+rng.IntN(3)) // bunched on a few values
			}
			h.RecordAt(0, time.Duration(d))
		}
		s := h.SummaryAt(0)
		want := Summary{Count: int64(n), Max: s.Max, P50: h.QuantileAt(0, 0.5), P90: h.QuantileAt(0, 0.9), P99: h.QuantileAt(0, 0.99), P999: h.QuantileAt(0, 0.999)}
		if s != want {
			t.Fatalf("round %d, %d latencies below %v: summary %+v, quantiles %+v", round, n, time.Duration(top), s, want)
		}
	}
}
