package redisflow

import (
	"time"

	"github.com/slidegate/slidegate"
)

var _ slidegate.Cluster = (*Cluster)(nil)

// Limiter returns the limiter of a guard's cluster-wide rule: named after the
// rule's resource, with its limit, interval, buckets and lease. It makes
// Cluster a slidegate.Cluster, for slidegate.WithCluster.
func (c *Cluster) Limiter(r slidegate.FlowRule) (slidegate.ClusterLimiter, error) {
	opts := []LimiterOption{WithLease(max(r.Lease, 1), 0)}
	if r.Buckets > 0 {
		opts = append(opts, WithBuckets(r.Buckets))
	}
	interval := time.Duration(r.Interval)
	if interval == 0 {
		interval = time.Second
	}
	l, err := c.NewLimiter(r.Resource, r.Limit, interval, opts...)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Health returns what Stats says of Redis's health (Healthy, Failures,
// Fallbacks and Err), for a guard (slidegate.Guard.ClusterHealth) and its
// metrics.
func (c *Cluster) Health() slidegate.ClusterHealth {
	s := c.Stats()
	return slidegate.ClusterHealth{Healthy: s.Healthy, Failures: s.Failures, Fallbacks: s.Fallbacks, Err: s.Err}
}
