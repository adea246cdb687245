package breaker

import (
	"runtime"
	"sync/atomic"

	"github.com/slidegate/slidegate/internal/breakerlimits"
	"github.com/slidegate/slidegate/internal/tagword"
	"github.com/slidegate/slidegate/internal/timegrid"
	"github.com/slidegate/slidegate/window"
)

// takenSlots numbers the slots of a taken: bucket b lives in slot b mod n.
var takenSlots = timegrid.NewSlots(breakerlimits.DefaultCircuitBuckets)

// taken is what a shared circuit takes away from its resource's counts
// (x in the doc of shared.go): the Succeeded and Failed sums of the
// default window, kept inline in closedWindow so that the first request
// taken away allocates nothing. It answers as a window.Counter of the
// same window given the same adds would, read with outcomesAfter.
//
// It is the window package's ring, one stripe, cut to its use. Buckets
// are numbered by sharedGrid, as the ring numbers its own (the same
// width and spare), and bucket b lives in slot b mod n. A slot is a state
// word and two data words, by Outcome. The state word holds b<<1 for the
// bucket the slot holds, with the low bit set while a writer resets the
// slot for b. A data word holds a value with its bucket's tag, packed by
// internal/tagword, as the window package packs a word.
//
// The protocol:
//
//   - A writer for bucket b that finds the state word older moves it to
//     b<<1|1 with a compare-and-swap; only the winner stores the empty
//     value with b's tag into both data words, then b<<1. A reset is done
//     once for each bucket, as the state word only grows.
//   - A writer that finds b<<1 adds to its data word with a
//     compare-and-swap whose expected word carries b's tag: if the slot
//     moved on in between, the swap fails and the writer looks again, so
//     no value lands in a later bucket, and none is added twice.
//   - A writer that finds a later bucket drops its value: that bucket has
//     left every window a later time reads, as it has in the resource's
//     ring. One that finds a reset under way yields until it ends.
//   - A reader counts a bucket's word only if the state word reads b<<1
//     and the word carries b's tag; otherwise the bucket is empty to it.
type taken struct {
	slots [breakerlimits.DefaultCircuitBuckets]takenSlot
}

// takenSlot is one slot of a taken: its state word and its data words,
// by Outcome.
type takenSlot struct {
	state atomic.Uint64
	word  [2]atomic.Uint64
}

// takenWord is the data word of event e, Succeeded or Failed.
func takenWord(e window.Event) Outcome {
	if e == window.Failed {
		return Failure
	}
	return Success
}

// addAt adds v of event e, Succeeded or Failed, to the bucket holding time
// at, following the protocol on taken.
func (t *taken) addAt(at int64, e window.Event, v int64) {
	v = min(max(v, tagword.Min), tagword.Max)
	b := sharedGrid.Index(at)
	sl := &t.slots[takenSlots.Of(b)]
	word := &sl.word[takenWord(e)]
	want := b << 1
	for {
		st := sl.state.Load()
		if st == want {
			old := word.Load()
			if !tagword.Belongs(old, b) {
				continue // the slot moved on after the state was read
			}
			nv := min(max(tagword.Value(old)+v, tagword.Min), tagword.Max)
			if v == 0 || word.CompareAndSwap(old, tagword.Pack(b, nv)) {
				return
			}
			continue
		}
		switch {
		case st>>1 > b:
			return // a later bucket holds the slot: b has left the window
		case st&1 != 0:
			runtime.Gosched() // a reset, a few stores, is under way
		case sl.state.CompareAndSwap(st, want|1):
			sl.word[Success].Store(tagword.Pack(b, 0))
			sl.word[Failure].Store(tagword.Pack(b, 0))
			sl.state.Store(want)
		}
	}
}

// sumsAfter returns Succeeded and Failed summed over the buckets of the
// window at time now that come after the bucket holding time from: what
// outcomesAfter returns of a window.Counter given the same adds.
func (t *taken) sumsAfter(now, from int64) (succeeded, failed int64) {
	last := sharedGrid.Index(now)
	first := last - (breakerlimits.DefaultCircuitBuckets - 1)
	if after := sharedGrid.Index(from) + 1; after > first {
		first = after
	}
	for b := first; b <= last; b++ {
		sl := &t.slots[takenSlots.Of(b)]
		if sl.state.Load() != b<<1 {
			continue
		}
		if w := sl.word[Success].Load(); tagword.Belongs(w, b) {
			succeeded += tagword.Value(w)
		}
		if w := sl.word[Failure].Load(); tagword.Belongs(w, b) {
			failed += tagword.Value(w)
		}
	}
	return succeeded, failed
}
