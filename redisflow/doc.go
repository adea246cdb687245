// Package redisflow keeps QPS limits that hold across every instance of a
// service, in Redis: a limit of 1000 per second on 20 instances allows at
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
//		// blocked: retry after d.RetryAfter
//	}
//
// A Limiter has the semantics of flow.QPS: at most its limit in any
// interval, wherever the interval starts (see Limiter). Each decision is one
// round trip, to a Lua script run by its digest, on the Redis server's clock;
// WithLease trades a documented slack for fewer round trips at high rates.
//
// Two clocks take part in a decision. Redis decides on its own (TIME), which
// no caller sets: that is what makes the instances' clocks not matter. What a
// limiter keeps locally, its lease, a cached block and the Local fallback's
// window, is on the cluster's clock (WithClock): AllowN reads it once per
// decision, and AllowNAt takes that time from its caller instead, as
// flow.QPS.AllowNAt does, so that a guard that has read the clock, or a
// simulation on a manual clock, drives them without another read. The
// timeout bounds real waiting, whatever the clock.
// Every key of a limit lands in one Redis Cluster slot, and every key expires
// once it no longer counts.
//
// Limits per key (a user, a tenant) are a KeyedLimiter's: NewKeyedLimiter,
// or a guard's per-key cluster rules (FlowRule.PerKey with Cluster), whose
// windows (5 per second and 100 per minute) hold for every key across the
// instances, decided together in one round trip, all or nothing:
//
//	users, err := cluster.NewKeyedLimiter("orders", []flow.KeyWindow{
//		{Limit: 5, Interval: time.Second},
//		{Limit: 100, Interval: time.Minute, Overrides: map[string]int64{"batch-job": 1000}},
//	})
//	...
//	if d, window := users.AllowKey(ctx, userID); !d.Allowed {
//		// blocked by windows[window]: retry after d.RetryAfter
//	}
//
// Each window of a key is one Redis string, under the key as a hash tag
// (PREFIX:k:{KEY}:NAME:INTERVAL:BUCKETS, braces escaped): the windows of one
// key share a slot, different keys spread over a Redis Cluster's nodes.
//
// When Redis is slow or down, a decision waits at most the cluster's timeout
// (WithTimeout), then falls back (WithFallback): by default each instance
// limits on its own to its share of the limit, the number of instances being
// configured (WithInstances) or discovered through a heartbeat key. A
// background probe finds Redis again, with backoff, and the limiters go back
// to it. The timeout holds whatever Redis, or a Redis Cluster, does: the
// cluster calls it over connections of its own, made from the client's
// options, with every retry, redirect and dial within the timeout. A reply
// that no Redis would send is an outage too (ErrMalformedReply), never a
// panic.
//
// An error that retrying will not fix is not an outage: a wrong or missing
// password, a command or key the ACL denies, a command Redis does not have.
// New checks, within the timeout, that Redis runs what the cluster will run,
// and returns such an error (ErrMisconfigured). One that appears later (the
// password or the ACL changed while the service runs) makes decisions fall
// back as an outage does, and is reported: by Stats().Err, by Health().Err
// (and so by a guard's ClusterHealth and its metrics), and in the log, at
// Error level through slog.Default unless WithLogger gives the cluster its
// own logger, once when it appears and once when it clears.
//
// A guard given the cluster (slidegate.WithCluster) is told of each change
// of its health (OnHealthChange): Redis down, back, an error that retrying
// will not fix and its end, which it records as ClusterChanged events.
package redisflow
