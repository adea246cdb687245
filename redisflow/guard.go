package redisflow

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
)

var (
	_ slidegate.KeyedCluster        = (*Cluster)(nil)
	_ slidegate.HealthReporter      = (*Cluster)(nil)
	_ slidegate.HealthNotifier      = (*Cluster)(nil)
	_ slidegate.LimitSetter         = (*Limiter)(nil)
	_ slidegate.KeyedClusterLimiter = (*KeyedLimiter)(nil)
)

// Limiter returns the limiter of a guard's cluster-wide rule. It is named
// after the rule's resource, with the rule's limit, interval, buckets and
// lease. A field left at zero takes the default of [Cluster.NewLimiter]: an
// interval of 1s, or a lease of one permit per request. A negative one is
// an error, as it is for NewLimiter. Limiter makes Cluster a
// [slidegate.Cluster], for [slidegate.WithCluster].
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

// KeyedLimiter returns the limiter of a guard's per-key cluster QPS rules
// of one resource, decided together. It is a [KeyedLimiter] named after the
// resource, with a window per rule, in the order given. Each window has its
// rule's limit, interval, buckets and overrides. A field left at zero takes
// the default of [Cluster.NewKeyedLimiter]: an interval of 1s, or
// 20 buckets.
//
// It is an error if a field is negative, if the rules are of different
// resources, or if there is no rule. A bad window is an error, as it is for
// NewKeyedLimiter. KeyedLimiter makes Cluster a [slidegate.KeyedCluster],
// for [slidegate.WithCluster].
func (c *Cluster) KeyedLimiter(rules []slidegate.FlowRule) (slidegate.KeyedClusterLimiter, error) {
	if len(rules) == 0 {
		return nil, fmt.Errorf("%w: keyed limiter: no rule", errInvalidConfig)
	}
	windows := make([]flow.KeyWindow, len(rules))
	for j, r := range rules {
		if r.Resource != rules[0].Resource {
			return nil, fmt.Errorf("%w: keyed limiter: rules[%d] is of resource %q, rules[0] of %q: a keyed limiter holds the rules of one resource", errInvalidConfig, j, r.Resource, rules[0].Resource)
		}
		interval := time.Duration(r.Interval)
		if interval == 0 {
			interval = time.Second
		}
		if r.Buckets < 0 {
			return nil, fmt.Errorf("%w: keyed limiter %q: rules[%d].buckets = %d: must not be negative", errInvalidConfig, r.Resource, j, r.Buckets)
		}
		windows[j] = flow.KeyWindow{Limit: r.Limit, Interval: interval, Buckets: r.Buckets, Overrides: r.Overrides}
	}
	l, err := c.NewKeyedLimiter(rules[0].Resource, windows)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Health returns what [Cluster.Stats] says of Redis's health: Healthy,
// Failures, Fallbacks and Err. A guard reads it
// ([slidegate.Guard.ClusterHealth]), and so do its metrics.
func (c *Cluster) Health() slidegate.ClusterHealth {
	s := c.Stats()
	return slidegate.ClusterHealth{Healthy: s.Healthy, Failures: s.Failures, Fallbacks: s.Fallbacks, Err: s.Err}
}
