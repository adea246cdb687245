package timegrid

import "math/bits"

// A divisor divides numerators below 2^63 by a fixed d without a division
// instruction: q = floor(m*x / 2^shift), with m and shift chosen so that the
// result is exact for every such x (Granlund and Montgomery, "Division by
// invariant integers using multiplication", 1994, theorem 4.2 with N = 63).
// A hardware 64-bit division costs tens of cycles; a multiply costs three, and
// the ring divides twice per operation (time by bucket width, bucket index by
// bucket count).
type divisor struct {
	d  uint64
	m  uint64
	sh uint // ceil(log2 d) - 1: the quotient is the high word of m*x shifted right by sh
}

// newDivisor returns a divisor for d, which must be at least 2.
func newDivisor(d uint64) divisor {
	if d < 2 {
		panic("timegrid: divisor below 2") // constructors validate first
	}
	l := uint(bits.Len64(d - 1)) // ceil(log2 d), at least 1
	// m = ceil(2^(63+l) / d), which is below 2^64 (see the paper); the
	// dividend 2^(63+l) is the 128-bit pair 2^(l-1):0.
	q, r := bits.Div64(1<<(l-1), 0, d)
	if r != 0 {
		q++
	}
	return divisor{d: d, m: q, sh: l - 1}
}

// div returns floor(x / d). x must be below 2^63.
func (v divisor) div(x uint64) uint64 {
	hi, _ := bits.Mul64(v.m, x)
	return hi >> (v.sh & 63)
}
