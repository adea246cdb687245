package flow

import "math"

// A keySketch is a shard's count-min sketch for one window. It is blocked:
// a key's counters are sketchProbes of the 8 in one 64-byte block (which
// block, and which of its counters, chosen by the key's hash), so that
// reading them costs one cache line; each counter holds two generations
// side by side, the current one at index gen&1.
type keySketch struct {
	gen   uint64   // the current generation: a bucket index / k
	mask  uint64   // blocks - 1
	cells []uint32 // block b, counter i, generation g at 16*b + 2*i + g&1
	// seen counts the current generation's distinct keys (linear
	// counting: a bit per key, picked by its hash, a bit per block, for
	// one key in keySample, so that few requests touch it); when ones,
	// the bits set, reach growAt, the keys are about a quarter of the
	// counters, and the sketch doubles.
	seen   []uint64
	ones   int
	growAt int
}

// advance moves the sketch on to the generation of time now, clearing the
// one that leaves the window, and returns the bucket the key counts in: the
// bucket of now, or the first of the current generation if now is before
// it.
func (k *keySketch) advance(w *keyWindow, now int64) uint64 {
	b := w.grid.Index(now)
	g := b / w.k
	if k.cells == nil {
		k.mask = minSketchBlocks - 1
		k.cells = make([]uint32, minSketchBlocks*blockWords)
		k.gen = g
		k.countKeys(keysPerBlock * minSketchBlocks)
	}
	switch {
	case g < k.gen:
		return k.gen * w.k
	case g == k.gen+1:
		for i := int(g & 1); i < len(k.cells); i += 2 {
			k.cells[i] = 0
		}
		k.countKeys(keysPerBlock * (k.mask + 1))
	case g > k.gen+1:
		clear(k.cells)
		k.countKeys(keysPerBlock * (k.mask + 1))
	}
	k.gen = g
	return b
}

// at returns the indexes of the key's counters (hash h) in the even
// generation; the odd one's follow each.
func (k *keySketch) at(h uint64) [sketchProbes]int {
	b := int(h&k.mask) * blockWords
	p := &probes[(h>>40)%uint64(len(probes))]
	var at [sketchProbes]int
	for r := range at {
		at[r] = b + 2*int(p[r])
	}
	return at
}

// probes lists every choice of sketchProbes distinct counters of a block's
// 8, in order: a key's hash picks one.
var probes = func() (ps [56][sketchProbes]uint8) {
	n := 0
	for a := range uint8(8) {
		for b := a + 1; b < 8; b++ {
			for c := b + 1; c < 8; c++ {
				ps[n] = [sketchProbes]uint8{a, b, c}
				n++
			}
		}
	}
	return ps
}()

// estimate returns the key's estimates in the previous and the current
// generation.
func (k *keySketch) estimate(h uint64) [2]int64 {
	cur := int(k.gen & 1)
	est := [2]int64{-1, -1}
	for _, i := range k.at(h) {
		p, c := int64(k.cells[i+1-cur]), int64(k.cells[i+cur])
		if est[0] < 0 || p < est[0] {
			est[0] = p
		}
		if est[1] < 0 || c < est[1] {
			est[1] = c
		}
	}
	return est
}

// add counts the key in the current generation, where its estimate is to
// become v (the requests allowed added): the conservative update raises
// each of its counters to v, no further. It grows the sketch when the
// generation's keys outnumber half its counters.
func (k *keySketch) add(h uint64, v int64) {
	cur := int(k.gen & 1)
	for _, i := range k.at(h) {
		k.cells[i+cur] = max(k.cells[i+cur], clampCount(v))
	}
	if h>>50&(keySample-1) != 0 {
		return
	}
	bit := (h >> 24) & (uint64(len(k.seen))*64 - 1)
	if w := &k.seen[bit/64]; *w&(1<<(bit%64)) == 0 {
		*w |= 1 << (bit % 64)
		k.ones++
		if k.ones >= k.growAt && k.mask+1 < maxSketchBlocks {
			k.grow()
		}
	}
}

// countKeys starts counting the generation's keys afresh, n of them yet to
// come before the sketch grows: of m bits, n/keySample distinct keys set
// m(1 - e^(-n/keySample/m)) on average.
func (k *keySketch) countKeys(n uint64) {
	m := max(64, k.mask+1)
	if len(k.seen) == int(m/64) {
		clear(k.seen)
	} else {
		k.seen = make([]uint64, m/64)
	}
	k.ones = 0
	k.growAt = max(1, int(float64(m)*(1-math.Exp(-float64(n)/keySample/float64(m)))))
}

// raise makes the key's estimate in generation g at least v.
func (k *keySketch) raise(h uint64, g uint64, v int64) {
	if v <= 0 || k.cells == nil || (g != k.gen && g != k.gen-1) {
		return
	}
	half := int(g & 1)
	for _, i := range k.at(h) {
		k.cells[i+half] = max(k.cells[i+half], clampCount(v))
	}
}

// grow doubles the sketch's blocks. A key's block b moves to b or
// b+blocks, depending on one more bit of its hash; both take the old
// block's counters, so every estimate stays what it was.
func (k *keySketch) grow() {
	n := len(k.cells)
	cells := make([]uint32, 2*n)
	copy(cells, k.cells)
	copy(cells[n:], k.cells)
	k.cells = cells
	k.mask = 2*k.mask + 1
	// The keys counted so far filled the half it had: as many again fill
	// the new half.
	k.countKeys(keysPerBlock * (k.mask + 1) / 2)
}
