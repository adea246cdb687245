package slidegate

import (
	"context"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
)

// A throttleRule spaces requests evenly (flow.Throttle): a request takes the
// next free place and waits for it, unless that is further away than the
// rule's MaxWait. A request that a later rule blocks gives its place back.
type throttleRule struct {
	t    *flow.Throttle
	warm bool // it warms up: its limit cannot change in place
}

func (*throttleRule) phase() phase { return phaseThrottle }

func (r *throttleRule) admit(_ context.Context, e *entry, now int64, h *hold) flow.Decision {
	h.place = r.t.ReserveNAt(now, "", e.count)
	if h.place.Allowed {
		h.by = r
	}
	return h.place.Decision
}

func (r *throttleRule) release(h *hold, now int64, _ breaker.Outcome, blocked bool) {
	if blocked {
		h.place.CancelAt(now)
	}
}

func (r *throttleRule) resizable() bool            { return !r.warm }
func (r *throttleRule) setLimit(limit int64) error { return r.t.Set(limit, nil) }

// A keyThrottleRule spaces each key's requests evenly (a flow.Throttle
// per key), as throttleRule does for the whole resource.
type keyThrottleRule struct{ t *flow.Throttle }

func (*keyThrottleRule) phase() phase { return phaseThrottle }

func (r *keyThrottleRule) admit(_ context.Context, e *entry, now int64, h *hold) flow.Decision {
	h.place = r.t.ReserveNAt(now, e.key, e.count)
	if h.place.Allowed {
		h.by = r
	}
	return h.place.Decision
}

func (r *keyThrottleRule) release(h *hold, now int64, _ breaker.Outcome, blocked bool) {
	if blocked {
		h.place.CancelAt(now)
	}
}

func (r *keyThrottleRule) setKeyLimits(limit int64, overrides map[string]int64) error {
	return r.t.Set(limit, overrides)
}
