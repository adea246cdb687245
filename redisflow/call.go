package redisflow

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// run runs script s by its SHA1 digest: one round trip, the script's text
// staying out of it. If Redis answers NOSCRIPT (it restarted, its scripts
// were flushed, or a replica that never ran them took over), run runs the
// script by its text, on the same node, which loads it there. It notes an
// error that retrying will not fix, and the success that ends it.
func (c *Cluster) run(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	return c.runAs(ctx, s, keys[0], keys, args...)
}

// runAs is run, noting what the call meets as a call of s on key named: the
// name of keys[0] that a fault is recorded, logged and cleared under.
func (c *Cluster) runAs(ctx context.Context, s *script, named string, keys []string, args ...any) *redis.Cmd {
	r := c.runOnce(ctx, s, keys, args...)
	if !c.starting {
		c.note(s, named, r.Err())
	}
	return r
}

// runOnce is run without the noting. It is the one way the cluster calls
// Redis, and so where what the client meets is contained: a panic of the
// client, reading a reply that broke it, becomes an error wrapping
// ErrMalformedReply, as the outage the fallback takes it for, and every
// connection of the cluster's own is closed, the one that held the rest of
// that reply among them, so that no later call reads it. A call that fails
// has a Redis Cluster's client learn the slots again: the master it called
// may have died, its replica serving them now.
func (c *Cluster) runOnce(ctx context.Context, s *script, keys []string, args ...any) (r *redis.Cmd) {
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("%w: the client failed reading %s's answer: %v", ErrMalformedReply, s.name, p)
			c.conns.closeAll(err)
			r = redis.NewCmd(ctx)
			r.SetErr(err)
		}
		if err := r.Err(); err != nil && c.slots != nil && permanent(err) == "" {
			c.slots.ReloadState(ctx)
		}
	}()
	r = s.EvalSha(ctx, c.client, keys, args...)
	if err := r.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return r
	}
	c.loads.Add(1)
	return s.Eval(ctx, c.client, keys, args...)
}
