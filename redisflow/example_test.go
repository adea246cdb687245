package redisflow_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/redisflow"
)

// A limit of 1000 requests per second for every instance of the service
// together.
func ExampleCluster_NewLimiter() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	cluster, err := redisflow.New(rdb)
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	orders, err := cluster.NewLimiter("orders", 1000, time.Second)
	if err != nil {
		panic(err)
	}
	if d := orders.Allow(context.Background()); !d.Allowed {
		fmt.Println("blocked; retry after", d.RetryAfter)
	}
}

// A guard whose rules marked cluster-wide hold across the service's
// instances.
func ExampleCluster_guard() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	cluster, err := redisflow.New(rdb)
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	g, err := slidegate.New(slidegate.WithCluster(cluster))
	if err != nil {
		panic(err)
	}
	err = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /orders", Limit: 5000, Cluster: true, Lease: 50},
	}})
	if err != nil {
		panic(err)
	}
}

// While Redis cannot be reached, each of 4 instances limits on its own to a
// quarter of the limit.
func ExampleWithFallback() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1}) // nothing listens
	defer rdb.Close()
	cluster, err := redisflow.New(rdb, redisflow.WithInstances(4), redisflow.WithFallback(redisflow.Local),
		redisflow.WithClock(clock.NewManual(0)))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	l, _ := cluster.NewLimiter("orders", 100, time.Second)
	allowed := 0
	for range 100 {
		if l.Allow(context.Background()).Allowed {
			allowed++
		}
	}
	fmt.Println("allowed:", allowed, "healthy:", cluster.Stats().Healthy)
	// Output: allowed: 25 healthy: false
}
