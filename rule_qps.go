package slidegate

import (
	"context"
	"time"

	"github.com/slidegate/slidegate/flow"
)

// A qpsRule blocks the requests over a QPS limit at once: flow.QPS, the exact
// sliding window, counting every request it allows.
type qpsRule struct {
	holdsNothing
	q *flow.QPS
	// fixed: the limit cannot change in place, for the limiter warms up,
	// or stands for a throttle of limit 0, which a new limit makes a
	// throttle.
	fixed bool
}

func (*qpsRule) phase() phase { return phaseQPS }

func (r *qpsRule) admit(_ context.Context, e *entry, now int64, _ *hold) flow.Decision {
	return r.q.AllowNAt(now, e.count)
}

func (r *qpsRule) resizable() bool            { return !r.fixed }
func (r *qpsRule) setLimit(limit int64) error { return r.q.SetLimit(limit) }

// A borrowingRule is a qpsRule that lends a prioritized request
// (WithPriority) over its limit a place in its next bucket, and makes it
// wait for it, at most borrow (Sentinel's occupiable window).
type borrowingRule struct {
	qpsRule
	borrow time.Duration
}

func (r *borrowingRule) admit(_ context.Context, e *entry, now int64, _ *hold) flow.Decision {
	if e.priority {
		return r.q.AllowPriorityNAt(now, e.count, r.borrow)
	}
	return r.q.AllowNAt(now, e.count)
}
