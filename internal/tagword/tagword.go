// Package tagword packs a value with the tag of the bucket it belongs to
// in one 64-bit word: the packing of package window's ring, and of what a
// circuit breaker that shares its resource's counter takes away from it.
//
// The high TagBits bits hold the low bits of the bucket's index; the low
// ValueBits bits hold the value plus a bias, so that they hold 0 for Min
// and 2^ValueBits-1 for Max. With that bias, adding a value to a word is
// an add on the whole word, and a sum that leaves the range carries into
// or borrows from the tag, which Belongs then catches.
package tagword

// The packing: a 24-bit tag and a 40-bit value.
const (
	TagBits   = 24
	ValueBits = 64 - TagBits
	// ValueMask keeps a word's biased value.
	ValueMask = 1<<ValueBits - 1

	// Max is the largest value a word holds: 2^39-1.
	Max = 1<<(ValueBits-1) - 1
	// Min is the smallest value a word holds: -2^39.
	Min = -Max - 1

	// Bias is added to a value as it is packed: a word's low bits hold
	// its value plus Bias.
	Bias = 1 << (ValueBits - 1)
)

// Pack returns the word holding v for bucket b. v must lie in [Min, Max].
func Pack(b uint64, v int64) uint64 { return b<<ValueBits | uint64(v+Bias) }

// Belongs reports whether word w carries the tag of bucket b.
func Belongs(w, b uint64) bool { return (w^b<<ValueBits)>>ValueBits == 0 }

// Value returns the value held in w.
func Value(w uint64) int64 { return int64(w&ValueMask) - Bias }
