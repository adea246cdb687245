package window

import "github.com/slidegate/slidegate/internal/tagword"

// Words. A word is one 64-bit cell of a bucket. Its high tagBits bits hold the low
// bits of the index of the bucket the value belongs to (the tag); its low
// valueBits bits hold the value plus bias, so that they hold 0 for minValue
// and 2^valueBits-1 for maxValue. With that offset, adding a value to a word
// is an add on the whole word, and a sum that leaves the range carries into
// or borrows from the tag, which the check of the tag catches.
//
// The tag is what makes a reused slot safe without locks. A writer changes a
// word only with a compare-and-swap whose expected value carries the writer's
// own tag, so a writer that found its bucket and was then delayed while the
// slot was reset for a later bucket fails its CAS instead of adding into the
// later bucket (the race that LeapArray and RollingWindow ignore), and a
// reader never mistakes a value of an earlier bucket for one of the bucket it
// wants. Two buckets of one slot have equal tags only when their indexes differ
// by a multiple of 2^tagBits; a writer would have to stall between reading
// the slot and its CAS for that many buckets (2^24 buckets of 1 ms is over four
// hours) for its value to land in the wrong bucket.

// maxValue and minValue bound the value one bucket holds for one event:
// 2^39-1 and -2^39. The packing is internal/tagword's.
const (
	tagBits   = tagword.TagBits
	valueBits = tagword.ValueBits
	valueMask = tagword.ValueMask
	bias      = tagword.Bias

	// maxValue is the largest value one bucket can hold for one event. Sums
	// saturate at maxValue instead of wrapping. With response times in
	// microseconds, it is over twelve days of summed time per bucket.
	maxValue = tagword.Max
	// minValue is the smallest value one bucket can hold for one event.
	minValue = tagword.Min
)

// pack returns the word holding v for bucket b. v must lie in [minValue, maxValue].
func pack(b uint64, v int64) uint64 { return tagword.Pack(b, v) }

// belongs reports whether word w carries the tag of bucket b.
func belongs(w, b uint64) bool { return tagword.Belongs(w, b) }

// value returns the value held in w.
func value(w uint64) int64 { return tagword.Value(w) }

// clampValue limits v to what a word can hold.
func clampValue(v int64) int64 {
	if v > maxValue {
		return maxValue
	}
	if v < minValue {
		return minValue
	}
	return v
}

// clamp limits v to what a word of this kind can be given. minValue and
// maxValue mark an empty max or min word, so those kinds take values strictly
// between them.
func (k kind) clamp(v int64) int64 {
	if k == kindSum {
		return clampValue(v)
	}
	return min(max(v, minValue+1), maxValue-1)
}

// A kind says how a word combines the values written to it.
type kind uint8

const (
	kindSum kind = iota // values are added, saturating at maxValue and minValue
	kindMin             // the word keeps the smallest value; empty is maxValue
	kindMax             // the word keeps the largest value; empty is minValue
)

// empty returns the value of a word of this kind that nothing was written to.
func (k kind) empty() int64 {
	switch k {
	case kindMin:
		return maxValue
	case kindMax:
		return minValue
	}
	return 0
}

// combine returns the value of a word of this kind holding old after v is
// written to it, and whether that differs from old. v must already be clamped.
func (k kind) combine(old, v int64) (int64, bool) {
	switch k {
	case kindMin:
		return v, v < old
	case kindMax:
		return v, v > old
	}
	// Both lie in [minValue, maxValue], so the sum cannot overflow an int64.
	return clampValue(old + v), v != 0
}

// merge combines two bucket values of this kind, as a read over several
// buckets does.
func (k kind) merge(a, b int64) int64 {
	switch k {
	case kindMin:
		return min(a, b)
	case kindMax:
		return max(a, b)
	}
	return a + b
}
