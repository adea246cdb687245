// Package flowsim measures how exactly a rate limiter keeps its limit. It
// drives any limiter with generated traffic on simulated time and computes,
// from the times of the allowed requests, the largest number allowed in any
// interval of the limit's length, wherever it starts, and the long-run
// allowed rate.
//
// It is how slidegate's flow limiters prove their guarantee, and how the
// comparison benchmarks measure other libraries the same way.
package flowsim

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// An Arrival is n requests arriving together at time At (nanoseconds).
type Arrival struct {
	At int64
	N  int64
}

// A Pattern generates the arrivals of a traffic pattern over [0, duration)
// for a limiter of limit requests per interval, in time order.
type Pattern struct {
	Name     string
	Arrivals func(rng *rand.Rand, limit int64, interval, duration time.Duration) []Arrival
}

// Patterns returns the standard traffic patterns:
//
//   - steady 2x: requests evenly spaced at twice the limit;
//   - edge bursts: bursts of the whole limit just before and just after the
//     edges of the interval, and of its twentieths (where bucketed limiters
//     have their edges), every other interval;
//   - idle then burst: silence for two intervals, then bursts of the limit
//     spread over the next interval;
//   - poisson 3x: Poisson arrivals at three times the limit;
//   - random batches: batches of 1 to 5 requests at random times, at twice
//     the limit on average.
func Patterns() []Pattern {
	return []Pattern{
		{"steady 2x", func(_ *rand.Rand, limit int64, interval, duration time.Duration) []Arrival {
			step := max(int64(interval)/(2*limit), 1)
			var out []Arrival
			for t := int64(0); t < int64(duration); t += step {
				out = append(out, Arrival{t, 1})
			}
			return out
		}},
		{"edge bursts", func(_ *rand.Rand, limit int64, interval, duration time.Duration) []Arrival {
			var out []Arrival
			for _, div := range []int64{1, 20} {
				w := int64(interval) / div
				for edge := w; edge < int64(duration); edge += 2 * w {
					out = append(out, Arrival{edge - 1, limit}, Arrival{edge, limit})
				}
			}
			return sorted(out)
		}},
		{"idle then burst", func(rng *rand.Rand, limit int64, interval, duration time.Duration) []Arrival {
			var out []Arrival
			L := int64(interval)
			for start := 2 * L; start < int64(duration); start += 3 * L {
				for i := 0; i < 4; i++ {
					out = append(out, Arrival{start + rng.Int64N(L), max(limit/2, 1)})
				}
			}
			return sorted(out)
		}},
		{"poisson 3x", func(rng *rand.Rand, limit int64, interval, duration time.Duration) []Arrival {
			mean := float64(interval) / float64(3*limit)
			var out []Arrival
			for t := 0.0; t < float64(duration); t += rng.ExpFloat64() * mean {
				out = append(out, Arrival{int64(t), 1})
			}
			return out
		}},
		{"random batches", func(rng *rand.Rand, limit int64, interval, duration time.Duration) []Arrival {
			n := 2 * limit * int64(duration/interval) / 3
			out := make([]Arrival, 0, n)
			for i := int64(0); i < n; i++ {
				out = append(out, Arrival{rng.Int64N(int64(duration)), 1 + rng.Int64N(5)})
			}
			return sorted(out)
		}},
	}
}

func sorted(a []Arrival) []Arrival {
	slices.SortStableFunc(a, func(x, y Arrival) int {
		switch {
		case x.At < y.At:
			return -1
		case x.At > y.At:
			return 1
		}
		return 0
	})
	return a
}

// A Result is what one run measured.
type Result struct {
	Pattern string
	Offered int64 // requests that arrived
	Allowed int64 // requests allowed
	// MaxInInterval is the largest number allowed in any interval of the
	// limit's length [a, a+interval), over every a.
	MaxInInterval int64
	// PerInterval is the allowed count per interval over the run.
	PerInterval float64
}

// Run offers the pattern's arrivals to allow, in time order, and measures the
// requests allowed. allow(now, n) must allow all n requests or none. The run
// starts at time start, so that limiters with their own origin are not at an
// edge.
func Run(allow func(now int64, n int64) bool, p Pattern, limit int64, interval, duration time.Duration, start int64, seed uint64) Result {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	res := Result{Pattern: p.Name}
	var allowed []Arrival
	for _, a := range p.Arrivals(rng, limit, interval, duration) {
		res.Offered += a.N
		if allow(start+a.At, a.N) {
			res.Allowed += a.N
			allowed = append(allowed, Arrival{start + a.At, a.N})
		}
	}
	res.MaxInInterval = MaxInAnyInterval(allowed, interval)
	res.PerInterval = float64(res.Allowed) * float64(interval) / float64(duration)
	return res
}

// MaxInAnyInterval returns the largest total of N over the arrivals whose
// times fall in one interval [a, a+length), over every a. The arrivals must
// be in time order. The largest total is reached by an interval that starts
// at an arrival, so a two-pointer sweep finds it exactly.
func MaxInAnyInterval(a []Arrival, length time.Duration) int64 {
	var best, sum int64
	j := 0
	for i := range a {
		for j < len(a) && a[j].At < a[i].At+int64(length) {
			sum += a[j].N
			j++
		}
		best = max(best, sum)
		sum -= a[i].N
	}
	return best
}

// WriteTable writes results as a markdown table, with the maximum and the
// long-run rate as multiples of the limit.
func WriteTable(w io.Writer, limiter string, limit int64, results []Result) error {
	if _, err := fmt.Fprintf(w, "| limiter | pattern | offered | allowed | max in any interval | × limit | allowed per interval | × limit |\n|---|---|--:|--:|--:|--:|--:|--:|\n"); err != nil {
		return err
	}
	for _, r := range results {
		_, err := fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %.2f | %.1f | %.3f |\n",
			limiter, r.Pattern, r.Offered, r.Allowed, r.MaxInInterval,
			float64(r.MaxInInterval)/float64(limit), r.PerInterval, round3(r.PerInterval/float64(limit)))
		if err != nil {
			return err
		}
	}
	return nil
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
