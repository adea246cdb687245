package slidegate

import (
	"context"
	"unsafe"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
)

// A rule is a rule in force bound to what enforces it: a limiter, a breaker,
// another resource's statistics. Enter asks each rule of a resource in turn
// whether a request may go; a rule that allows it may give it
// something to hold until it exits (a concurrency permit, a throttle's
// place, a breaker's promise), which the rule takes back then, or at once if
// a later rule blocks the request.
//
// A rule's state (its limiter's counts, its breaker's state) outlives a
// reload that keeps the rule: the new rules in force take over the same
// rule value, so a rule must not hold what differs between two sets of rules
// (its place in them). A rule that can also take a new limit in place
// implements resizer.
//
// A kind of flow rule makes its rule in its kind's build (see kind), in
// the file of the kind; a breaker rule is made by buildBreaker.
type rule interface {
	// phase places the rule in the order Enter asks a resource's rules.
	phase() phase
	// admit decides whether the request of entry e, arriving at time now,
	// is allowed. A rule that gives the request something to hold fills h
	// and sets h.by to itself. The Decision's Reason says why not, and
	// its Wait how long the request must wait before it goes on.
	admit(ctx context.Context, e *entry, now int64, h *hold) flow.Decision
	// release takes back what h holds: at time now, when the request ends
	// with outcome o, or when a later rule blocks it (blocked).
	release(h *hold, now int64, o breaker.Outcome, blocked bool)
}

// A resizer is a rule that can change its limit in place, keeping its
// counts: a new rule that differs from it only in its limit takes it over.
type resizer interface {
	rule
	// resizable reports whether the rule can change its limit now: some
	// rules of a kind can (a QPS rule), others not (one that warms up).
	resizable() bool
	// setLimit changes the limit. It is called only once the rules that
	// take the rule over are sure to be put in force.
	setLimit(limit int64) error
}

// A hold is what an allowed request holds of one rule until it exits.
// The rule that gave it (by) reads only its own field. Holds are written on
// every request by the processor serving it, so they fill whole cache
// lines (a multiple of holdLine bytes): the holds of two entries never
// share one. A kind that gives a request something new to hold adds its
// field to holdState; the padding follows.
type hold struct {
	by rule
	holdState
	// An interface is two words whatever its methods (rule's would make
	// the size a cycle).
	_ [(holdLine - (unsafe.Sizeof(any(nil))+unsafe.Sizeof(holdState{}))%holdLine) % holdLine]byte
}

// holdLine is the size holds are padded to a multiple of: two cache lines,
// the pair some processors fetch together, as an entry fills.
const holdLine = 128

// holdState is what a hold holds, but the rule that gave it.
type holdState struct {
	permit  flow.Permit      // a concurrency, shed or adaptive rule's, per key or not
	place   flow.Reservation // a throttle's, per key or not
	promise breaker.Promise  // a breaker's
	grant   flow.Grant       // a QPS rule's, given back if a later rule blocks the request
	// overloaded says, as the request exits, whether it ended overloaded
	// (IsOverloaded): set by Exit for every hold before release.
	overloaded bool
	shadow     bool // the rule that holds it is in shadow
	// undoOnly says that the rule takes back nothing when the request
	// exits, only when a later rule blocks it (a QPS rule's grant): Exit
	// skips the hold.
	undoOnly bool
}

// A phase is a rule's place in the order Enter asks a resource's rules: the
// rules whose admission can be taken back come first, so that a request
// that a later rule blocks gives back what it took; the rules whose
// admission counts for good come after.
type phase uint8

const (
	phaseBreaker     phase = iota // a promise, settled as ignored if blocked later
	phaseConcurrency              // a permit, released
	phaseThrottle                 // a place, cancelled
	phaseRef                      // reads another resource's statistics: takes nothing
	phaseQPS                      // counts the request, given back if a later rule blocks it
	phaseKeyed                    // the per-key QPS rules, decided together, counting for good
	// Last: a round trip, and a permit other instances could have used,
	// not to be spent on a request a local rule blocks.
	phaseCluster
)

// outcome is what the end of a request tells the limiter whose permit it
// held: a request that a later rule blocked never ran; one that ended
// overloaded failed for want of capacity; one that ended with
// context.Canceled says nothing of the service.
func outcome(h *hold, o breaker.Outcome, blocked bool) flow.Outcome {
	switch {
	case blocked:
		return flow.Ignored
	case h.overloaded:
		return flow.FailedOverloaded
	case o == breaker.Success:
		return flow.Succeeded
	case o == breaker.Failure:
		return flow.Failed
	}
	return flow.Ignored
}

// holdsNothing is the release of the rules that give a request nothing to
// hold.
type holdsNothing struct{}

func (holdsNothing) release(*hold, int64, breaker.Outcome, bool) {}
