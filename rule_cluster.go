package slidegate

import (
	"context"

	"github.com/slidegate/slidegate/flow"
)

// A clusterRule is a QPS limit for all the instances of a service together,
// decided by the guard's Cluster (WithCluster).
type clusterRule struct {
	holdsNothing
	l ClusterLimiter
}

func (*clusterRule) phase() phase { return phaseCluster }

func (r *clusterRule) admit(ctx context.Context, e *entry, _ int64, _ *hold) flow.Decision {
	return r.l.AllowN(ctx, e.count)
}

func (r *clusterRule) resizable() bool {
	_, ok := r.l.(LimitSetter)
	return ok
}

func (r *clusterRule) setLimit(limit int64) error { return r.l.(LimitSetter).SetLimit(limit) }
