package flow

import (
	"sync/atomic"
	"unsafe"
)

// An Outcome says how a request that held a [Permit] ended: what the
// limiter that gave the permit learns from it.
type Outcome uint8

const (
	// Succeeded: the request ran and did its job. Its response time is a
	// sample of the service's.
	Succeeded Outcome = iota
	// Failed: the request ran and failed for reasons of its own, such as
	// a bad argument. A [Shedder] counts it as completed; an [Adaptive]
	// limit takes no sample from it.
	Failed
	// FailedOverloaded: the request failed for want of capacity. It timed
	// out, or the service said it was overloaded. An [Adaptive] limit
	// backs off; a [Shedder] counts it as completed.
	FailedOverloaded
	// Ignored: the request never ran (a later limit refused it), or its
	// caller gave up. It says nothing of the service.
	Ignored
)

// A Permit holds the places a limiter gave a request until [Permit.Done].
// [Concurrency], [Shedder] and [Adaptive] fill one
// through a pointer: a Permit must not be copied (go vet says so).
//
// The zero Permit holds nothing. A Permit may be filled again once done.
// A late Done of its earlier request then ends the new one: finish with a
// Permit before reusing it.
type Permit struct {
	_ noCopy
	// n is the places held, 0 once done: written by the acquisition that
	// fills the permit, which comes before any Done of it, and swapped for
	// 0 by the first Done.
	n int64
	// from is the limiter that filled the permit, a pointer to the type
	// kind names, converted back only to that type. An interface would
	// cost the permit its place on the caller's stack (a pointer passed to
	// an interface's method escapes), and Done a call that is never
	// inlined; a field per limiter, four pointer stores per acquisition.
	from unsafe.Pointer
	kind permitKind
	lane uint8 // a Shedder's or an Adaptive limit's: the request's fair-share lane
	// cell is the processor whose cell of a place pool the places were
	// taken from or for (see placePool), to give them back to.
	cell uint8
	// start is a Shedder's or an Adaptive limit's: when the request was
	// admitted.
	start int64
	// pin and h are a Concurrency's per key: the entry of the key's override
	// (nil for the sketch), and the key's hash.
	pin *pinnedCount
	h   uint64
}

// A permitKind says which limiter filled a Permit.
type permitKind uint8

const (
	byConcurrency permitKind = iota + 1
	byKeyedConcurrency
	byShedder
	byAdaptive
)

// noCopy makes go vet's copylocks check refuse copies of the struct that
// holds it.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// Done ends the request with outcome o and gives its places back. A
// limiter that needs the time reads its clock. Only the first Done or
// DoneAt counts, from any goroutine.
func (p *Permit) Done(o Outcome) { p.end(0, false, o) }

// DoneAt is [Permit.Done] at time now, in nanoseconds on the limiter's
// clock.
func (p *Permit) DoneAt(now int64, o Outcome) { p.end(now, true, o) }

func (p *Permit) end(now int64, timed bool, o Outcome) {
	n := atomic.SwapInt64(&p.n, 0) // the first swap takes the places
	if n <= 0 {
		return
	}
	switch p.kind {
	case byConcurrency:
		if pl := &(*Concurrency)(p.from).places; pl.cells.Load() == nil {
			pl.word.Add(-uint64(n)) // until the pool is contended (placePool.releaseTo)
		} else {
			pl.releaseTo(pl.cells.Load(), int(p.cell), n)
		}
	case byKeyedConcurrency:
		(*keyConcurrency)(p.from).done(p, n)
	case byShedder:
		(*Shedder)(p.from).done(p, now, timed, o)
	case byAdaptive:
		(*Adaptive)(p.from).done(p, now, timed, o)
	}
}

// fill makes p hold n places of limiter from, of the given kind.
func (p *Permit) fill(kind permitKind, from unsafe.Pointer, n int64) {
	p.kind, p.from, p.n = kind, from, n
}
