package slidegate

import (
	"context"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/breakerhook"
)

// A breakerRule puts a circuit breaker in front of a resource: a request
// that is allowed holds the breaker's promise, settled with the request's
// outcome when it exits, or as ignored if a later rule blocks it.
type breakerRule struct{ b breaker.Breaker }

// onTransition is the option that tells the guard of a circuit's changes of
// state as they happen, with the circuit's lock held (breaker keeps it out
// of its API: see internal/breakerhook).
var onTransition = breakerhook.OnTransition.(func(func(*breaker.Circuit, breaker.Transition)) breaker.Option)

func (*breakerRule) phase() phase { return phaseBreaker }

func (r *breakerRule) admit(_ context.Context, _ *entry, now int64, h *hold) flow.Decision {
	p, err := r.b.AllowAt(now)
	if err != nil {
		return flow.Decision{Reason: flow.BreakerOpen, RetryAfter: r.b.RetryAfterAt(now)}
	}
	h.promise, h.by = p, r
	return flow.Decision{Allowed: true}
}

func (r *breakerRule) release(h *hold, now int64, o breaker.Outcome, blocked bool) {
	if blocked {
		o = breaker.Ignored
	}
	h.promise.RecordAt(now, o)
}
