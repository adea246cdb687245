package flow

import (
	"fmt"
	"hash/maphash"
)

// The overrides of a Concurrency and a Throttle per key: each key with an
// override is counted exactly, in an entry of its own, which a pinTable
// finds by the key's seeded hash. The rest of the keys share the sketch.
//
// New overrides are put in force in place (Set), while requests come and
// go, and no key may hold more than its limit through it. The limits in
// force are one immutable value, swapped whole; each limiter's doc says how
// a key's places follow it between the sketch and an entry:
//
//   - a key that keeps its override keeps its entry, and what it holds
//     there, whatever its limit becomes;
//   - a key that loses its override has its entry sealed: what the entry
//     holds goes into the sketch, and from then on the entry takes nothing
//     (a request that still finds it in the limits it loaded counts in the
//     sketch instead, as the new limits will);
//   - a key given an override gets a new entry, which carries what the key
//     may still hold in the sketch (its estimate there) until it is sure
//     to hold nothing there.
//
// The seed never changes, so a key's counters in the sketch stay where
// they are. Keys whose hashes are equal (one chance in 2^64 per pair) are
// chained, each compared whole.

// A pinSlot is one override in force: the key's entry and its limit.
type pinSlot[E any] struct {
	e     *E
	key   string
	limit int64
	one   int64 // a throttle's pace of one request at limit; 0 if limit is 0
	next  int32 // the next slot of the same hash, or -1
}

// A pinTable finds the overrides' slots by hash. Once made it never
// changes, so requests read it without a lock.
type pinTable[E any] struct {
	index map[uint64]int32 // a hash's first slot
	slots []pinSlot[E]
}

// find returns the slot of key (hash h), or nil if it has no override.
func (t *pinTable[E]) find(h uint64, key string) *pinSlot[E] {
	if t.index == nil {
		return nil
	}
	i, ok := t.index[h]
	for ok {
		s := &t.slots[i]
		if s.key == key {
			return s
		}
		i, ok = s.next, s.next >= 0
	}
	return nil
}

// limitOf returns the limit of key: its override's, or limit.
func (t *pinTable[E]) limitOf(seed maphash.Seed, key string, limit int64) int64 {
	if s := t.find(maphash.String(seed, key), key); s != nil {
		return s.limit
	}
	return limit
}

// checkOverrides returns the error of the first key, in byte order, whose
// limit is outside [0, 2^32-1], or nil.
func checkOverrides(overrides map[string]int64) error {
	bad, found := "", false
	for key, l := range overrides {
		if (l < 0 || l > maxLimit) && (!found || key < bad) {
			bad, found = key, true
		}
	}
	if !found {
		return nil
	}
	return &configError{Pkg: "flow", Field: "overrides", Value: fmt.Sprintf("%q: %d", bad, overrides[bad]), Detail: fmt.Sprintf("must be between 0 and %d", int64(maxLimit))}
}

// pinAll returns the table of overrides, which checkOverrides has passed:
// each key keeps its entry in old, if it has one there, and the others get
// a new one from fresh. It also returns the slots of old whose keys lose
// their overrides. pace gives an override's pace of one request (nil:
// none). Entries are allocated one by one, so that an entry kept through
// many reloads keeps no other alive.
func pinAll[E any](seed maphash.Seed, overrides map[string]int64, old *pinTable[E], fresh func() *E, pace func(limit int64) int64) (pinTable[E], []*pinSlot[E]) {
	if len(overrides) == 0 {
		var gone []*pinSlot[E]
		for i := range old.slots {
			gone = append(gone, &old.slots[i])
		}
		return pinTable[E]{}, gone
	}
	t := pinTable[E]{index: make(map[uint64]int32, len(overrides)), slots: make([]pinSlot[E], 0, len(overrides))}
	hashes := make([]uint64, 0, len(overrides))
	kept := 0
	for key := range overrides {
		h := maphash.String(seed, key)
		hashes = append(hashes, h)
		s := pinSlot[E]{key: key, limit: overrides[key], next: -1}
		if was := old.find(h, key); was != nil {
			s.e = was.e
			kept++
		} else {
			s.e = fresh()
		}
		t.slots = append(t.slots, s)
	}
	for i := range t.slots {
		s := &t.slots[i]
		if pace != nil && s.limit > 0 {
			s.one = pace(s.limit)
		}
		h := hashes[i]
		if first, ok := t.index[h]; ok {
			s.next = first
		}
		t.index[h] = int32(i)
	}
	var gone []*pinSlot[E]
	if kept < len(old.slots) {
		for i := range old.slots {
			s := &old.slots[i]
			if _, ok := overrides[s.key]; !ok {
				gone = append(gone, s)
			}
		}
	}
	return t, gone
}

// pinBytes is about the heap of one override besides its key: its slot,
// its entry (a cache line) and its place in the index (a map of 8-byte keys
// and 4-byte values, at its largest load).
const pinBytes = 48 + 64 + 24

// same reports whether the table holds exactly the overrides.
func (t *pinTable[E]) same(overrides map[string]int64) bool {
	if len(overrides) != len(t.slots) {
		return false
	}
	for i := range t.slots {
		if l, ok := overrides[t.slots[i].key]; !ok || l != t.slots[i].limit {
			return false
		}
	}
	return true
}
