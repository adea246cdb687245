package slidegate

import (
	"context"
	"fmt"

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
	return flow.Decision{Reason: flow.RefLimited}
}

// buildRef makes the rule of a QPS rule on another resource, without that
// resource's statistics, which binding the rule gives it.
func buildRef(f FlowRule) (rule, error) {
	if interval := f.interval(); interval%statsWidth != 0 || interval > statsInterval {
		return nil, &fieldError{"interval", fmt.Errorf("interval %v: a rule on another resource reads its statistics, which are kept over %v in buckets of %v: the interval must be a multiple of %v, at most %v",
			interval, statsInterval, statsWidth, statsWidth, statsInterval)}
	}
	return &refRule{limit: f.Limit}, nil
}
