package slidegate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// QPSRule allows at most Limit requests in any Interval, wherever it
// starts, and blocks the rest at once ([flow.QPS]). It is the kind of a
// rule that leaves its type out.
const QPSRule FlowType = "qps"

// qpsKind is the QPS rule: per key (decided together with the other
// per-key QPS rules of its resource: rule_keyed.go), on another resource's
// traffic (rule_ref.go), or for all the instances of a service
// (rule_cluster.go).
var qpsKind = kind{
	Kind:   rulekind.Kind{Name: string(QPSRule), TopKeys: true},
	fields: []string{"limit", "interval", "buckets", "per_key", "warm_up", "cold_factor", "borrow", "ref_resource", "cluster", "lease"},
	normal: func(f *FlowRule) {
		f.Interval, f.Buckets = Duration(f.interval()), f.buckets()
	},
	check: func(f *FlowRule) []kindProblem {
		if k := f.buckets(); f.PerKey && k > flowlimits.MaxKeyBuckets {
			return []kindProblem{{"buckets", fmt.Sprintf("%d: a per-key rule has at most %d buckets", k, flowlimits.MaxKeyBuckets)}}
		}
		return nil
	},
	build: buildQPS,
}

// buildQPS makes a QPS rule's enforcer. A cluster rule's limiter comes
// from the guard's cluster; without one, the rule is built as a local QPS
// rule of the same shape, to judge it.
func buildQPS(f FlowRule, on builder) (rule, error) {
	switch {
	case f.Cluster && on.cluster != nil:
		shaped := f
		shaped.Interval, shaped.Buckets = Duration(f.interval()), f.buckets()
		l, err := on.cluster.Limiter(shaped)
		if err == nil && l == nil {
			err = errNoLimiter
		}
		if err != nil {
			return nil, err
		}
		return &clusterRule{l: l}, nil
	case f.PerKey:
		// Alone, to judge it: a guard builds a resource's per-key rules
		// together (keyGroup).
		g := keyGroup{resource: f.Resource, at: []int{0}}
		r, err := g.build([]FlowRule{f}, on.clock, nil, on.keys)
		var ce *config.Error
		if errors.As(err, &ce) {
			// "windows[0].buckets": the rule's own field.
			ce.Field = ce.Field[strings.IndexByte(ce.Field, '.')+1:]
		}
		return r, err
	case f.RefResource != "":
		return buildRef(f)
	}
	return newQPSRule(f, on, false)
}

// newQPSRule makes a qpsRule, or a borrowingRule for a rule that lends
// places. fixed: its limit cannot change in place.
func newQPSRule(f FlowRule, on builder, fixed bool) (rule, error) {
	var warmUp time.Duration
	var cold float64
	if f.WarmUp > 0 {
		warmUp, cold = time.Duration(f.WarmUp), f.ColdFactor
	}
	// flow fills in the buckets the rule leaves out (Validate has judged a
	// negative count).
	q, err := flow.NewQPS(flow.QPSSettings{Limit: f.Limit, Interval: f.interval(), Buckets: max(f.Buckets, 0),
		WarmUp: warmUp, ColdFactor: cold, Clock: on.clock})
	if err != nil {
		return nil, err
	}
	r := qpsRule{q: q, fixed: fixed || f.WarmUp > 0}
	if f.Borrow > 0 {
		return &borrowingRule{qpsRule: r, borrow: time.Duration(f.Borrow)}, nil
	}
	return &r, nil
}

// A qpsRule blocks the requests over a QPS limit at once: flow.QPS, the exact
// sliding window, counting every request it allows, and giving back the
// place of one that a later rule blocks.
type qpsRule struct {
	q *flow.QPS
	// fixed: the limit cannot change in place, for the limiter warms up,
	// or stands for a throttle of limit 0 (see buildThrottle), which a new
	// limit makes a throttle.
	fixed bool
}

func (*qpsRule) phase() phase { return phaseQPS }

func (r *qpsRule) admit(_ context.Context, e *entry, now int64, h *hold) flow.Decision {
	d, g := r.q.GrantNAt(now, e.count)
	if d.Allowed {
		h.by, h.grant, h.undoOnly = r, g, true
	}
	return d
}

// release gives the grant back if the request was blocked: Exit skips it
// otherwise (hold.undoOnly).
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
