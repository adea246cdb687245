package flow

// A keyIndex finds a shard's hot entries by their keys' hashes: open
// addressing with linear probing, in a power of two of slots at least
// twice the entries. A deletion moves the later members of its run back
// instead of leaving a tombstone, so the index never fills with dead
// slots, never grows by itself, and takes exactly the memory it was made
// with (keyIndexSlotBytes a slot), which Set and the entries' growth
// choose.
type keyIndex struct {
	slots []indexSlot
	mask  uint64
}

// An indexSlot is a hash and its entry, side by side: a probe reads one
// cache line.
type indexSlot struct {
	hash uint64
	at   int32 // the entry + 1; 0 for an empty slot
}

// keyIndexSlotBytes is the heap of one slot of a keyIndex.
const keyIndexSlotBytes = 16

// newKeyIndex returns an empty index for up to entries entries.
func newKeyIndex(entries int) keyIndex {
	n := 16
	for n < 2*entries {
		n *= 2
	}
	return keyIndex{slots: make([]indexSlot, n), mask: uint64(n - 1)}
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
		switch sl := &x.slots[i]; {
		case sl.at == 0:
			return 0, false
		case sl.hash == h:
			return sl.at - 1, true
		}
	}
}

// put makes e the entry of hash h.
func (x *keyIndex) put(h uint64, e int32) {
	i := h & x.mask
	for x.slots[i].at != 0 && x.slots[i].hash != h {
		i = (i + 1) & x.mask
	}
	x.slots[i] = indexSlot{hash: h, at: e + 1}
}

// remove forgets hash h, moving back the members of its run that would
// not be found past the slot it leaves empty.
func (x *keyIndex) remove(h uint64) {
	i := h & x.mask
	for x.slots[i].hash != h || x.slots[i].at == 0 {
		if x.slots[i].at == 0 {
			return
		}
		i = (i + 1) & x.mask
	}
	x.slots[i].at = 0
	for j := (i + 1) & x.mask; x.slots[j].at != 0; j = (j + 1) & x.mask {
		// The member at j stays if its home lies cyclically in (i, j].
		home := x.slots[j].hash & x.mask
		if (j-home)&x.mask < (j-i)&x.mask {
			continue
		}
		x.slots[i] = x.slots[j]
		x.slots[j].at = 0
		i = j
	}
}
