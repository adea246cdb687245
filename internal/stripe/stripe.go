// Package stripe chooses the stripe of a striped statistic for the calling
// goroutine, the way Java's LongAdder spreads its cells, but by processor
// rather than by thread: a Go program runs at most GOMAXPROCS goroutines at
// once, one per P (the scheduler's processor), so cells indexed by P are
// never written from two cores at the same moment unless GOMAXPROCS grows
// past the number of cells.
//
// Hint reads the P's index as sync.Pool does, through runtime.procPin, which
// the runtime keeps linkable on purpose (go.dev/issue/67401). Nothing stays
// pinned: the index is a hint, read and released at once. A goroutine moved
// to another P between reading it and writing its cell only writes a cell
// another core may be writing too, which costs a retried compare-and-swap,
// never a wrong count: every cell is written atomically.
package stripe

import (
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe" // for go:linkname, and to align stripes to cache lines
)

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// Hint returns the index of the P the caller runs on: a number in
// [0, GOMAXPROCS), stable while the goroutine stays on that P.
func Hint() int {
	p := procPin()
	procUnpin()
	return p
}

// Max is the most stripes a statistic is split into: past it, processors
// share stripes.
const Max = 64

// Count returns how many stripes a statistic that has found contention
// should have: GOMAXPROCS rounded up to a power of two, so that a mask of
// Hint picks one, at least 2 and at most Max.
func Count() int {
	n := min(max(runtime.GOMAXPROCS(0), 2), Max)
	return 1 << bits.Len(uint(n-1))
}

// lineWords is the words of one cache line: 64 bytes on the processors Go
// runs on, 128 on some, where two lines are fetched together; a stripe
// aligned to 64 bytes and padded to 128 shares no line with anything.
const lineWords = 128 / 8

// Words returns n atomic words for one stripe, on cache lines no other
// object uses: the allocator places small objects side by side, and the
// stripes of a structure, made together, would otherwise share the lines at
// their edges, two cores then writing one line again (false sharing). It
// spends up to 2 × 128 bytes more than n words.
func Words(n int) []atomic.Uint64 {
	w := make([]atomic.Uint64, n+2*lineWords)
	// Start on the first 128-byte boundary (at most lineWords-1 words in);
	// the padding left after the n words covers the rest of the last line.
	off := (lineWords - int(uintptr(unsafe.Pointer(&w[0]))/8%lineWords)) % lineWords
	return w[off : off+n : off+n]
}
