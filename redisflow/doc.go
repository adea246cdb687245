// Package redisflow keeps QPS limits that hold across every instance of a
// service, in Redis: a limit of 1000 per second on 20 instances admits at
// most 1000 per second in all, not 1000 on each.
//
// Make one Cluster per process, over a go-redis client, and a Limiter per
// limit; or give the Cluster to a guard (slidegate.WithCluster), whose flow
// rules marked cluster-wide (FlowRule.Cluster, "cluster: true" in a rules
// file) then use it.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	cluster, err := redisflow.New(rdb)
//	...
//	orders, err := cluster.NewLimiter("orders", 1000, time.Second)
//	...
//	if d := orders.Allow(ctx); !d.Allowed {
//		// refused: retry after d.RetryAfter
//	}
//
// A Limiter has the semantics of flow.QPS: at most its limit in any
// interval, wherever the interval starts (see Limiter). Each decision is one
// round trip, to a Lua script run by its digest, on the Redis server's clock;
// WithLease trades a documented slack for fewer round trips at high rates.
// Every key of a limit lands in one Redis Cluster slot, and every key expires
// once it no longer counts.
//
// When Redis is slow or down, a decision waits at most the cluster's timeout
// (WithTimeout), then falls back (WithFallback): by default each instance
// limits on its own to its share of the limit, the number of instances being
// configured (WithInstances) or discovered through a heartbeat key. A
// background probe finds Redis again, with backoff, and the limiters go back
// to it.
package redisflow
