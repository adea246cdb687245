// Package redisflow keeps QPS limits that hold across every instance of a
// service, in Redis. A limit of 1000 per second on 20 instances allows at
// most 1000 per second in all, not 1000 on each.
//
// Make one [Cluster] per process, over a go-redis client, and a [Limiter]
// per limit. Or give the Cluster to a guard ([slidegate.WithCluster]). The
// guard's flow rules marked cluster-wide then use it
// ([slidegate.FlowRule].Cluster, "cluster: true" in a rules file).
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	cluster, err := redisflow.New(rdb)
//	...
//	orders, err := cluster.NewLimiter("orders", 1000, time.Second)
//	...
//	if d := orders.AllowN(ctx, 1); !d.Allowed {
//		// blocked: retry after d.RetryAfter
//	}
//
// A Limiter has the semantics of [flow.QPS]: at most its limit in any
// interval, wherever the interval starts. Each decision is one round trip,
// to a Lua script run by its digest, on the Redis server's clock.
// [WithLease] trades a stated slack for fewer round trips at high rates.
//
// Redis decides on its own clock, so the instances' clocks do not matter.
// What a limiter keeps locally is on the cluster's clock ([WithClock]).
// [Limiter.AllowNAt] takes that time from its caller, as [flow.QPS.AllowNAt]
// does. The timeout bounds real waiting, whatever the clock. Every key of a
// limit lands in one Redis Cluster slot. Every key expires once it no
// longer counts.
//
// Limits per key (a user, a tenant) are a [KeyedLimiter]'s. Make one with
// [Cluster.NewKeyedLimiter], or give a guard per-key cluster rules
// ([slidegate.FlowRule].PerKey with Cluster). Its windows, such as 5 per
// second and 100 per minute, hold for every key across the instances. A
// request is decided against all its key's windows together, in one round
// trip, all or nothing:
//
//	users, err := cluster.NewKeyedLimiter("orders", []flow.KeyWindow{
//		{Limit: 5, Interval: time.Second},
//		{Limit: 100, Interval: time.Minute, Overrides: map[string]int64{"batch-job": 1000}},
//	})
//	...
//	if d, window := users.AllowKeyN(ctx, userID, 1); !d.Allowed {
//		// blocked by windows[window]: retry after d.RetryAfter
//	}
//
// Each window of a key is one Redis string, under the key as a hash tag.
// The windows of one key share a slot. Different keys spread over a Redis
// Cluster's nodes.
//
// When Redis is slow or down, a decision waits at most the cluster's
// timeout ([WithTimeout]). It then falls back ([WithFallback]). By default
// each instance limits on its own to its share of the limit. The number of
// instances is configured ([WithInstances]) or discovered through a
// heartbeat key. A background probe finds Redis again, with backoff, and
// the limiters go back to it. The timeout holds whatever Redis, or a Redis
// Cluster, does: every retry, redirect and dial is within it. A reply that
// no Redis would send is an outage too ([ErrMalformedReply]), never a
// panic.
//
// An error that retrying will not fix is not an outage: a wrong or missing
// password, a command or key the ACL denies, a command Redis does not have.
// [New] checks, within the timeout, that Redis runs what the cluster will
// run. It returns such an error, wrapping [ErrMisconfigured]. One that
// appears later makes decisions fall back, as an outage does: the password
// or the ACL changed while the service runs, say. It is reported by
// [Cluster.Stats] and [Cluster.Health], and so by a guard's ClusterHealth
// and its metrics. It is logged at Error level, once when it appears and
// once when it clears. The logger is [slog.Default] unless [WithLogger]
// gives the cluster its own.
//
// A guard given the cluster is told of each change of its health
// ([Cluster.OnHealthChange]). Redis going down, Redis back, an error that
// retrying will not fix, and its end are each a change. The guard records
// them as "cluster_changed" events.
//
// The notes in docs/redisflow.md say how the window keeps its bound, what a
// lease adds, how keys are laid out in Redis, and how the cluster meets
// outages.
package redisflow
