package slidegate

import (
	"context"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// ThrottleRule spaces requests evenly, Limit per Interval: a request waits
// for its place, and is blocked if that is more than MaxWait away
// ([flow.Throttle]). A limit of 0 blocks every request.
const ThrottleRule FlowType = "throttle"

// throttleKind is the throttle, of all keys or of each key.
var throttleKind = kind{
	Kind:   rulekind.Kind{Name: string(ThrottleRule)},
	fields: []string{"limit", "interval", "buckets", "per_key", "max_wait", "warm_up", "cold_factor"},
	normal: func(f *FlowRule) { f.Interval = Duration(f.interval()) },
	check: func(f *FlowRule) (ps []kindProblem) {
		if f.WarmUp == 0 && f.Buckets != 0 {
			ps = append(ps, kindProblem{"buckets", "a throttle's buckets divide its warm-up: it has none (warm_up)"})
		}
		if f.PerKey && f.Limit == 0 {
			ps = append(ps, kindProblem{"limit", "0: a per-key throttle paces at least 1 request per interval; block keys with overrides of 0"})
		}
		return ps
	},
	build: buildThrottle,
}

// buildThrottle makes a throttle's enforcer. A throttle of limit 0 has no
// places at all: it is a QPS limit of 0, which blocks every request, and
// which a new limit makes a throttle again (it does not change in place).
func buildThrottle(f FlowRule, on builder) (rule, error) {
	switch {
	case f.PerKey && on.judging:
		// The same pace as a throttle of all keys, and no table of keys.
		_, err := flow.NewThrottle(flow.ThrottleSettings{Limit: f.Limit, Interval: f.interval(), MaxWait: time.Duration(f.MaxWait)})
		return nil, err
	case f.PerKey:
		t, err := flow.NewThrottle(flow.ThrottleSettings{Limit: f.Limit, Interval: f.interval(), MaxWait: time.Duration(f.MaxWait),
			PerKey: true, Overrides: f.Overrides, KeyMemory: on.keys, Clock: on.clock})
		if err != nil {
			return nil, err
		}
		return &keyThrottleRule{t: t}, nil
	case f.Limit == 0:
		return newQPSRule(f, on, true)
	}
	var warmUp time.Duration
	var cold float64
	if f.WarmUp > 0 {
		warmUp, cold = time.Duration(f.WarmUp), f.ColdFactor
	}
	t, err := flow.NewThrottle(flow.ThrottleSettings{Limit: f.Limit, Interval: f.interval(), MaxWait: time.Duration(f.MaxWait),
		Buckets: max(f.Buckets, 0), WarmUp: warmUp, ColdFactor: cold, Clock: on.clock})
	if err != nil {
		return nil, err
	}
	return &throttleRule{t: t, warm: f.WarmUp > 0}, nil
}

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
