package redisflow_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
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
	if d := orders.AllowN(context.Background(), 1); !d.Allowed {
		fmt.Println("blocked; retry after", d.RetryAfter)
	}
}

// Each user may make 5 requests per second and 100 per minute, on every
// instance of the service together; a batch job's user 1000 per minute.
func ExampleCluster_NewKeyedLimiter() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	cluster, err := redisflow.New(rdb)
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	users, err := cluster.NewKeyedLimiter("orders", []flow.KeyWindow{
		{Limit: 5, Interval: time.Second},
		{Limit: 100, Interval: time.Minute, Overrides: map[string]int64{"batch-job": 1000}},
	})
	if err != nil {
		panic(err)
	}
	if d, window := users.AllowKeyN(context.Background(), "user-42", 1); !d.Allowed {
		fmt.Printf("blocked by window %d; retry after %v\n", window, d.RetryAfter)
	}
}

// A guard's per-key rules marked cluster-wide: per user, on every instance.
func ExampleCluster_KeyedLimiter() {
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
		{Resource: "GET /orders", Limit: 5, Cluster: true, PerKey: true},
		{Resource: "GET /orders", Limit: 100, Interval: slidegate.Duration(time.Minute), Cluster: true, PerKey: true},
	}})
	if err != nil {
		panic(err)
	}
	e, err := g.Enter(context.Background(), "GET /orders", slidegate.WithKey("user-42"))
	if err != nil {
		return // blocked: err is a *slidegate.BlockError naming the rule and the key
	}
	defer e.Exit(nil)
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
		if l.AllowN(context.Background(), 1).Allowed {
			allowed++
		}
	}
	fmt.Println("allowed:", allowed, "healthy:", cluster.Stats().Healthy)
	// Output: allowed: 25 healthy: false
}
