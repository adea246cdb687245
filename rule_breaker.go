package slidegate

import (
	"context"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/breakerhook"
)

// A breakerRule puts a circuit breaker in front of a resource: a request
// that is allowed holds the breaker's promise, settled with the request's
// outcome when it exits, or as ignored if a later rule blocks it.
type breakerRule struct{ b breaker.Breaker }

// What breaker keeps out of its API for the guard (see internal/breakerhook).
// onTransition tells the guard of a circuit's changes of state as they
// happen, with the circuit's lock held. recordAt settles a promise with the
// outcome the guard has classified. retryAfterAt is an open circuit's rest
// of its timeout.
var (
	onTransition = breakerhook.OnTransition.(func(func(*breaker.Circuit, breaker.Transition)) breaker.Option)
	recordAt     = breakerhook.RecordAt.(func(breaker.Promise, int64, breaker.Outcome))
	retryAfterAt = breakerhook.RetryAfterAt.(func(*breaker.Circuit, int64) time.Duration)
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
	if blocked {
		o = breaker.Ignored
	}
	recordAt(h.promise, now, o)
}
