package slidegate

import (
	"context"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/breakerhook"
	"github.com/slidegate/slidegate/window"
)

// A breakerRule puts a circuit breaker in front of a resource: a request
// that is allowed holds the breaker's promise, settled with the request's
// outcome when it exits, or as ignored if a later rule blocks it.
//
// A circuit of the default window whose strategy reads outcomes only reads
// its resource's counter instead of a window of its own (shared; see
// breaker's shared.go): one such circuit a resource, the resource's
// shared. Exit settles its promise once the resource has counted the
// request (exited), and tells it of the requests it did not allow.
type breakerRule struct {
	b      breaker.Breaker
	shared *breaker.Circuit // b, if it shares its resource's counter
}

// What breaker keeps out of its API for the guard (see internal/breakerhook).
// onTransition tells the guard of a circuit's changes of state as they
// happen, with the circuit's lock held. recordAt settles a promise with the
// outcome the guard has classified. retryAfterAt is an open circuit's rest
// of its timeout.
var (
	onTransition   = breakerhook.OnTransition.(func(func(*breaker.Circuit, breaker.Transition)) breaker.Option)
	recordAt       = breakerhook.RecordAt.(func(breaker.Promise, int64, breaker.Outcome))
	retryAfterAt   = breakerhook.RetryAfterAt.(func(*breaker.Circuit, int64) time.Duration)
	sharedOption   = breakerhook.Shared.(func() breaker.Option)
	share          = breakerhook.Share.(func(*breaker.Circuit, *window.Counter, func()))
	takeShared     = breakerhook.TakeShared.(func(breaker.Promise, int64, int64, breaker.Outcome, int64) (any, int))
	settleShared   = breakerhook.SettleShared.(func(breaker.Promise, any, int, int64, int64, breaker.Outcome, int64))
	uncounted      = breakerhook.Uncounted.(func(*breaker.Circuit, int64, bool, int64) any)
	uncountedAfter = breakerhook.UncountedAfter.(func(*breaker.Circuit, any, int64, bool, int64))
	unshare        = breakerhook.Unshare.(func(*breaker.Circuit))
	shares         = breakerhook.Shares.(func(*breaker.Circuit) bool)
	thresholdsOf   = breakerhook.Thresholds.(func(*breaker.Circuit, breaker.Strategy, ...breaker.Option) (any, error))
	setThresholds  = breakerhook.SetThresholds.(func(*breaker.Circuit, any))
)

func (*breakerRule) phase() phase { return phaseBreaker }

func (r *breakerRule) admit(_ context.Context, _ *entry, now int64, h *hold) flow.Decision {
	p, err := r.b.AllowAt(now)
	if err != nil {
		var d time.Duration
		if c, ok := r.b.(*breaker.Circuit); ok { // an SRE breaker blocks at random: no wait to tell
			d = retryAfterAt(c, now)
		}
		return flow.Decision{Reason: flow.BreakerOpen, RetryAfter: d}
	}
	h.promise, h.by = p, r
	return flow.Decision{Allowed: true}
}

func (r *breakerRule) release(h *hold, now int64, o breaker.Outcome, blocked bool) {
	switch {
	case blocked:
		o = breaker.Ignored // counted blocked by the resource: nothing to take away
	case r.shared != nil:
		return // settled by exited, once the resource has counted the request
	}
	recordAt(h.promise, now, o)
}

// sharedTake is what breakerRule.exiting did, for exited.
type sharedTake struct {
	w, u  any   // the windows taken from last: the promise's, and r's if not its
	held  int32 // the index in the entry's holds of the shared promise, or -1
	add   int8  // what exited adds (see breaker's takeShared)
	other bool  // whether r took the request away: it did not allow it
}

// exiting tells r, its resource's shared circuit, of the request of entry
// e before the resource counts it: it ended at time now, served until time
// served, with outcome o. What a circuit will not count of it is taken
// away first, so that a read in between counts less, never more. The
// request holds the promise of at most one shared circuit (one a resource
// in each set of rules): r's, or, allowed under rules no longer in force,
// another's, settled too; r takes away a request it did not allow.
func (r *breakerRule) exiting(e *entry, now, served int64, o breaker.Outcome) (t sharedTake) {
	t.held = -1
	for i := range e.held {
		h := &e.held[i]
		if b, ok := h.by.(*breakerRule); ok && b.shared != nil {
			var add int
			t.held = int32(i)
			t.w, add = takeShared(h.promise, served, now, o, e.count)
			t.add = int8(add)
			if b == r {
				return t
			}
			break
		}
	}
	t.other = true
	t.u = uncounted(r.shared, now, o != breaker.Success, e.count)
	return t
}

// exited ends exiting once the resource has counted the request. Only
// what t adds needs it, or a window published since exiting that reads
// the bucket of now: one whose closing read the clock before now, so
// only where now was given.
func (r *breakerRule) exited(e *entry, t sharedTake, now, served int64, o breaker.Outcome) {
	if t.held >= 0 {
		settleShared(e.held[t.held].promise, t.w, int(t.add), served, now, o, e.count)
	}
	if t.other {
		uncountedAfter(r.shared, t.u, now, o != breaker.Success, e.count)
	}
}

// bindShared gives the first circuit of checks that shares its resource's
// counter that counter, res's, and returns its rule; a circuit that reads
// it already comes first. The others are given windows of their own. It
// returns nil if no circuit of checks shares.
func bindShared(checks []check, res *resource) *breakerRule {
	var first *breakerRule
	for _, ch := range checks {
		if b, ok := ch.rule.(*breakerRule); ok && b.shared != nil && shares(b.shared) {
			first = b // taken over from the rules in force
			break
		}
	}
	for _, ch := range checks {
		b, ok := ch.rule.(*breakerRule)
		switch {
		case !ok || b.shared == nil || b == first:
		case first == nil:
			first = b
		default: // new, so not in force: none reads it yet
			unshare(b.shared)
			b.shared = nil
		}
	}
	// A circuit taken over that the resource tells already needs nothing:
	// it has its counter.
	if first != nil && res.shared.Load() != first {
		share(first.shared, res.stats, func() { res.shared.Store(first) })
	}
	return first
}
