package redisflow

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/redistest"
)

// Redis crashes and restarts, then hangs and resumes. Each time, decisions
// fall back within the timeout, the fallback limits each instance to its
// share, no decision goes to Redis while it is down, and the probe finds
// Redis again.
func TestOutageFallsBackWithinTheTimeoutAndRecovers(t *testing.T) {
	srv := redistest.Start(t)
	m := clock.NewManual(0) // the fallback's window moves only when told
	// Long enough for every round trip to a Redis that answers, on a
	// loaded machine; short enough to tell from the seconds that a client
	// ignoring the deadline would wait.
	const timeout = 300 * time.Millisecond
	const limit, instances = 1000, 200 // a share of 5 each
	c := cluster(t, srv, WithInstances(instances), WithTimeout(timeout),
		withProbeBackoff(20*time.Millisecond, 200*time.Millisecond), WithClock(m))
	l := limiter(t, c, "outage", limit, time.Hour)

	var mu sync.Mutex
	var slowest time.Duration
	decide := func() bool {
		start := time.Now()
		d := l.allow(bg)
		e := time.Since(start)
		mu.Lock()
		slowest = max(slowest, e)
		mu.Unlock()
		return d.Allowed
	}
	for range 3 {
		if !decide() {
			t.Fatal("blocked while healthy, under the limit")
		}
	}
	if s := c.Stats(); !s.Healthy || s.RoundTrips != 3 {
		t.Fatalf("stats %+v; want healthy, 3 round trips", s)
	}

	for _, outage := range []struct {
		name     string
		down, up func()
	}{{"crash", srv.Stop, srv.Restart}, {"hang", srv.Pause, srv.Resume}} {
		outage.down()
		// Requests in flight as Redis goes: none waits past the timeout.
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 3 {
					decide()
				}
			})
		}
		wg.Wait()
		if c.Stats().Healthy {
			t.Fatalf("%s: still healthy after decisions failed", outage.name)
		}
		m.Advance(2 * time.Hour) // a fresh fallback window: more than k+1 buckets on
		trips := c.Stats().RoundTrips
		allowed := 0
		for range 20 {
			if decide() {
				allowed++
			}
		}
		if allowed != limit/instances {
			t.Errorf("%s: the fallback allowed %d of 20; want the instance's share, %d", outage.name, allowed, limit/instances)
		}
		if s := c.Stats(); s.RoundTrips != trips {
			t.Errorf("%s: %d round trips while Redis was down; want none", outage.name, s.RoundTrips-trips)
		}

		outage.up()
		if !waitFor(10*time.Second, func() bool { return c.Stats().Healthy }) {
			t.Fatalf("%s: Redis is back, but the cluster did not find it within 10s", outage.name)
		}
		trips = c.Stats().RoundTrips
		if !decide() {
			t.Errorf("%s: blocked after recovery, under the limit", outage.name)
		}
		if s := c.Stats(); s.RoundTrips != trips+1 {
			t.Errorf("%s: %d round trips for a decision after recovery; want 1", outage.name, s.RoundTrips-trips)
		}
	}
	// The bound is the timeout plus scheduling: a client that ignored the
	// deadline would hold a request for its ReadTimeout, 3s.
	if slowest > timeout+time.Second {
		t.Errorf("the slowest decision took %v; the timeout is %v", slowest, timeout)
	}
	t.Logf("slowest decision: %v (timeout %v)", slowest, timeout)
}

// A heartbeat waits for Redis no longer than a decision would, and so
// neither does Close, however long the heartbeat's period; nor does Close try
// to leave a heartbeat key it never joined.
func TestCloseDoesNotWaitForAHungRedis(t *testing.T) {
	srv := redistest.Start(t)
	srv.Pause()
	defer srv.Resume()
	const timeout = 200 * time.Millisecond
	// New's checks find Redis down; the probe then tries it every
	// millisecond, each time hanging for the timeout.
	c, err := New(client(t, srv.Addr), WithTimeout(timeout), withHeartbeat(time.Hour), withProbeBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a probe is under way, hanging
	start := time.Now()
	c.Close()
	if d := time.Since(start); d > timeout+time.Second {
		t.Errorf("Close took %v, waiting for a Redis that hangs; the timeout is %v", d, timeout)
	}
}

// The cluster's timeout bounds its calls whatever the timeouts of the client
// it is given: a client that waits seconds for a reply, and ignores its
// context's deadline, makes a decision wait no longer for a Redis that
// hangs, and neither does New.
func TestADecisionWaitsAtMostTheTimeoutWhateverTheClientsOwnTimeouts(t *testing.T) {
	srv := redistest.Start(t)
	slow := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		DialTimeout: 10 * time.Second, MaxRetries: 5, MinRetryBackoff: time.Second, MaxRetryBackoff: 5 * time.Second})
	t.Cleanup(func() { slow.Close() })
	const timeout = 200 * time.Millisecond
	c, err := New(slow, WithInstances(1), WithTimeout(timeout), withProbeBackoff(time.Hour, time.Hour))
	if err != nil {
		t.Fatalf("New with a client of its own timeouts: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	l := limiter(t, c, "slow", 100, time.Second)
	if d := l.allow(bg); !d.Allowed {
		t.Fatalf("%+v; want allowed by a Redis that answers", d)
	}
	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	d := l.allow(bg)
	if took := time.Since(start); took > timeout+time.Second {
		t.Errorf("a decision waited %v for a Redis that hangs; the timeout is %v", took, timeout)
	}
	if s := c.Stats(); s.Healthy || s.Failures != 1 || !d.Allowed {
		t.Errorf("%+v, stats %+v; want the Local fallback's decision, Redis down", d, s)
	}
	start = time.Now()
	c2, err := New(slow, WithInstances(1), WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if took := time.Since(start); took > timeout+time.Second {
		t.Errorf("New waited %v for a Redis that hangs; the timeout is %v", took, timeout)
	}
}
