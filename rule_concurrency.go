package slidegate

import (
	"context"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// ConcurrencyRule allows at most Limit requests in flight
// ([flow.Concurrency]).
const ConcurrencyRule FlowType = "concurrency"

// concurrencyKind is the limit of requests in flight, of all keys or of
// each key.
var concurrencyKind = kind{
	Kind:   rulekind.Kind{Name: string(ConcurrencyRule)},
	fields: []string{"limit", "per_key"},
	check: func(f *FlowRule) []kindProblem {
		if f.PerKey && f.Cluster {
			return []kindProblem{{"cluster", "a concurrency rule is not cluster-wide"}}
		}
		return nil
	},
	build: buildConcurrency,
}

// buildConcurrency makes a concurrency rule's enforcer.
func buildConcurrency(f FlowRule, on builder) (rule, error) {
	switch {
	case f.PerKey && on.judging:
		return nil, nil // its limit is all it has, and checkKeys has judged it
	case f.PerKey:
		l, err := flow.NewConcurrency(flow.ConcurrencySettings{Limit: f.Limit, PerKey: true, Overrides: f.Overrides, KeyMemory: on.keys})
		if err != nil {
			return nil, err
		}
		return &keyConcurrencyRule{c: l}, nil
	}
	l, err := flow.NewConcurrency(flow.ConcurrencySettings{Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	return &concurrencyRule{c: l}, nil
}

// A concurrencyRule bounds the requests in flight (flow.Concurrency): a
// request holds its places until it exits, or until a later rule blocks it.
type concurrencyRule struct{ c *flow.Concurrency }

func (*concurrencyRule) phase() phase { return phaseConcurrency }

func (r *concurrencyRule) admit(_ context.Context, e *entry, _ int64, h *hold) flow.Decision {
	d := r.c.AcquireN(&h.permit, "", e.count)
	if d.Allowed {
		h.by = r
	}
	return d
}

func (r *concurrencyRule) release(h *hold, now int64, o breaker.Outcome, blocked bool) {
	h.permit.DoneAt(now, outcome(h, o, blocked))
}

func (*concurrencyRule) resizable() bool              { return true }
func (r *concurrencyRule) setLimit(limit int64) error { return r.c.Set(limit, nil) }

// A keyConcurrencyRule bounds each key's requests in flight (a
// flow.Concurrency per key), as concurrencyRule does for the whole
// resource.
type keyConcurrencyRule struct{ c *flow.Concurrency }

func (*keyConcurrencyRule) phase() phase { return phaseConcurrency }

func (r *keyConcurrencyRule) admit(_ context.Context, e *entry, _ int64, h *hold) flow.Decision {
	d := r.c.AcquireN(&h.permit, e.key, e.count)
	if d.Allowed {
		h.by = r
	}
	return d
}

func (r *keyConcurrencyRule) release(h *hold, now int64, o breaker.Outcome, blocked bool) {
	h.permit.DoneAt(now, outcome(h, o, blocked))
}

func (r *keyConcurrencyRule) setKeyLimits(limit int64, overrides map[string]int64) error {
	return r.c.Set(limit, overrides)
}
