package redisflow

import (
	"context"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/clusterkeys"
	"github.com/slidegate/slidegate/internal/redistest"
)

// The keys of one request, under limiters of different limits, are
// counted together: when one refuses, none is counted, and the room check
// counts nothing.
func TestAKeySetOneKeyRefusesIsCountedInNone(t *testing.T) {
	srv := redistest.Start(t)
	c := cluster(t, srv, WithInstances(1))
	wide := keyed(t, c, "wide", flow.KeyWindow{Limit: 100, Interval: time.Minute})
	narrow := keyed(t, c, "narrow", flow.KeyWindow{Limit: 2, Interval: time.Minute})
	ctx := context.Background()
	now := c.clock.Now()
	set := []clusterkeys.Ask{{Limiter: wide, Key: "a", N: 1}, {Limiter: narrow, Key: "b", N: 1}}
	for i := range 2 {
		if j, d := clusterkeys.AllowAll(ctx, now, set); j != -1 || !d.Allowed {
			t.Fatalf("set %d: refused by %d: %+v", i, j, d)
		}
	}
	for range 3 {
		if got := clusterkeys.Left(ctx, wide, now, "a"); got != 98 {
			t.Fatalf("wide's room for a = %d; want 98 (the room check counts nothing)", got)
		}
	}
	j, d := clusterkeys.AllowAll(ctx, now, set)
	if j != 1 || d.Allowed || d.Reason != flow.RateLimited || d.RetryAfter <= 0 {
		t.Fatalf("third set: refused by %d, %+v; want 1, rate limited with a retry", j, d)
	}
	if got := clusterkeys.Left(ctx, wide, now, "a"); got != 98 {
		t.Errorf("after the refusal, wide's room for a = %d; want 98: nothing counted", got)
	}
	if got := clusterkeys.Left(ctx, narrow, now, "b"); got != 0 {
		t.Errorf("narrow's room for b = %d; want 0", got)
	}
	// One key asked twice in a set needs both: 2 of a limit of 2, then 3.
	if j, _ := clusterkeys.AllowAll(ctx, now, []clusterkeys.Ask{{Limiter: narrow, Key: "c", N: 1}, {Limiter: narrow, Key: "c", N: 2}}); j != 1 {
		t.Errorf("3 of a limit of 2 asked in two parts: refused by %d; want 1", j)
	}
	if got := clusterkeys.Left(ctx, narrow, now, "c"); got != 2 {
		t.Errorf("narrow's room for c = %d; want 2", got)
	}
	if s := c.Stats(); s.Fallbacks != 0 {
		t.Errorf("%d fallbacks with Redis up", s.Fallbacks)
	}
}

// While Redis is down, a set is the Local fallback's, all or none too.
func TestAKeySetWhileRedisIsDownIsTheLocalFallbacks(t *testing.T) {
	srv := redistest.Start(t)
	c := cluster(t, srv, WithInstances(2))
	wide := keyed(t, c, "wide", flow.KeyWindow{Limit: 100, Interval: time.Minute})
	narrow := keyed(t, c, "narrow", flow.KeyWindow{Limit: 4, Interval: time.Minute})
	srv.Stop()
	ctx := context.Background()
	now := c.clock.Now()
	set := []clusterkeys.Ask{{Limiter: wide, Key: "a", N: 1}, {Limiter: narrow, Key: "b", N: 1}}
	allowed := 0
	for range 4 {
		if j, _ := clusterkeys.AllowAll(ctx, now, set); j == -1 {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("%d sets allowed while Redis is down; want 2, the share of 4 on 2 instances", allowed)
	}
	if got := clusterkeys.Left(ctx, wide, now, "a"); got != 48 {
		t.Errorf("wide's room for a = %d; want 48 (its share, 50, less the 2 sets allowed)", got)
	}
	if c.Stats().Fallbacks == 0 {
		t.Error("no fallback counted")
	}
}
