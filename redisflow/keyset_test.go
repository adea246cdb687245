package redisflow

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/clusterkeys"
	"github.com/slidegate/slidegate/internal/flowstate"
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
		if set[0].Room != int64(100-i) || set[1].Room != int64(2-i) {
			t.Fatalf("set %d: rooms %d and %d; want %d and %d, before it counted", i, set[0].Room, set[1].Room, 100-i, 2-i)
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
	if set[0].Room != 98 || set[1].Room != 0 {
		t.Errorf("third set: rooms %d and %d; want 98 and 0", set[0].Room, set[1].Room)
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

// While Redis is down, a flood of distinct keys over the Local fallbacks of
// several keyed limiters holds at most the cluster's key memory in all:
// without it, each limiter's fallback would hold a budget of its own.
func TestAFloodOfKeysWhileRedisIsDownStaysWithinTheClustersKeyMemory(t *testing.T) {
	srv := redistest.Start(t)
	mem, err := flow.NewKeyMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	c := cluster(t, srv, WithInstances(1), WithKeyMemory(mem))
	var ls []*KeyedLimiter
	for i := range 4 {
		ls = append(ls, keyed(t, c, "flood"+strconv.Itoa(i), flow.KeyWindow{Limit: 10, Interval: time.Minute}))
	}
	srv.Stop()
	ctx := context.Background()
	now := c.clock.Now()
	for i := range 200_000 {
		ls[i%len(ls)].AllowKeyNAt(ctx, now, "key-"+strconv.Itoa(i), 1)
	}
	if c.Stats().Fallbacks == 0 {
		t.Fatal("no decision made by the fallback")
	}
	if inUse, limit := flowstate.KeyMemory(mem); inUse > limit || inUse < limit/2 {
		t.Errorf("the fallbacks hold %d bytes of a key memory of %d; want within it, and most of it used", inUse, limit)
	}
}

// Two asks of one key whose permits sum past 2^63-1 are refused, and leave
// the key's window as it was: a count that wrapped to a negative sum was
// written to Redis once, and lifted the key's limit on every instance.
func TestAKeySetWhoseCountsSumPastMaxInt64IsRefusedAndCountsNothing(t *testing.T) {
	srv := redistest.Start(t)
	c := cluster(t, srv, WithInstances(1))
	l := keyed(t, c, "narrow", flow.KeyWindow{Limit: 5, Interval: time.Minute})
	ctx := context.Background()
	now := c.clock.Now()
	if j, d := clusterkeys.AllowAll(ctx, now, []clusterkeys.Ask{{Limiter: l, Key: "u", N: 1}, {Limiter: l, Key: "u", N: math.MaxInt64}}); j != 1 || d.Allowed {
		t.Fatalf("1 + 2^63-1 permits under a limit of 5: ask %d, %+v; want the second refused", j, d)
	}
	allowed := 0
	for range 100 {
		if d, _ := l.AllowKeyNAt(ctx, now, "u", 1); d.Allowed {
			allowed++
		}
	}
	if s := c.Stats(); allowed != 5 || !s.Healthy || s.Fallbacks != 0 {
		t.Errorf("then %d of 100 single permits allowed under a limit of 5 (stats %+v); want 5, by Redis", allowed, s)
	}
	if left := clusterkeys.Left(ctx, l, now, "u"); left != 0 || !c.Stats().Healthy {
		t.Errorf("room left %d, stats %+v; want 0, Redis healthy", left, c.Stats())
	}
}

// On a Redis Cluster, a key set over several slots is counted a slot at a
// time, all or none: a refusal in a later slot gives back what the earlier
// counted, every decision Redis's, and Redis is not taken for down.
func TestAKeySetAcrossSlotsOfARedisClusterIsCountedAllOrNone(t *testing.T) {
	rc := startRedisCluster(t, 3, 0)
	c, err := New(clusterClient(t, rc), WithInstances(1), WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l := keyed(t, c, "users", flow.KeyWindow{Limit: 5, Interval: time.Minute})
	ms := rc.masters()
	a := rc.keyOn(ms[0], "a", func(name string) string { return l.keys(name)[0] })
	b := rc.keyOn(ms[1], "b", func(name string) string { return l.keys(name)[0] })
	ctx := context.Background()
	now := c.clock.Now()
	if j, d := clusterkeys.AllowAll(ctx, now, []clusterkeys.Ask{{Limiter: l, Key: a, N: 1}, {Limiter: l, Key: b, N: 1}}); j != -1 || !d.Allowed {
		t.Fatalf("a set of two slots with room: refused by %d, %+v", j, d)
	}
	if d, _ := l.AllowKeyNAt(ctx, now, b, 4); !d.Allowed {
		t.Fatalf("filling %s: %+v", b, d)
	}
	// a's slot is counted first, then b's refuses: a's 2 are given back.
	if j, d := clusterkeys.AllowAll(ctx, now, []clusterkeys.Ask{{Limiter: l, Key: a, N: 2}, {Limiter: l, Key: b, N: 1}}); j != 1 || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("a set whose second slot is full: refused by %d, %+v; want 1, with a retry", j, d)
	}
	if got := clusterkeys.Left(ctx, l, now, a); got != 4 {
		t.Errorf("%s's room after the refused set = %d; want 4: its 2 given back", a, got)
	}
	// b first refuses before a is counted.
	if j, _ := clusterkeys.AllowAll(ctx, now, []clusterkeys.Ask{{Limiter: l, Key: b, N: 1}, {Limiter: l, Key: a, N: 1}}); j != 0 {
		t.Errorf("b first: refused by %d; want 0", j)
	}
	if got := clusterkeys.Left(ctx, l, now, a); got != 4 {
		t.Errorf("%s's room = %d; want 4", a, got)
	}
	if s := c.Stats(); !s.Healthy || s.Failures != 0 || s.Fallbacks != 0 {
		t.Errorf("stats %+v: want every decision Redis's, Redis healthy", s)
	}
}

// A give-back takes a grant out of its own bucket: the windows after the
// grant's bucket leaves them hold what others were granted, no less. Given
// back in the bucket it is given back in, a grant would be taken out of
// windows that never held it, and let as many more in.
func TestAGiveBackTakesAGrantOutOfItsOwnBucket(t *testing.T) {
	srv := redistest.Start(t)
	c := cluster(t, srv, WithInstances(1))
	w := flow.KeyWindow{Limit: 10, Interval: time.Second, Buckets: 10}
	l := keyedAt(t, c, "giveback", []flow.KeyWindow{w})
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 50*int64(time.Millisecond)).UnixNano()
	at := func(d time.Duration) int64 { return t0 + int64(d) }
	grant := func(d time.Duration, n int64) {
		t.Helper()
		if got, _ := l.AllowKeyNAt(ctx, at(d), "k", n); !got.Allowed {
			t.Fatalf("%d at +%v: %+v; want allowed", n, d, got)
		}
	}
	room := func(d time.Duration, want int64) {
		t.Helper()
		if want > 0 {
			grant(d, want)
		}
		if got, _ := l.AllowKeyNAt(ctx, at(d), "k", 1); got.Allowed {
			t.Fatalf("at +%v, 1 more than a room of %d allowed", d, want)
		}
	}
	grant(0, 3)
	grant(250*time.Millisecond, 2)
	grant(520*time.Millisecond, 1)
	lw := &l.windows[0]
	if err := c.runOnce(ctx, giveBackScript, l.keys("k"), 3, t0/1000, lw.widthArg, lw.bucketArg).Err(); err != nil {
		t.Fatal(err)
	}
	room(600*time.Millisecond, 7) // 10 less 2 and 1: the 3 given back
	// At +1.4s the window holds buckets +400ms .. +1.4s: the 1 and the 7.
	room(1400*time.Millisecond, 2)
}
