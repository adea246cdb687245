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
	_ "unsafe" // for go:linkname
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
