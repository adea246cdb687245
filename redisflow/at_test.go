package redisflow

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/redistest"
)

// countingClock is a clock stopped at 0 that counts its reads.
type countingClock struct{ reads atomic.Int64 }

func (c *countingClock) Now() int64 { c.reads.Add(1); return 0 }

// AllowNAt reads no clock: a lease is alive, and a cached block holds, at
// the time given, whatever the cluster's clock says.
func TestAllowNAtKeepsLeasesAndBlocksAtTheTimeGiven(t *testing.T) {
	srv := redistest.Start(t)
	clk := &countingClock{}
	c := cluster(t, srv, WithInstances(1), WithClock(clk))
	leased := limiter(t, c, "at-lease", 100, time.Minute, WithLease(10, 10*time.Millisecond))
	once := limiter(t, c, "at-block", 1, time.Minute)
	reads := clk.reads.Load()
	ms := int64(time.Millisecond)

	if d := leased.AllowNAt(bg, 0, 1); !d.Allowed {
		t.Fatalf("AllowNAt(0) = %+v; want allowed, under the limit", d)
	}
	if d := leased.AllowNAt(bg, 9*ms, 1); !d.Allowed || c.Stats().RoundTrips != 1 {
		t.Fatalf("AllowNAt(9ms) = %+v after %d round trips; want allowed from the lease, alive until 10ms", d, c.Stats().RoundTrips)
	}
	if d := leased.AllowNAt(bg, 10*ms, 1); !d.Allowed || c.Stats().RoundTrips != 2 {
		t.Fatalf("AllowNAt(10ms) = %+v after %d round trips; want a second round trip, the lease expired at 10ms", d, c.Stats().RoundTrips)
	}

	if d := once.AllowNAt(bg, 0, 1); !d.Allowed {
		t.Fatalf("AllowNAt(0) = %+v; want the one permit allowed", d)
	}
	d := once.AllowNAt(bg, 0, 1)
	if d.Allowed || d.Reason != flow.RateLimited || d.RetryAfter <= 0 {
		t.Fatalf("AllowNAt(0) again = %+v; want blocked for the rate, with a RetryAfter", d)
	}
	trips, until := c.Stats().RoundTrips, int64(d.RetryAfter)
	if d := once.AllowNAt(bg, until-1, 1); d.Allowed || d.RetryAfter != time.Nanosecond || c.Stats().RoundTrips != trips {
		t.Errorf("AllowNAt(1ns before the block ends) = %+v; want the cached block, 1ns left, without a round trip", d)
	}
	if once.AllowNAt(bg, until, 1); c.Stats().RoundTrips != trips+1 {
		t.Errorf("AllowNAt(when the block ends) took no round trip; want one: the cached block is over")
	}
	if n := clk.reads.Load() - reads; n != 0 {
		t.Errorf("AllowNAt read the cluster's clock %d times; want never", n)
	}
}

// While Redis is down, the Local fallback counts at the time given.
func TestAllowNAtFallsBackAtTheTimeGiven(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	clk := &countingClock{}
	c, err := New(rdb, WithInstances(2), WithClock(clk), withProbeBackoff(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := limiter(t, c, "at-fallback", 10, time.Second)
	reads := clk.reads.Load()
	count := func(now int64) (n int) {
		for range 10 {
			if l.AllowNAt(bg, now, 1).Allowed {
				n++
			}
		}
		return n
	}
	for _, now := range []int64{0, int64(500 * time.Millisecond), int64(3 * time.Second)} {
		want := 5 // a share of 10 over 2 instances, in a fresh second
		if now == int64(500*time.Millisecond) {
			want = 0 // the same second as 0
		}
		if got := count(now); got != want {
			t.Errorf("at %v: the fallback allowed %d of 10; want %d", time.Duration(now), got, want)
		}
	}
	if s := c.Stats(); s.Healthy || s.Fallbacks != 30 {
		t.Errorf("stats %+v; want Redis down and 30 decisions by the fallback", s)
	}
	if n := clk.reads.Load() - reads; n != 0 {
		t.Errorf("AllowNAt read the cluster's clock %d times; want never", n)
	}
}
