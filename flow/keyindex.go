package flow

// A keyIndex finds a shard's hot entries by their keys' hashes: open
// addressing with linear probing, in a power of two of slots at least
// twice the entries. A slot holds the top half of a hash and its entry in
// one word, so that the index of a few thousand entries stays in the
// processor's cache; a key whose half matches is checked against the
// entry's whole hash. A deletion moves the later members of its run back
// instead of leaving a tombstone, so the index never fills with dead
// slots, never grows by itself, and takes exactly the memory it was made
// with (keyIndexSlotBytes a slot), which the entries' size chooses.
type keyIndex struct {
	slots []uint64 // the top 32 bits of a hash, then the entry + 1; 0 for none
	mask  uint64
}

// keyIndexSlotBytes is the heap of one slot of a keyIndex.
const keyIndexSlotBytes = 8

// newKeyIndex returns an empty index for up to entries entries.
func newKeyIndex(entries int) keyIndex {
	n := 16
	for n < 2*entries {
		n *= 2
	}
	return keyIndex{slots: make([]uint64, n), mask: uint64(n - 1)}
}

// keyIndexBytes is the heap of an index for up to entries entries.
func keyIndexBytes(entries int) int64 {
	n := 16
	for n < 2*entries {
		n *= 2
	}
	return int64(n) * keyIndexSlotBytes
}

// slot is what a slot holds for hash h and entry e.
func slot(h uint64, e int32) uint64 { return h&^(1<<32-1) | uint64(e+1) }

// find returns the entry of hash h, among the hashes of hot.
func (x *keyIndex) find(h uint64, hot []hotKey) (int32, bool) {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		v := x.slots[i]
		if v == 0 {
			return 0, false
		}
		if e := int32(uint32(v)) - 1; (v^h)>>32 == 0 && hot[e].hash == h {
			return e, true
		}
	}
}

// put makes e the entry of hash h; hot are the entries, h's among them
// if it has one already.
func (x *keyIndex) put(h uint64, e int32, hot []hotKey) {
	i := h & x.mask
	for v := x.slots[i]; v != 0; v = x.slots[i] {
		if (v^h)>>32 == 0 && hot[int32(uint32(v))-1].hash == h {
			break
		}
		i = (i + 1) & x.mask
	}
	x.slots[i] = slot(h, e)
}

// remove forgets entry e, of hash h, moving back the members of its run
// that would not be found past the slot it leaves empty; hot are the
// entries.
func (x *keyIndex) remove(h uint64, e int32, hot []hotKey) {
	want := slot(h, e)
	i := h & x.mask
	for x.slots[i] != want {
		if x.slots[i] == 0 {
			return
		}
		i = (i + 1) & x.mask
	}
	x.slots[i] = 0
	for j := (i + 1) & x.mask; x.slots[j] != 0; j = (j + 1) & x.mask {
		// The member at j stays if its home lies cyclically in (i, j].
		at := hot[int32(uint32(x.slots[j]))-1].hash & x.mask
		if (j-at)&x.mask < (j-i)&x.mask {
			continue
		}
		x.slots[i] = x.slots[j]
		x.slots[j] = 0
		i = j
	}
}
