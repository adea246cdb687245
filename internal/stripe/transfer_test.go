package stripe

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// The cost of a cache line moving between cores, which BENCHMARKS.md's
// model for many cores is built on. Each benchmark runs two goroutines,
// one per processor on a machine of two or more.

// paddedWord is a word alone on its 128 bytes: two lines, as the adjacent
// line prefetcher pulls them in pairs.
type paddedWord struct {
	v atomic.Int64
	_ [120]byte
}

// runPair runs f(0) and f(1) on two goroutines, n operations each, and
// waits for both.
func runPair(b *testing.B, f func(who int, n int)) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs two processors")
	}
	var wg sync.WaitGroup
	b.ResetTimer()
	for who := range 2 {
		wg.Go(func() { f(who, b.N) })
	}
	wg.Wait()
}

// BenchmarkLineSharedAdd is two cores adding to one word: each add
// takes the line from the other core (ns/op is per add of one core).
func BenchmarkLineSharedAdd(b *testing.B) {
	var w paddedWord
	runPair(b, func(_, n int) {
		for range n {
			w.v.Add(1)
		}
	})
}

// BenchmarkLineOwnAdd is two cores each adding to a word on its own line:
// no line moves.
func BenchmarkLineOwnAdd(b *testing.B) {
	var w [2]paddedWord
	runPair(b, func(who, n int) {
		for range n {
			w[who].v.Add(1)
		}
	})
}

// BenchmarkLinePingPong hands one word back and forth: each core waits for
// the other's write before it writes. ns/op is one round trip, two
// transfers of the line. On a machine whose other work takes the other
// core, a goroutine waits for its turn: read the least of many runs.
func BenchmarkLinePingPong(b *testing.B) {
	var w paddedWord
	runPair(b, func(who, n int) {
		for i := range n {
			want := int64(2*i + who)
			for spins := 1; w.v.Load() != want; spins++ {
				if spins%1024 == 0 {
					runtime.Gosched() // the other goroutine is not running: let it
				}
			}
			w.v.Store(want + 1)
		}
	})
}

// work stands for the rest of a request between two writes of a shared
// word: some 40 ns of arithmetic on the goroutine's own stack.
//
//go:noinline
func work(x uint64) uint64 {
	for range 64 {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

var sink atomic.Uint64

// BenchmarkLineSharedAddSpaced is two cores each adding to one word between
// spells of other work, as requests write a shared word: the line has
// moved to the other core before most adds, so each costs a transfer.
func BenchmarkLineSharedAddSpaced(b *testing.B) {
	var w paddedWord
	runPair(b, func(who, n int) {
		x := uint64(who)
		for range n {
			w.v.Add(1)
			x = work(x)
		}
		sink.Add(x)
	})
}

// BenchmarkLineOwnAddSpaced is BenchmarkLineSharedAddSpaced with each core
// on a word of its own line: the difference is the transfers.
func BenchmarkLineOwnAddSpaced(b *testing.B) {
	var w [2]paddedWord
	runPair(b, func(who, n int) {
		x := uint64(who)
		for range n {
			w[who].v.Add(1)
			x = work(x)
		}
		sink.Add(x)
	})
}
