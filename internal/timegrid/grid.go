// Package timegrid numbers the buckets of a fixed width on a monotonic clock:
// the arithmetic that the window and flow packages share.
//
// Bucket i covers the times [(i-k)*w, (i-k+1)*w) for a fixed k, so bucket
// starts are multiples of w on the clock while indexes stay positive. Times
// are clamped to [-MaxTime, MaxTime], so no index overflows, and the division
// by w is a multiplication by a precomputed reciprocal.
package timegrid

import "time"

// MinWidth is the narrowest bucket a grid may have.
const MinWidth = time.Microsecond

// MaxTime bounds the times a grid accepts: times are clamped to
// [-MaxTime, MaxTime] nanoseconds, about 36 years either side of the clock's
// origin.
const MaxTime = 1 << 60

// A Grid numbers the buckets of one width. The zero Grid is not usable; make
// one with New.
type Grid struct {
	// Width is the bucket width in nanoseconds.
	Width int64
	// Offset is k*Width, added to a clamped time before dividing.
	Offset int64
	div    divisor
}

// New returns the grid of buckets of the given width whose indexes, for every
// accepted time, are greater than spare. spare buckets of the width must form
// a window that passes CheckWindow.
func New(width time.Duration, spare int64) Grid {
	w := int64(width)
	return Grid{
		Width:  w,
		Offset: (MaxTime/w + 2 + spare) * w, // at most 4*MaxTime, so sums stay below 2^63
		div:    newDivisor(uint64(w)),
	}
}

// Clamp limits t to the times a grid accepts.
func Clamp(t int64) int64 {
	if t > MaxTime {
		return MaxTime
	}
	if t < -MaxTime {
		return -MaxTime
	}
	return t
}

// Index returns the index of the bucket holding time t.
func (g *Grid) Index(t int64) uint64 {
	// One unsigned comparison checks both bounds; a time out of range, or so
	// far out that adding the offset wrapped, is clamped on the slow path.
	u := uint64(t + g.Offset)
	if u-uint64(g.Offset-MaxTime) > 2*MaxTime {
		u = uint64(Clamp(t) + g.Offset)
	}
	return g.div.div(u)
}

// Start returns the time at which bucket i starts.
func (g *Grid) Start(i uint64) int64 { return int64(i)*g.Width - g.Offset }
