package flow

import "sync/atomic"

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
// [Concurrency], [KeyedConcurrency], [Shedder] and [Adaptive] fill one
// through a pointer: a Permit must not be copied (go vet says so).
//
// The zero Permit holds nothing. A Permit may be filled again once done.
// A late Done of its earlier request then ends the new one: finish with a
// Permit before reusing it.
type Permit struct {
	from permitter    // the limiter that filled it; nil for the zero Permit
	n    atomic.Int64 // the places held; 0 once done
	of   taken
}

// taken is what a limiter needs to know of a permit to end it. It is passed
// by value, so that a Permit on the caller's stack stays there.
type taken struct {
	// start and lane are a Shedder's or an Adaptive limit's: when the
	// request was admitted, and its fair-share lane.
	start int64
	lane  uint8
	// pin and h are a KeyedConcurrency's: the entry of the key's
	// override (nil for the sketch), and the key's hash.
	pin *pinnedCount
	h   uint64
}

// A permitter is a limiter that fills Permits.
type permitter interface {
	// done ends a permit of n places with outcome o: at time now if timed,
	// or else at the limiter's clock, read only if it needs it.
	done(n int64, of taken, now int64, timed bool, o Outcome)
}

// Done ends the request with outcome o and gives its places back. A
// limiter that needs the time reads its clock. Only the first Done or
// DoneAt counts, from any goroutine.
func (p *Permit) Done(o Outcome) { p.end(0, false, o) }

// DoneAt is [Permit.Done] at time now, in nanoseconds on the limiter's
// clock.
func (p *Permit) DoneAt(now int64, o Outcome) { p.end(now, true, o) }

func (p *Permit) end(now int64, timed bool, o Outcome) {
	if p.from == nil {
		return
	}
	// The filling comes before any Done; the first swap takes the places.
	if n := p.n.Swap(0); n > 0 {
		p.from.done(n, p.of, now, timed, o)
	}
}

// fill makes p hold n places of from, and what ending them needs.
func (p *Permit) fill(from permitter, n int64, of taken) {
	p.from, p.of = from, of
	p.n.Store(n)
}
