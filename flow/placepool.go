package flow

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/slidegate/slidegate/internal/stripe"
)

// A placePool is a limit of places in flight that scales with cores: the
// count of a Concurrency limiter.
//
// One word counting every place taken and given back would be written
// twice by every request, its cache line travelling between the cores on
// every acquisition and every release. An exact limit cannot lease places the way
// the QPS limiter does (a place is given back later, maybe on another
// processor), but it can keep free places near the processors that give
// them back. The pool word counts the places taken out of the pool: held by
// requests, or free in a processor's cell. A cell (one per processor, on
// cache lines of its own, made once goroutines take turns at the pool, see
// note, or a compare-and-swap on the pool word fails) holds free places
// that only a request can take:
//
//   - Acquiring n places takes them from the caller's cell if it holds n
//     (one compare-and-swap on its own line), else from the pool word while
//     taken + n <= limit, else from any other cell that holds n; for n > 1
//     it then sweeps every cell back into the pool and tries the pool once
//     more.
//   - Releasing n places puts them in the cell they were taken from (or
//     that of the processor that took them from the pool) while the cell
//     holds at most cellCap, and the pool holds no more than the limit
//     (taken <= limit); else it gives them back to the pool word.
//
// So a processor that acquires and releases in turn writes only its cell,
// and reads its index once per request. A request that ends on another
// processor writes its first processor's cell: one line's transfer.
//
// The invariant: held + Σ cells = taken, every place being either held by a
// request or free in one cell (the sweep's moment between a cell and the
// pool aside, when the places are neither). An acquisition from the pool
// keeps taken <= limit. Places are put in a cell only while taken <=
// limit. So, with the limit steady, held <= taken <= limit: no request is
// ever admitted over the limit. A lowered limit (set) must not let the
// cells' free places admit requests over it: the pool word carries a
// generation, which set moves on before it empties every cell back into the
// pool, each cell's word taking the new generation; a release puts places
// in a cell only with a compare-and-swap expecting the generation of the
// pool word it read taken from, so a release that read the pool before set
// gives its places to the pool once set has emptied its cell, and one whose
// places landed first had them swept. Once set returns, every free place in
// a cell was put there under the new limit. (The generation has 24 bits: a
// release would have to stall across 16 million sets to be fooled.)
//
// What it costs is refusals, never admissions: a request is refused when
// the pool is full and no cell holds its places, read one after another; a
// place released into a cell just read, or on its way between a cell and
// the pool in a sweep, is then not seen. Only concurrent releases can do
// that, and they make the next request's room; with one caller at a time
// the count is exact. Free places wait in cells, at most cellCap each (the
// limit / (2 × cells), at most maxLease), and a request that finds its own
// cell empty and the pool full takes them from the others.
type placePool struct {
	word  atomic.Uint64 // the pool: generation<<genShift | taken
	limit atomic.Int64
	cells atomic.Pointer[poolCells] // nil until the pool is contended
	// callers, until the cells are made, is the stack block of the last
	// goroutine that acquired<<8 | how many times it changed (at most 255):
	// see note.
	callers atomic.Uint64
	mu      sync.Mutex // serializes set
}

// poolCells are the cells of a placePool, one per processor:
// generation<<genShift | free places.
type poolCells struct {
	cells []poolCell
	mask  int
	shift uint // log2(2 × cells): limit>>shift is cellCap's share
}

// A poolCell is one processor's cell, alone on 128 bytes: the cells are one
// allocation of a multiple of 128 bytes, which the allocator aligns to
// them, and some processors fetch lines two by two.
type poolCell struct {
	word atomic.Uint64
	_    [120]byte
}

const (
	// genShift puts the generation, 24 bits, above 40 bits of count.
	genShift  = 40
	takenMask = 1<<genShift - 1
)

// newPlacePool returns a placePool of the given limit.
func newPlacePool(limit int64) *placePool {
	p := &placePool{}
	p.limit.Store(limit)
	return p
}

// init sets the limit of a placePool kept by value.
func (p *placePool) init(limit int64) { p.limit.Store(limit) }

// taken returns the places out of the pool: held, or free in a cell.
func (p *placePool) taken() int64 { return int64(p.word.Load() & takenMask) }

// held returns the places held by requests: exact with one caller at a
// time, otherwise a sum of words read one after another.
func (p *placePool) held() int64 {
	n := p.taken()
	if cs := p.cells.Load(); cs != nil {
		for i := range cs.cells {
			n -= int64(cs.cells[i].word.Load() & takenMask)
		}
	}
	return max(n, 0)
}

// cellCap is the most free places a cell keeps under limit: few enough
// that they are a small share of it, and none for a limit below the
// 2 × cells, where every place goes through the pool and the count is
// exact.
func (cs *poolCells) cellCap(limit int64) uint64 {
	return uint64(min(maxLease, limit>>cs.shift))
}

// growAfter is how many changes of the goroutine acquiring make the cells:
// a compare-and-swap on the pool word seldom fails, even with two cores
// writing it on every request (a core fetches its line to write it), so
// that contention alone would make them only by chance.
const growAfter = 64

// cellsFromProcs is the fewest processors (GOMAXPROCS) for which
// goroutines taking turns make the cells. A request through the cells
// costs about 12 ns more than one through the pool word alone (a
// processor's index read, its cell's line): measured on two processors,
// where a line's transfer cost about 2 ns, that is more than the transfers
// it saves (BENCHMARKS.md, "The last numbers: limiters that scale with
// cores"). The transfers grow with the processors, and the cells' cost does
// not.
const cellsFromProcs = 4

// note notes an acquisition by the goroutine whose stack holds sp, before
// the cells are made: a load and a compare while one goroutine acquires,
// a store when another does. Goroutines that take turns (which, with
// more than one processor, may run at once) make the cells after
// growAfter changes, on cellsFromProcs processors or more. A goroutine is told by the 2 KiB block of its stack
// that sp is in: the least a stack takes, aligned to its size (one
// goroutine acquiring from frames in different blocks looks like several,
// and only makes the cells early).
func (p *placePool) note(sp uintptr) {
	if p.callers.Load()>>8 != uint64(sp>>11) {
		p.noteChange(sp)
	}
}

// noteChange is note when the goroutine changed.
func (p *placePool) noteChange(sp uintptr) {
	n := min(p.callers.Load()&255+1, 255)
	p.callers.Store(uint64(sp>>11)<<8 | n)
	if n == growAfter && runtime.GOMAXPROCS(0) >= cellsFromProcs {
		p.grow()
	}
}

// acquireSlow takes n places, n >= 1, under the limit, once a first try
// on the pool word alone failed (the caller's, inline: see
// Concurrency.AcquireN) or the cells are made: from the caller's cell
// first. It returns the caller's processor's index, for the release.
func (p *placePool) acquireSlow(n int64) (bool, int) {
	if p.cells.Load() == nil {
		if p.fromPool(n) {
			return true, 0
		}
		if p.cells.Load() == nil {
			return false, 0
		}
	}
	h := stripe.Hint()
	return p.acquireOn(h, n), h
}

// acquireOn is acquire for the caller of processor hint.
func (p *placePool) acquireOn(hint int, n int64) bool {
	cs := p.cells.Load()
	if cs != nil {
		c := &cs.cells[hint&cs.mask].word
		for v := c.Load(); v&takenMask >= uint64(n); v = c.Load() {
			if c.CompareAndSwap(v, v-uint64(n)) {
				return true
			}
		}
	}
	if p.fromPool(n) {
		return true
	}
	if cs = p.cells.Load(); cs == nil {
		return false
	}
	for i := range cs.cells { // free places in the other processors' cells
		c := &cs.cells[(hint+i)&cs.mask].word
		for v := c.Load(); v&takenMask >= uint64(n); v = c.Load() {
			if c.CompareAndSwap(v, v-uint64(n)) {
				return true
			}
		}
	}
	if n == 1 {
		return false // every cell was empty
	}
	p.sweep(cs, false)
	return p.fromPool(n)
}

// fromPool takes n places from the pool word while taken + n is within the
// limit. A failed compare-and-swap is contention: it makes the cells.
func (p *placePool) fromPool(n int64) bool {
	for {
		w := p.word.Load()
		if int64(w&takenMask)+n > p.limit.Load() {
			return false
		}
		if p.word.CompareAndSwap(w, w+uint64(n)) {
			return true
		}
		p.grow()
	}
}

// releaseOn gives back n places, n >= 1, taken by the caller of processor
// hint: to that processor's cell, or the pool.
func (p *placePool) releaseOn(hint int, n int64) {
	if cs := p.cells.Load(); cs != nil {
		p.releaseTo(cs, hint, n)
		return
	}
	p.word.Add(-uint64(n))
}

// releaseTo gives back n places, n >= 1, to the cell of processor hint, or
// the pool: a release once the cells are made. The places go to the cell
// of the processor that took them (the permit keeps it), which reads no
// processor's index again and keeps each cell even with what it gives;
// until the cells are made, a release is an add to the pool word (the
// caller's, inline: see Permit.end).
//
//go:noinline
func (p *placePool) releaseTo(cs *poolCells, hint int, n int64) {
	w := p.word.Load()
	if !p.deposit(cs, hint, n, w, p.limit.Load()) {
		p.word.Add(-uint64(n))
	}
}

// deposit puts n released places in the cell of processor hint, and
// reports whether it did: only while the pool word w, read first, had
// taken within the limit lim, read next, and the cell holds w's
// generation, with room under cellCap.
func (p *placePool) deposit(cs *poolCells, hint int, n int64, w uint64, lim int64) bool {
	if int64(w&takenMask) > lim {
		return false
	}
	c := &cs.cells[hint&cs.mask].word
	gen, limit := w>>genShift, cs.cellCap(lim)
	for v := c.Load(); v>>genShift == gen && v&takenMask+uint64(n) <= limit; v = c.Load() {
		if c.CompareAndSwap(v, v+uint64(n)) {
			return true
		}
	}
	return false
}

// grow makes the cells, once: each empty, of the pool's generation. It
// holds mu, so that no set moves the generation on between its reading it
// and the cells being seen.
func (p *placePool) grow() {
	if p.cells.Load() != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cells.Load() != nil {
		return
	}
	n := stripe.Count()
	cs := &poolCells{cells: make([]poolCell, n), mask: n - 1, shift: uint(bits.Len(uint(2*n)) - 1)}
	gen := p.word.Load() >> genShift
	for i := range cs.cells {
		cs.cells[i].word.Store(gen << genShift)
	}
	p.cells.Store(cs)
}

// sweep empties every cell into the pool. With regen, each cell takes the
// pool's generation as it is then (never an older one, whatever sweeps run
// beside it); without, each keeps its own.
func (p *placePool) sweep(cs *poolCells, regen bool) {
	for i := range cs.cells {
		c := &cs.cells[i].word
		for {
			v := c.Load()
			next := v &^ takenMask
			if regen {
				next = p.word.Load() &^ takenMask
			}
			if v == next {
				break
			}
			if c.CompareAndSwap(v, next) {
				if free := v & takenMask; free > 0 {
					p.word.Add(-free)
				}
				break
			}
		}
	}
}

// set makes limit the limit. The places held count against it; the free
// places of the cells go back to the pool, so that none admits a request
// over a lowered limit once set returns.
func (p *placePool) set(limit int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limit.Store(limit)
	p.word.Add(1 << genShift)
	if cs := p.cells.Load(); cs != nil {
		p.sweep(cs, true)
	}
}
