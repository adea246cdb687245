// Package latbin maps latencies to the bins that window.Sketch counts them
// in, and that an adaptive limit finds its median in: bins whose width
// grows with the latency, so that every latency is within a fixed share of
// the value reported for its bin.
//
// A latency of d nanoseconds below 2^11 (2.048 µs) falls in one of 8 bins
// of 256 ns. From there up to Range each power of two [2^e, 2^(e+1)) is
// split into 8 bins whose edges grow by the same factor, 2^(1/8): a bin is
// reported as its geometric midpoint, which is within 2^(1/16) - 1 = 4.4%
// of every latency in it. The bin of d is found from the 10 bits below its
// leading one through a table, which puts a latency within 2^e/1024 above a
// bin's upper edge in that bin: at most 0.1% more, which stays within the
// 4.4% on that side.
package latbin

import (
	"math"
	"math/bits"
)

const (
	// Sub is the number of bins per power of two.
	Sub = 8
	// Linear is the power of two below which latencies are binned
	// linearly: 8 bins of 256 ns below 2^11 ns.
	Linear = 11
	// Powers is the number of groups of Sub bins: the linear one, then one
	// per power of two from 2^11 to 2^37 ns.
	Powers = 38 - Linear + 1
	// Bins is the number of bins below Range.
	Bins = Powers * Sub
	// Range is the first latency no bin holds: 2^38 ns, about 4 min 35 s.
	Range = int64(1) << 38
	// Error is the largest relative error of the latency reported for a
	// bin, from 2^11 ns to Range: 2^(1/16) - 1, about 4.43%. Below 2^11 ns
	// it is within 128 ns.
	Error = 0.0443

	frac  = 10 // bits below the leading one that choose the bin
	table = 1 << frac
)

// binOf maps the 10 bits below a latency's leading one to its bin within
// the power of two: the bin holding the lowest latency with those bits.
var binOf = func() (t [table]uint8) {
	for m := range t {
		t[m] = uint8(math.Floor(Sub * math.Log2(1+float64(m)/table)))
	}
	return t
}()

// mid is the geometric midpoint of bin j of a power of two, as a multiple
// of the power.
var mid = func() (t [Sub]float64) {
	for j := range t {
		t[j] = math.Exp2((float64(j) + 0.5) / Sub)
	}
	return t
}()

// Of returns the bin of latency d, in [0, Range): Sub × its group plus its
// bin within the group.
func Of(d int64) int {
	if d < 1<<Linear {
		return int(d >> (Linear - 3))
	}
	e := bits.Len64(uint64(d)) - 1
	m := (d >> uint(e-frac)) & (table - 1)
	return (e-(Linear-1))*Sub + int(binOf[m])
}

// Value returns the latency reported for bin i: the midpoint of a linear
// bin, the geometric midpoint 2^e·2^((j+0.5)/8) of bin j of a power of two
// 2^e.
func Value(i int) int64 {
	c, j := i/Sub, i%Sub
	if c == 0 {
		return int64(j)<<(Linear-3) + 1<<(Linear-4)
	}
	return int64(float64(int64(1)<<uint(c+Linear-1)) * mid[j])
}

// low is Low for each bin, derived from the table that Of reads, so that it
// is the bins' edges as recorded, not as intended.
var low = func() (t [Bins]int64) {
	for j := range Sub {
		t[j] = int64(j) << (Linear - 3)
	}
	for c := 1; c < Powers; c++ {
		e := c + Linear - 1
		for m := table - 1; m >= 0; m-- { // the lowest m of each bin last
			t[c*Sub+int(binOf[m])] = int64(1)<<e + int64(m)<<(e-frac)
		}
	}
	return t
}()

// Low returns the lowest latency bin i holds, exactly; i = Bins gives
// Range.
func Low(i int) int64 {
	if i == Bins {
		return Range
	}
	return low[i]
}
