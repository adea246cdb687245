package redisflow

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The cluster's own client keeps what the given client says of where Redis
// is and how to reach it, and how often to retry (none stays none), and
// takes from the cluster's timeout how long it waits, of each kind.
func TestTheClustersClientKeepsTheClientsOptionsButHowLongItWaits(t *testing.T) {
	const timeout = 300 * time.Millisecond
	newCluster := func(client redis.Scripter) *Cluster {
		c, err := New(client, WithInstances(1), WithTimeout(timeout), withProbeBackoff(time.Hour, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	waits := func(kind string, ctx bool, read, write, dial, pool time.Duration, dials int) {
		t.Helper()
		if !ctx || read != timeout || write != timeout || dial != timeout || pool != timeout || dials != 1 {
			t.Errorf("%s: ContextTimeoutEnabled %v, ReadTimeout %v, WriteTimeout %v, DialTimeout %v, PoolTimeout %v, DialerRetries %d; want true, the timeout (%v) for each, one dial",
				kind, ctx, read, write, dial, pool, dials, timeout)
		}
	}

	given := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", Username: "u", Password: "p", DB: 3, PoolSize: 7,
		MaxRetries: -1, MinRetryBackoff: -1, ReadTimeout: time.Minute, ClientName: "svc"})
	defer given.Close()
	c := newCluster(given)
	o := c.client.(*redis.Client).Options()
	if o.Addr != "127.0.0.1:1" || o.Username != "u" || o.Password != "p" || o.DB != 3 || o.PoolSize != 7 || o.ClientName != "svc" {
		t.Errorf("client: %+v; want the given client's address, credentials, database, pool size and name", o)
	}
	if o.MaxRetries != 0 || o.MinRetryBackoff != 0 || o.Protocol != 2 {
		t.Errorf("client: MaxRetries %d, MinRetryBackoff %v, Protocol %d; want no retry and no backoff, as given, in RESP2", o.MaxRetries, o.MinRetryBackoff, o.Protocol)
	}
	waits("client", o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout, o.DialTimeout, o.PoolTimeout, o.DialerRetries)

	gc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, Password: "p",
		MaxRedirects: -1, ReadOnly: true, PoolSize: 9})
	defer gc.Close()
	co := newCluster(gc).client.(*redis.ClusterClient).Options()
	if len(co.Addrs) != 2 || co.Password != "p" || co.PoolSize != 9 || co.MaxRedirects != 0 {
		t.Errorf("cluster client: %+v; want the given addresses, password, pool size, and no redirect, as given", co)
	}
	if co.ReadOnly || !co.DisableRoutingPolicies {
		t.Errorf("cluster client: ReadOnly %v, DisableRoutingPolicies %v; want decisions on the masters, routed by key alone", co.ReadOnly, co.DisableRoutingPolicies)
	}
	waits("cluster client", co.ContextTimeoutEnabled, co.ReadTimeout, co.WriteTimeout, co.DialTimeout, co.PoolTimeout, co.DialerRetries)

	gr := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, DB: 2, MaxRetries: -1})
	defer gr.Close()
	ro := newCluster(gr).client.(*redis.Ring).Options()
	if ro.Addrs["a"] != "127.0.0.1:1" || ro.DB != 2 || ro.MaxRetries != 0 {
		t.Errorf("ring: %+v; want the given shards, database, and no retry, as given", ro)
	}
	waits("ring", ro.ContextTimeoutEnabled, ro.ReadTimeout, ro.WriteTimeout, ro.DialTimeout, ro.PoolTimeout, ro.DialerRetries)

	// Anything else is called as it is.
	f := &impostor{Client: given, answer: ints(1, 1, 0, 7, 9)}
	if cl := newCluster(f).client; cl != redis.Scripter(f) {
		t.Errorf("a client of another kind: the cluster calls %T; want the one given", cl)
	}
}
