package redisflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/redistest"
	"github.com/slidegate/slidegate/redisflow"
	"github.com/slidegate/slidegate/rulefile"
)

// Two instances, each with its own guard and cluster, read the same rules
// file: its cluster rule holds for both together.
func TestGuardsShareAClusterRuleFromARulesFile(t *testing.T) {
	srv := redistest.Start(t)
	rules, err := rulefile.Parse("rules.yaml", []byte(`
flow:
  - resource: GET /orders
    limit: 10
    interval: 1m
    cluster: true
  - resource: GET /orders
    limit: 1000
`))
	if err != nil {
		t.Fatal(err)
	}
	var guards []*slidegate.Guard
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		c, err := redisflow.New(rdb, redisflow.WithInstances(2), redisflow.WithTimeout(5*time.Second)) // a loaded machine is not an outage
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		g, err := slidegate.New(slidegate.WithCluster(c))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetRules(rules); err != nil {
			t.Fatal(err)
		}
		guards = append(guards, g)
	}
	allowed := 0
	for i := range 30 {
		e, err := guards[i%2].Enter(context.Background(), "GET /orders")
		if err == nil {
			allowed++
			e.Exit(nil)
			continue
		}
		var be *slidegate.BlockError
		if !errors.As(err, &be) || be.Rule != "qps" || be.Reason != flow.RateLimited || be.RetryAfter <= 0 || be.RetryAfter > time.Minute+time.Minute/25 {
			t.Fatalf("Enter: %v; want a block by the cluster rule flow[0], with a RetryAfter", err)
		}
	}
	if allowed != 10 {
		t.Errorf("the two instances allowed %d requests; want the cluster limit, 10, in all", allowed)
	}
}

// A cluster rule's negative lease or buckets, which the guard's validation
// reports first, is an error here too, not the default.
func TestClusterLimiterReturnsAnErrorForANegativeField(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer rdb.Close()
	c, err := redisflow.New(rdb, redisflow.WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, r := range []slidegate.FlowRule{
		{Resource: "r", Limit: 10, Cluster: true, Lease: -3},
		{Resource: "r", Limit: 10, Cluster: true, Buckets: -1},
		{Resource: "r", Limit: 10, Cluster: true, Interval: slidegate.Duration(-time.Second)},
	} {
		if _, err := c.Limiter(r); !errors.Is(err, slidegate.ErrInvalidConfig) {
			t.Errorf("Limiter(%+v) = %v; want ErrInvalidConfig", r, err)
		}
	}
	if _, err := c.Limiter(slidegate.FlowRule{Resource: "r", Limit: 10, Cluster: true}); err != nil {
		t.Errorf("Limiter of a rule with every field defaulted: %v", err)
	}
}

// Two instances, each with its own guard and cluster, read the same rules
// file: a resource's per-key cluster rules hold for each key, for both
// instances together, decided as one (a request the hour's rule refuses
// takes no place in the minute's), with the key's overrides.
func TestGuardsSharePerKeyClusterRules(t *testing.T) {
	srv := redistest.Start(t)
	rules, err := rulefile.Parse("rules.yaml", []byte(`
flow:
  - resource: GET /orders
    limit: 3
    interval: 1m
    cluster: true
    per_key: true
    overrides: {vip: 6}
  - resource: GET /orders
    limit: 4
    interval: 1h
    cluster: true
    per_key: true
`))
	if err != nil {
		t.Fatal(err)
	}
	var guards []*slidegate.Guard
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		c, err := redisflow.New(rdb, redisflow.WithInstances(2), redisflow.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		g, err := slidegate.New(slidegate.WithCluster(c))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetRules(rules); err != nil {
			t.Fatal(err)
		}
		guards = append(guards, g)
	}
	for _, tc := range []struct {
		key     string
		allowed int
		rule    string
		within  time.Duration
	}{{"alice", 3, "qps_per_key", time.Minute + time.Minute/10}, {"bob", 3, "qps_per_key", time.Minute + time.Minute/10}, {"vip", 4, "qps_per_key_2", time.Hour + time.Hour/10}} {
		allowed := 0
		for i := range 10 {
			e, err := guards[i%2].Enter(context.Background(), "GET /orders", slidegate.WithKey(tc.key))
			if err == nil {
				allowed++
				e.Exit(nil)
				continue
			}
			var be *slidegate.BlockError
			if !errors.As(err, &be) || be.Rule != tc.rule || be.Key != tc.key || be.Reason != flow.RateLimited || be.RetryAfter <= 0 || be.RetryAfter > tc.within {
				t.Fatalf("key %q: Enter: %v (%+v); want a block by %s for the key, with a RetryAfter within %v", tc.key, err, be, tc.rule, tc.within)
			}
		}
		if allowed != tc.allowed {
			t.Errorf("key %q: the two instances allowed %d; want %d in all", tc.key, allowed, tc.allowed)
		}
	}
}
