package redisflow

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/redistest"
)

// With Redis down from the start, a keyed limiter decides by the fallback:
// Local gives each instance its share of every limit and override (at least
// 1 where it was not 0), FailOpen allows all, FailClosed refuses all by
// window 0; none takes a round trip.
func TestKeyedFallbackModes(t *testing.T) {
	for _, tc := range []struct {
		fallback        FallbackPolicy
		plain, vip, ban int
	}{{Local, 5, 1, 0}, {FailOpen, 20, 20, 0}, {FailClosed, 0, 0, 0}} {
		t.Run(tc.fallback.String(), func(t *testing.T) {
			// Nothing listens on port 1: every round trip fails at once.
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
			defer rdb.Close()
			m := clock.NewManual(0)
			c, err := New(rdb, WithInstances(2), WithFallback(tc.fallback), WithClock(m))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			l := keyed(t, c, "down",
				flow.KeyWindow{Limit: 10, Interval: time.Second, Overrides: map[string]int64{"vip": 1, "ban": 0}},
				flow.KeyWindow{Limit: 1000, Interval: time.Hour})
			for key, want := range map[string]int{"plain": tc.plain, "vip": tc.vip, "ban": tc.ban} {
				allowed := 0
				for range 20 {
					d, j := l.allowKey(bg, key)
					switch {
					case d.Allowed:
						allowed++
					case tc.fallback == FailClosed && key != "ban" && (j != 0 || d.Reason != flow.RateLimited):
						t.Errorf("key %q: %+v by window %d; want RateLimited by window 0", key, d, j)
					}
				}
				if allowed != want {
					t.Errorf("key %q: allowed %d of 20 with Redis down; want %d (10 per second over 2 instances, vip 1, ban 0)", key, allowed, want)
				}
			}
			if s := c.Stats(); s.Healthy || s.RoundTrips != 0 || s.Fallbacks != 40 {
				t.Errorf("stats %+v: want down, no round trip, 40 fallbacks (ban's are refused before)", s)
			}
		})
	}
}

// The Local fallback follows the number of instances: made anew, with its
// shares, when the heartbeat has learnt another.
func TestKeyedLocalFallbackFollowsTheInstances(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	m := clock.NewManual(0)
	c, err := New(rdb, WithInstances(1), WithClock(m))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := keyed(t, c, "follow", flow.KeyWindow{Limit: 12, Interval: time.Second})
	for _, instances := range []int64{1, 4, 3} {
		c.instances.Store(instances) // as the heartbeat would
		m.Advance(2 * time.Second)   // a fresh window
		allowed := 0
		for range 20 {
			if d, _ := l.allowKey(bg, "k"); d.Allowed {
				allowed++
			}
		}
		if want := 12 / int(instances); allowed != want {
			t.Errorf("%d instances: the fallback allowed %d; want %d", instances, allowed, want)
		}
	}
}

// Redis crashes, then comes back: decisions fall back within the timeout,
// to each instance's share, without round trips, and go back to Redis once
// the probe finds it.
func TestKeyedOutageFallsBackWithinTheTimeoutAndRecovers(t *testing.T) {
	srv := redistest.Start(t)
	m := clock.NewManual(0)
	const timeout = 300 * time.Millisecond
	c := cluster(t, srv, WithInstances(4), WithTimeout(timeout), withProbeBackoff(20*time.Millisecond, 200*time.Millisecond), WithClock(m))
	l := keyed(t, c, "outage", flow.KeyWindow{Limit: 20, Interval: time.Hour})
	for range 3 {
		if d, _ := l.allowKey(bg, "u"); !d.Allowed {
			t.Fatal("refused while healthy, under the limit")
		}
	}
	srv.Stop()
	var slowest time.Duration
	for range 5 {
		start := time.Now()
		l.allowKey(bg, "u")
		slowest = max(slowest, time.Since(start))
	}
	if c.Stats().Healthy {
		t.Fatal("still healthy after decisions failed")
	}
	m.Advance(2 * time.Hour) // a fresh fallback window
	trips, allowed := c.Stats().RoundTrips, 0
	for range 10 {
		if d, _ := l.allowKey(bg, "v"); d.Allowed {
			allowed++
		}
	}
	if allowed != 5 {
		t.Errorf("the fallback allowed %d of 10; want the instance's share, 20/4 = 5", allowed)
	}
	if got := c.Stats().RoundTrips - trips; got != 0 {
		t.Errorf("%d round trips while Redis was known down; want none", got)
	}
	srv.Restart()
	if !waitFor(10*time.Second, func() bool { return c.Stats().Healthy }) {
		t.Fatal("Redis is back, but the cluster did not find it within 10s")
	}
	trips = c.Stats().RoundTrips
	if d, _ := l.allowKey(bg, "v"); !d.Allowed || c.Stats().RoundTrips != trips+1 {
		t.Errorf("after recovery: %+v after %d round trips; want allowed by Redis, in one", d, c.Stats().RoundTrips-trips)
	}
	if slowest > timeout+time.Second {
		t.Errorf("the slowest decision took %v; the timeout is %v", slowest, timeout)
	}
}

// Another program's hash where a key's window should be is an error that
// retrying will not fix (WRONGTYPE): reported under the limiter's keys,
// whatever the request's key, and cleared by the next success, whatever its
// key.
func TestKeyedWrongTypeIsReportedUnderTheLimitersKeys(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr)
	logDefault(t) // the error goes to slog.Default: keep it out of the test's output
	c := cluster(t, srv, WithInstances(1), withProbeBackoff(time.Millisecond, 10*time.Millisecond))
	l := keyed(t, c, "typed", flow.KeyWindow{Limit: 10, Interval: time.Minute})
	do(t, rdb, "HSET", l.redisKeys("x")[0], "o", "1")
	l.allowKey(bg, "x")
	err := c.Stats().Err
	if !errors.Is(err, ErrMisconfigured) || !strings.Contains(err.Error(), "the keyed limit script") || !strings.Contains(err.Error(), `"slidegate:k:{*}:typed:1m0s:20"`) {
		t.Fatalf("Stats().Err = %v; want ErrMisconfigured naming the keyed limit script and the limiter's keys", err)
	}
	do(t, rdb, "DEL", l.redisKeys("x")[0])
	if !waitFor(10*time.Second, func() bool { return c.Stats().Healthy }) {
		t.Fatal("the probe did not find Redis healthy within 10s")
	}
	if d, _ := l.allowKey(bg, "y"); !d.Allowed {
		t.Fatalf("another key after the fix: %+v; want allowed", d)
	}
	if err := c.Stats().Err; err != nil {
		t.Errorf("Stats().Err = %v after a keyed decision succeeded; want nil", err)
	}
}
