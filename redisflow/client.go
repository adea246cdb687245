package redisflow

import (
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// connect returns the client the cluster calls Redis through, and the func
// that closes it. For a go-redis Client, ClusterClient or Ring, that is a
// client of its own, of the same kind and with the given client's options
// but for those below; anything else is called as it is, and closed by its
// owner.
//
// What the cluster sets, it derives from its timeout, so that each call,
// with every retry, redirect and dial it makes, waits for Redis no longer:
//
//   - the call's context bounds every wait (ContextTimeoutEnabled), and
//     the socket timeouts and the dial timeout are the cluster's timeout
//     too, for what the client does in the background (a Redis Cluster's
//     slots, reloaded);
//   - a dial is tried once (DialerRetries): the pool retries a Redis that
//     refuses connections in the background, where no decision waits;
//   - a Redis Cluster's commands go to the masters of their keys' slots,
//     without the routing by command that the client would first learn
//     from COMMAND, a wait of up to 5s of its own, on a mutex that every
//     other call then waits on, whatever its context says;
//   - RESP2, whose replies the connections' guard follows (guardDial),
//     and no client-side cache, push notifications or auto-pipelining,
//     which the cluster does not use.
//
// Hooks added to the given client do not see the cluster's calls.
func (c *Cluster) connect(client redis.Scripter) (redis.Scripter, func() error) {
	t := c.timeout
	switch cl := client.(type) {
	case *redis.Client:
		o := *cl.Options() // Dialer is set: the given one, or the default of the client's options
		none(&o.MaxRetries, &o.MinRetryBackoff, &o.MaxRetryBackoff)
		o.Dialer = guardDial(o.Dialer, &c.conns)
		o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout = true, t, t
		o.DialTimeout, o.DialerRetries, o.PoolTimeout = t, 1, t
		o.Protocol = 2
		o.ClientSideCacheConfig, o.ClientSideCache = nil, nil
		o.PushNotificationProcessor, o.AutoPipelineOptions = nil, nil
		o.PipelinePoolSize, o.PipelineReadBufferSize, o.PipelineWriteBufferSize = 0, 0, 0
		o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		own := redis.NewClient(&o)
		return own, own.Close
	case *redis.ClusterClient:
		o := *cl.Options()
		none(&o.MaxRedirects, &o.MinRetryBackoff, &o.MaxRetryBackoff)
		d := o.Dialer
		if d == nil {
			d = redis.NewDialer(&redis.Options{DialTimeout: t, TLSConfig: o.TLSConfig})
		}
		o.Dialer = guardDial(d, &c.conns)
		o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout = true, t, t
		o.DialTimeout, o.DialerRetries, o.PoolTimeout = t, 1, t
		o.Protocol = 2
		o.ReadOnly, o.RouteByLatency, o.RouteRandomly = false, false, false
		o.DisableRoutingPolicies = true
		o.PushNotificationProcessor, o.AutoPipelineOptions = nil, nil
		o.PipelinePoolSize, o.PipelineReadBufferSize, o.PipelineWriteBufferSize = 0, 0, 0
		o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		own := redis.NewClusterClient(&o)
		c.slots = own
		return own, own.Close
	case *redis.Ring:
		o := *cl.Options()
		none(&o.MaxRetries, &o.MinRetryBackoff, &o.MaxRetryBackoff)
		d := o.Dialer
		if d == nil {
			d = redis.NewDialer(&redis.Options{DialTimeout: t, TLSConfig: o.TLSConfig})
		}
		o.Dialer = guardDial(d, &c.conns)
		o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout = true, t, t
		o.DialTimeout, o.DialerRetries, o.PoolTimeout = t, 1, t
		o.Protocol = 2
		o.PipelinePoolSize, o.PipelineReadBufferSize, o.PipelineWriteBufferSize = 0, 0, 0
		own := redis.NewRing(&o)
		return own, own.Close
	}
	return client, func() error { return nil }
}

// none keeps the settings that a client's options hold as 0 once go-redis
// has filled in their defaults, meaning none (no retry, no redirect, no
// backoff), from being filled in again as defaults when the options make
// another client: go-redis reads 0 as "the default" and -1 as "none".
func none(n *int, backoffs ...*time.Duration) {
	if *n == 0 {
		*n = -1
	}
	for _, d := range backoffs {
		if *d == 0 {
			*d = -1
		}
	}
}
