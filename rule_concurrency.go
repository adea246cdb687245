package slidegate

import (
	"context"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
)

// A concurrencyRule bounds the requests in flight (flow.Concurrency): a
// request holds its places until it exits, or until a later rule blocks it.
type concurrencyRule struct{ c *flow.Concurrency }

func (*concurrencyRule) phase() phase { return phaseConcurrency }

func (r *concurrencyRule) admit(_ context.Context, e *entry, _ int64, h *hold) flow.Decision {
	d := r.c.AcquireN(&h.permit, e.count)
	if d.Allowed {
		h.by = r
	}
	return d
}

func (r *concurrencyRule) release(h *hold, _ int64, _ breaker.Outcome, _ bool) { h.permit.Release() }

func (*concurrencyRule) resizable() bool              { return true }
func (r *concurrencyRule) setLimit(limit int64) error { return r.c.SetLimit(limit) }
