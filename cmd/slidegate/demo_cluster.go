package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/redisflow"
)

// The demo's cluster (--redis): every demo on one Redis shares the limits
// kept under clusterPrefix, and nothing else's. A decision waits for Redis
// at most clusterTimeout, then falls back to the demo's share of the limit.
const (
	clusterPrefix  = "slidegate-demo"
	clusterTimeout = 100 * time.Millisecond
	// clusterConns is the client's pool: as many connections as decisions
	// may be taken to Redis at once (the orders in flight, each taking its
	// two cluster rules' in turn), so that no decision spends its timeout
	// waiting for one.
	clusterConns = 64
)

// joinCluster returns the demo's cluster over Redis at addr, and what
// closes it. A Redis that cannot be reached is no error: the cluster falls
// back until it can. One that refuses the cluster's commands (a password,
// the ACL) is, as New says.
func joinCluster(addr string, log *slog.Logger) (*redisflow.Cluster, func(), error) {
	quietRedis.Do(func() { redis.SetLogger(discardRedisLog{}) })
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: clusterConns})
	c, err := redisflow.New(rdb, redisflow.WithPrefix(clusterPrefix), redisflow.WithTimeout(clusterTimeout),
		redisflow.WithFallback(redisflow.Local), redisflow.WithLogger(log))
	if err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("--redis %s: %w", addr, err)
	}
	return c, func() { _ = c.Close(); _ = rdb.Close() }, nil
}

// clusterWide returns rules whose QPS rules are cluster-wide: in the
// demo's own rules, the orders' 100 a second and their per-user 20 a
// second and 900 a minute. The other kinds of rule cannot be (a
// concurrency, shed or adaptive rule holds for one process), and rules of
// the inbound traffic are neither per key nor cluster-wide.
func clusterWide(r slidegate.Rules) slidegate.Rules {
	r.Flow = slices.Clone(r.Flow)
	for i, f := range r.Flow {
		if (f.Type == "" || f.Type == slidegate.QPSRule) && f.Resource != slidegate.InboundResource {
			r.Flow[i].Cluster = true
		}
	}
	return r
}

// clusterRules counts the rules in force that are cluster-wide.
func clusterRules(r slidegate.Rules) int {
	n := 0
	for _, f := range r.Flow {
		if f.Cluster {
			n++
		}
	}
	return n
}

// quietRedis silences go-redis's own log, once, before the first client:
// it would print a line for each connection that fails while Redis is
// down, which the cluster's health, printed once, says.
var quietRedis sync.Once

// discardRedisLog is a go-redis logger that logs nothing.
type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}
