package flow

import (
	"math"
	"math/bits"
)

// A keySketch is a shard's count-min sketch for one window. It is blocked:
// a key's counters are sketchProbes of the pairs of one 64-byte block
// (which block, and which of its pairs, chosen by the key's hash), so that
// reading them costs one cache line. A pair is two counters side by side,
// one per generation, the current one at gen&1.
//
// Counters are as narrow as the window's limit lets them be: 4 bits for a
// limit of at most 14, 8 bits up to 254, 16 up to 65,534, 32 beyond, so
// that a block holds 64, 32, 16 or 8 pairs. A counter saturates at its
// largest value, which is above the limit: a saturated estimate refuses,
// as the count it stands for would. Narrow counters are what make the
// sketch accurate in little memory: for the same bytes, a key's three
// counters are shared with fewer other keys.
//
// The sketch doubles, copying each block into two, which keeps every
// estimate as it was, when a generation's keys reach one for every
// sketchLoad pairs, if the shard's budget has the bytes. The keys are
// counted, one in keySample (by their hashes, so that a key is always
// counted or never), by a HyperLogLog of 256 registers (keyCount): a key
// that comes back is never counted twice, whatever the sketch's size. It halves,
// folding each block onto its twin with the larger of each two counters,
// which only raises estimates, when a whole generation had fewer than a
// sixty-fourth of the keys it holds. (Growing by more at once, to the size
// the pace of new keys predicts, would copy the keys already counted into
// fewer steps; under a budget it lets the first shards to grow take the
// bytes the others need, and refuses more: measured, keys at 40% of their
// limit at ten million an interval, 0.6% against 0.001%.)
type keySketch struct {
	gen   uint64   // the current generation: a bucket index / k
	mask  uint64   // blocks - 1
	shift uint     // log2 of the counters' width in bits, 2 to 5
	cells []uint64 // block b at [blockWords*b, blockWords*(b+1))
	full  bool     // the sketch may not grow this generation
	// seen counts the current generation's keys, one in keySample; once
	// they fill the sketch's room, it asks to grow.
	seen keyCount
	// The bucket the last advance returned, of the current generation,
	// and the times it spans, [from, to): a decision in it finds its
	// bucket without dividing (to <= from: none yet).
	bucket   uint64
	from, to int64
}

const (
	blockWords      = 8 // 64 bytes
	sketchProbes    = 3 // counters per key and generation
	sketchLoad      = 8 // pairs per key a generation before the sketch doubles
	keySample       = 4 // one key in keySample is counted in seen
	minSketchBlocks = 8
	maxSketchBlocks = 1 << 20 // per shard: the hash bits that pick a block
	blockBytes      = blockWords * 8
)

// genMasks[s][g] has the bits of generation slot g in every pair of
// counters 1<<s bits wide.
var genMasks = func() (m [6][2]uint64) {
	for s := uint(2); s <= 5; s++ {
		w := uint(1) << s
		ones := uint64(1)<<w - 1
		for p := uint(0); p < 64; p += 2 * w {
			m[s][0] |= ones << p
			m[s][1] |= ones << (p + w)
		}
	}
	return m
}()

// widthFor returns the log2 of the narrowest counter width whose largest
// value is above limit.
func widthFor(limit int64) uint {
	switch {
	case limit <= 14:
		return 2
	case limit <= 254:
		return 3
	case limit <= 65534:
		return 4
	}
	return 5
}

// newKeySketch returns an empty sketch of minSketchBlocks blocks for a
// window of the given limit.
func newKeySketch(limit int64) keySketch {
	return keySketch{mask: minSketchBlocks - 1, shift: widthFor(limit), cells: make([]uint64, minSketchBlocks*blockWords), seen: newKeyCount()}
}

// bytes is the heap the sketch takes.
func (k *keySketch) bytes() int64 { return int64(len(k.cells)) * 8 }

// tops[s] is the largest value of a counter 1<<s bits wide.
var tops = [8]uint64{2: 1<<4 - 1, 3: 1<<8 - 1, 4: 1<<16 - 1, 5: 1<<32 - 1}

// top is a counter's largest value.
func (k *keySketch) top() uint64 { return tops[k.shift&7] }

// pairs is the number of pairs in a block.
func (k *keySketch) pairs() uint64 { return 256 >> (k.shift & 7) }

// advance moves the sketch on to the generation of time now, clearing the
// one that leaves the window, and returns the bucket the key counts in: the
// bucket of now, or the first of the current generation if now is before
// it. It reports whether the sketch should halve: the generation that
// ended had few keys.
func (k *keySketch) advance(w *keyWindow, now int64) (uint64, bool) {
	if now >= k.from && now < k.to {
		return k.bucket, false
	}
	return k.advanceTo(w, now)
}

// advanceTo is advance for a time outside the bucket it returned last.
func (k *keySketch) advanceTo(w *keyWindow, now int64) (uint64, bool) {
	b := w.grid.Index(now)
	g := b / w.k
	if g <= k.gen {
		if g < k.gen {
			return k.gen * w.k, false
		}
		k.remember(w, b)
		return b, false
	}
	quiet := true
	if g == k.gen+1 {
		m := genMasks[k.shift][g&1]
		for i := range k.cells {
			k.cells[i] &^= m
		}
		quiet = k.seen.estimate()*keySample < k.room()/64
	} else {
		clear(k.cells)
	}
	k.gen = g
	k.seen = newKeyCount()
	k.full = false
	k.remember(w, b)
	return b, quiet && k.mask+1 > minSketchBlocks
}

// remember notes bucket b of window w, of the current generation, as the
// one advance returns for the times it spans.
func (k *keySketch) remember(w *keyWindow, b uint64) {
	k.bucket, k.from, k.to = b, w.grid.Start(b), w.grid.Start(b+1)
}

// forget drops the bucket advance remembers: its generation or its
// window is to change.
func (k *keySketch) forget() { k.from, k.to = 0, 0 }

// room is the keys a generation may have before the sketch grows.
func (k *keySketch) room() float64 { return float64(k.mask+1) * float64(k.pairs()) / sketchLoad }

// keySlots are where the key of a hash has its counters in a sketch of
// the given mask and counter width: words and bit offsets in generation
// slot 0; slot 1's are 1<<shift bits further.
type keySlots struct {
	mask  uint64 // the sketch's when they were found
	words [sketchProbes]int32
	offs  [sketchProbes]uint8
}

// slots returns where the key of hash h has its counters.
func (k *keySketch) slots(h uint64) keySlots {
	var sl keySlots
	k.look(h, &sl)
	return sl
}

// look puts in sl where the key of hash h has its counters, and returns
// its estimates in the previous and the current generation.
func (k *keySketch) look(h uint64, sl *keySlots) [2]int64 {
	base := int32(h&k.mask) * blockWords
	// Three distinct pairs of the block: a, and a with two different
	// nonzero offsets xored in.
	pm := k.pairs() - 1
	x := h >> 20
	a, d, f := x&pm, (x>>6)&pm|1, (x>>12)&pm&^1
	if f == 0 {
		f = 2
	}
	b, c := a^d, a^f // d is odd, f even and nonzero: a, b, c differ
	sh := (k.shift + 1) & 7
	a, b, c = a<<sh, b<<sh, c<<sh // bit offsets in the block
	wa, wb, wc := base+int32(a>>6), base+int32(b>>6), base+int32(c>>6)
	oa, ob, oc := uint8(a&63), uint8(b&63), uint8(c&63)
	sl.mask = k.mask
	sl.words = [sketchProbes]int32{wa, wb, wc}
	sl.offs = [sketchProbes]uint8{oa, ob, oc}
	top := k.top()
	cells := k.cells
	// The current generation's counters are cw bits above the pair's
	// start, the previous one's pw.
	w := uint(1) << (k.shift & 7)
	cw := uint(k.gen&1) * w & 63
	pw := (w - cw) & 63
	v0 := cells[wa] >> oa
	v1 := cells[wb] >> ob
	v2 := cells[wc] >> oc
	return [2]int64{int64(min(v0>>pw&top, v1>>pw&top, v2>>pw&top)), int64(min(v0>>cw&top, v1>>cw&top, v2>>cw&top))}
}

// sampled counts the key of hash h, one in keySample of those a decision
// counts (h>>38&(keySample-1) == 0), in seen, and reports whether the
// sketch should grow: the generation's keys outnumber one per sketchLoad
// pairs. A decision counts a key in the current generation with raise:
// the conservative update raises each of its counters to its estimate
// plus what it was allowed, no further.
func (k *keySketch) sampled(h uint64) bool {
	return k.seen.add(h) && !k.full && k.mask+1 < maxSketchBlocks && k.seen.estimate()*keySample >= k.room()
}

// raise makes the estimate in generation g of the key of slots sl at
// least v.
func (k *keySketch) raise(sl *keySlots, g uint64, v int64) {
	if v <= 0 || (g != k.gen && g != k.gen-1) {
		return
	}
	top := k.top()
	nv := min(uint64(v), top)
	sh := uint(g&1) << (k.shift & 7)
	cells := k.cells
	for i := range sketchProbes {
		c := &cells[sl.words[i]]
		at := (uint(sl.offs[i]) + sh) & 63
		if *c>>at&top < nv {
			*c = *c&^(top<<at) | nv<<at
		}
	}
}

// grown returns the sketch doubled: a key's block b moves to b or
// b+blocks, depending on one more bit of its hash; both take the old
// block's counters, so every estimate stays what it was.
func (k *keySketch) grown() keySketch {
	n := len(k.cells)
	g := *k
	g.cells = make([]uint64, 2*n)
	copy(g.cells, k.cells)
	copy(g.cells[n:], k.cells)
	g.mask = 2*k.mask + 1
	return g
}

// folded returns the sketch halved: block b takes, counter by counter,
// the larger of its own and block b+blocks/2's, which both of their keys
// now share, so that no estimate falls.
func (k *keySketch) folded() keySketch {
	half := len(k.cells) / 2
	f := *k
	f.cells = make([]uint64, half)
	w := uint(1) << k.shift
	top := k.top()
	for i := range f.cells {
		a, b := k.cells[i], k.cells[i+half]
		var c uint64
		for at := uint(0); at < 64; at += w {
			c |= max(a>>at&top, b>>at&top) << at
		}
		f.cells[i] = c
	}
	f.mask = k.mask / 2
	return f
}

// widened returns the sketch with counters 1<<shift bits wide, for a
// limit its counters are too narrow for, in as many blocks: each counter of
// a block takes the largest of the block's in its generation, so that no
// estimate falls (and the block's keys are estimated as its busiest until
// the generations pass). A saturated counter stays saturated.
func (k *keySketch) widened(shift uint) keySketch {
	n := *k
	n.shift = shift
	n.cells = make([]uint64, len(k.cells))
	w, nw := uint(1)<<k.shift, uint(1)<<shift
	top := k.top()
	for b := 0; b < len(k.cells); b += blockWords {
		var most [2]uint64
		for i := b; i < b+blockWords; i++ {
			for at := uint(0); at < 64; at += 2 * w {
				for g := range uint(2) {
					most[g] = max(most[g], k.cells[i]>>(at+g*w)&top)
				}
			}
		}
		for g := range most {
			if most[g] == top {
				most[g] = n.top()
			}
		}
		var word uint64
		for at := uint(0); at < 64; at += 2 * nw {
			word |= most[0]<<at | most[1]<<(at+nw)
		}
		for i := b; i < b+blockWords; i++ {
			n.cells[i] = word
		}
	}
	return n
}

// A keyCount counts distinct keys: a HyperLogLog of 256 registers, each
// the most leading zeros (and one) seen in the hashes of the keys it gets,
// whose estimate is within some 6.5% of the count (one standard error).
// It keeps the sum the estimate needs as its registers rise.
type keyCount struct {
	reg   [256]uint8
	sum   float64 // of 2^-r over the registers
	zeros int     // registers still 0
}

// newKeyCount returns a count of no keys.
func newKeyCount() keyCount { return keyCount{sum: 256, zeros: 256} }

// add counts the key of hash h, and reports whether a register rose: only
// then may the estimate have changed.
func (c *keyCount) add(h uint64) bool {
	x := h * 0x9E3779B97F4A7C15 // the shard's keys share their top bits
	r := uint8(bits.LeadingZeros64(x<<8|1<<7)) + 1
	i := x >> 56
	if r <= c.reg[i] {
		return false
	}
	if c.reg[i] == 0 {
		c.zeros--
	}
	c.sum += math.Ldexp(1, -int(r)) - math.Ldexp(1, -int(c.reg[i]))
	c.reg[i] = r
	return true
}

// estimate returns the number of distinct keys counted.
func (c *keyCount) estimate() float64 {
	const m = float64(len(c.reg))
	e := 0.7182 * m * m / c.sum // α for 256 registers
	if e < 2.5*m && c.zeros > 0 {
		e = m * math.Log(m/float64(c.zeros)) // few keys: linear counting
	}
	return e
}
