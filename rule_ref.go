package slidegate

import (
	"context"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/window"
)

// A refRule limits a resource by another's traffic (Sentinel's associated
// resource): it blocks a request while the other resource has allowed its
// limit of requests in the rule's interval. It reads the other resource's
// statistics and counts nothing itself, so it has no state to keep across
// reloads: a new set of rules makes it anew.
type refRule struct {
	holdsNothing
	allowed *window.Counter // the other resource's allowed requests over the interval; nil reads none
	limit   int64
}

func (*refRule) phase() phase { return phaseRef }

func (r *refRule) admit(_ context.Context, e *entry, now int64, _ *hold) flow.Decision {
	var allowed int64
	if r.allowed != nil {
		allowed = r.allowed.SumAt(now, window.Allowed)
	}
	if allowed+e.count <= r.limit {
		return flow.Decision{Allowed: true}
	}
	return flow.Decision{Reason: RefLimited}
}
