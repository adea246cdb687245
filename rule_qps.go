package slidegate

import (
	"context"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
)

// A qpsRule blocks the requests over a QPS limit at once: flow.QPS, the exact
// sliding window, counting every request it allows, and giving back the
// place of one that a later rule blocks.
type qpsRule struct {
	q *flow.QPS
	// fixed: the limit cannot change in place, for the limiter warms up,
	// or stands for a throttle of limit 0, which a new limit makes a
	// throttle.
	fixed bool
}

func (*qpsRule) phase() phase { return phaseQPS }

func (r *qpsRule) admit(_ context.Context, e *entry, now int64, h *hold) flow.Decision {
	d, g := r.q.GrantNAt(now, e.count)
	if d.Allowed {
		h.by, h.grant = r, g
	}
	return d
}

func (r *qpsRule) release(h *hold, _ int64, _ breaker.Outcome, blocked bool) {
	if blocked {
		r.q.GiveBack(h.grant)
	}
}

func (r *qpsRule) resizable() bool            { return !r.fixed }
func (r *qpsRule) setLimit(limit int64) error { return r.q.SetLimit(limit) }

// A borrowingRule is a qpsRule that lends a prioritized request
// (WithPriority) over its limit a place in its next bucket, and makes it
// wait for it, at most borrow (Sentinel's occupiable window). A place it
// lends stays counted if a later rule blocks the request.
type borrowingRule struct {
	qpsRule
	borrow time.Duration
}

func (r *borrowingRule) admit(ctx context.Context, e *entry, now int64, h *hold) flow.Decision {
	if e.priority {
		return r.q.AllowPriorityNAt(now, e.count, r.borrow)
	}
	return r.qpsRule.admit(ctx, e, now, h)
}
