package timegrid

// Slots numbers the slots of a ring of n, where bucket b lives in slot
// b mod n: a mask when n is a power of two, a multiplication by the
// divisor's reciprocal otherwise, never a hardware division. A ring of
// exactly n slots spends no memory on spare ones.
type Slots struct {
	n    uint64
	mask uint64 // n-1, when n is a power of two
	pow2 bool
	div  divisor
}

// NewSlots returns the numbering of n slots; n must be at least 1.
func NewSlots(n int) Slots {
	u := uint64(n)
	if u&(u-1) == 0 {
		return Slots{n: u, mask: u - 1, pow2: true}
	}
	return Slots{n: u, div: newDivisor(u)}
}

// N returns the number of slots.
func (s *Slots) N() int { return int(s.n) }

// Of returns the slot of bucket b, for b below 2^63.
func (s *Slots) Of(b uint64) int {
	if s.pow2 {
		return int(b & s.mask)
	}
	return int(b - s.div.div(b)*s.n)
}
