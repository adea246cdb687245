package flow

import (
	"runtime"
	"sync/atomic"

	"github.com/slidegate/slidegate/internal/flowlimits"
)

// A KeyMemory is a budget of heap for the per-key state of keyed limiters.
// Their settings share it through their KeyMemory field. A [KeyedQPS] draws
// its sketches and hot entries from it. A [Concurrency] and a [Throttle]
// per key draw their sketches, each at most a sixteenth of the
// budget.
//
// A limiter that finds the budget spent stops growing. It never lets a key
// over its limit for that; it only refuses some keys early. Each limiter
// keeps a small floor whatever the budget, so what they hold together may pass the
// limit by the floors. A limiter no longer used gives its bytes back once the garbage
// collector finds it so.
//
// A KeyMemory is safe for concurrent use. The zero KeyMemory has a limit of
// 0: its limiters keep their floors only.
type KeyMemory struct {
	limit int64
	used  atomic.Int64
}

// NewKeyMemory returns a budget of limit bytes, which must be at least 0.
func NewKeyMemory(limit int64) (*KeyMemory, error) {
	if limit < 0 {
		return nil, &configError{Pkg: "flow", Field: "key_memory", Value: limit, Detail: "must be at least 0"}
	}
	return &KeyMemory{limit: limit}, nil
}

// inUse returns the bytes its limiters hold now.
func (m *KeyMemory) inUse() int64 { return m.used.Load() }

// memoryOr returns m, or a new budget of flowlimits.DefaultKeyMemory for nil.
func memoryOr(m *KeyMemory) *KeyMemory {
	if m != nil {
		return m
	}
	return &KeyMemory{limit: flowlimits.DefaultKeyMemory}
}

// A keyBytes is what one limiter holds of a budget. It is apart from the
// limiter, so that a cleanup attached to the limiter can give it back.
type keyBytes struct {
	mem  *KeyMemory
	held atomic.Int64
}

// newKeyBytes returns the account of owner in mem; the bytes it holds go
// back to mem when owner is collected.
func newKeyBytes[T any](owner *T, mem *KeyMemory) *keyBytes {
	b := &keyBytes{mem: mem}
	runtime.AddCleanup(owner, func(b *keyBytes) { b.mem.used.Add(-b.held.Swap(0)) }, b)
	return b
}

// grow takes n more bytes if the budget has them, and reports whether it
// did.
func (b *keyBytes) grow(n int64) bool {
	for {
		u := b.mem.used.Load()
		if u+n > b.mem.limit {
			return false
		}
		if b.mem.used.CompareAndSwap(u, u+n) {
			b.held.Add(n)
			return true
		}
	}
}

// take takes n more bytes, whatever the budget has: a floor.
func (b *keyBytes) take(n int64) {
	b.mem.used.Add(n)
	b.held.Add(n)
}

// give gives n bytes back.
func (b *keyBytes) give(n int64) {
	b.mem.used.Add(-n)
	b.held.Add(-n)
}

// drawFixed returns how many blocks, of blockBytes each, a keyed limiter of
// fixed size gets from mem for the want (a power of two) it asks: halved
// until they take at most a sixteenth of mem's limit, so that a few such
// limiters leave room for the others, and mem has them; and at least
// least, taken whatever mem has; want without mem. The caller ties what it
// took to itself with giveBackWhenGone.
func drawFixed(mem *KeyMemory, want, least, blockBytes int) int {
	if mem == nil {
		return want
	}
	b := keyBytes{mem: mem}
	for n := want; n > least; n /= 2 {
		if int64(n*blockBytes) <= mem.limit/16 && b.grow(int64(n*blockBytes)) {
			return n
		}
	}
	b.take(int64(least * blockBytes))
	return least
}

// giveBackWhenGone gives the bytes owner drew from mem (drawFixed) back
// once owner is collected.
func giveBackWhenGone[T any](owner *T, mem *KeyMemory, bytes int) {
	if mem != nil {
		runtime.AddCleanup(owner, func(n int64) { mem.used.Add(-n) }, int64(bytes))
	}
}
