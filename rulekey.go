package slidegate

import (
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"strconv"
)

// A rule's key is its whole value written out, so that two rules are the
// same rule when their keys are equal: a new set of rules takes over the
// enforcers of the rules it repeats by their keys (ruleKey), and an event
// tells the rules whose keys changed (ruleChanges). Writing it is a few
// appends per field, so that a reload of tens of thousands of rules costs
// milliseconds; TestRuleKeysCoverEveryField holds every field to it.
//
// A per-key rule's overrides (up to 10,000 of them) are written as
// their number and a sum of their entries' seeded hashes, which does not
// depend on the map's order: equal overrides give equal keys, and unequal
// ones almost always unequal keys, which sameOverrides then tells apart
// for certain (see sameRule).

// overridesSeed seeds the hashes of overrides' entries.
var overridesSeed = maphash.MakeSeed()

// appendString writes s, its length first, so that no two strings in a
// row read alike.
func appendString(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	return append(append(b, ':'), s...)
}

func appendInt(b []byte, v int64) []byte { return append(strconv.AppendInt(b, v, 10), ',') }

func appendFloat(b []byte, v float64) []byte {
	return append(strconv.AppendUint(b, math.Float64bits(v), 16), ',')
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, '1')
	}
	return append(b, '0')
}

func appendIntPointer(b []byte, p *int64) []byte {
	if p == nil {
		return append(b, '-')
	}
	return appendInt(append(b, '+'), *p)
}

// appendOverrides writes overrides as their number and the sum of their
// entries' hashes.
func appendOverrides(b []byte, o map[string]int64) []byte {
	var sum uint64
	for k, v := range o {
		h := maphash.String(overridesSeed, k) ^ uint64(v)*0x9e3779b97f4a7c15
		// A finalizer, so that the sum of two entries says little of either.
		h ^= h >> 31
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 29
		sum += h
	}
	b = appendInt(b, int64(len(o)))
	return append(strconv.AppendUint(b, sum, 16), ',')
}

// appendExactOverrides writes overrides whole, in the order of their keys.
func appendExactOverrides(b []byte, o map[string]int64) []byte {
	b = appendInt(b, int64(len(o)))
	for _, k := range slices.Sorted(maps.Keys(o)) {
		b = appendInt(appendString(b, k), o[k])
	}
	return b
}

// ruleKey identifies a rule (a FlowRule or a BreakerRule) by its whole
// value, the defaults it leaves out written out (see normal), so that a
// rule and the same rule with a default spelled out are one rule: a new
// snapshot reuses the enforcer of an identical rule, with its counts and
// state. Two flow rules of one key may still differ in their overrides:
// see sameRule.
func ruleKey(v any) string {
	var buf []byte
	switch r := v.(type) {
	case FlowRule:
		return flowKey(&r, &buf)
	case BreakerRule:
		return breakerKey(&r, &buf)
	}
	panic("slidegate: a rule key of a value that is no rule")
}

// flowKey returns the ruleKey of f, written in buf.
func flowKey(f *FlowRule, buf *[]byte) string {
	n := f.normal()
	*buf = n.appendKey((*buf)[:0], false)
	return string(*buf)
}

// breakerKey returns the ruleKey of b, written in buf.
func breakerKey(b *BreakerRule, buf *[]byte) string {
	n := b.normal()
	*buf = n.appendKey((*buf)[:0])
	return string(*buf)
}

// sameOverrides reports whether two rules of one key (ruleKey) have the
// same overrides: their keys hold only a hash of them.
func sameOverrides(a, b map[string]int64) bool {
	return len(a) == 0 && len(b) == 0 || maps.Equal(a, b)
}
