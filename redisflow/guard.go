package redisflow

import (
	"time"

	"github.com/slidegate/slidegate"
)

var _ slidegate.Cluster = (*Cluster)(nil)

// Limiter returns the limiter of a guard's cluster-wide rule: named after the
// rule's resource, with its limit, interval, buckets and lease. A field left
// at zero takes NewLimiter's default (an interval of 1s; a lease of 0 takes
// one permit per request); a negative one is an error, as NewLimiter's. It
// makes Cluster a slidegate.Cluster, for slidegate.WithCluster.
func (c *Cluster) Limiter(r slidegate.FlowRule) (slidegate.ClusterLimiter, error) {
	lease := r.Lease
	if lease == 0 {
		lease = 1
	}
	opts := []LimiterOption{WithLease(lease, 0)}
	if r.Buckets != 0 {
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
