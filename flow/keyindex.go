package flow

// A keyIndex finds a shard's hot entries by their keys' hashes: open
// addressing with linear probing, in a power of two of slots at least
// twice the entries. A deletion moves the later members of its run back
// instead of leaving a tombstone, so the index never fills with dead
// slots, never grows by itself, and takes exactly the memory it was made
// with (keyIndexSlotBytes a slot), which Set and the entries' growth
// choose.
type keyIndex struct {
	hashes []uint64
	at     []int32 // the entry + 1; 0 for an empty slot
	mask   uint64
}

// keyIndexSlotBytes is the heap of one slot of a keyIndex.
const keyIndexSlotBytes = 12

// newKeyIndex returns an empty index for up to entries entries.
func newKeyIndex(entries int) keyIndex {
	n := 16
	for n < 2*entries {
		n *= 2
	}
	return keyIndex{hashes: make([]uint64, n), at: make([]int32, n), mask: uint64(n - 1)}
}

// keyIndexBytes is the heap of an index for up to entries entries.
func keyIndexBytes(entries int) int64 {
	n := 16
	for n < 2*entries {
		n *= 2
	}
	return int64(n) * keyIndexSlotBytes
}

// find returns the entry of hash h.
func (x *keyIndex) find(h uint64) (int32, bool) {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		switch a := x.at[i]; {
		case a == 0:
			return 0, false
		case x.hashes[i] == h:
			return a - 1, true
		}
	}
}

// put makes e the entry of hash h.
func (x *keyIndex) put(h uint64, e int32) {
	i := h & x.mask
	for x.at[i] != 0 && x.hashes[i] != h {
		i = (i + 1) & x.mask
	}
	x.hashes[i], x.at[i] = h, e+1
}

// remove forgets hash h, moving back the members of its run that would
// not be found past the slot it leaves empty.
func (x *keyIndex) remove(h uint64) {
	i := h & x.mask
	for x.hashes[i] != h || x.at[i] == 0 {
		if x.at[i] == 0 {
			return
		}
		i = (i + 1) & x.mask
	}
	x.at[i] = 0
	for j := (i + 1) & x.mask; x.at[j] != 0; j = (j + 1) & x.mask {
		// The member at j stays if its home lies cyclically in (i, j].
		home := x.hashes[j] & x.mask
		if (j-home)&x.mask < (j-i)&x.mask {
			continue
		}
		x.hashes[i], x.at[i] = x.hashes[j], x.at[j]
		x.at[j] = 0
		i = j
	}
}
