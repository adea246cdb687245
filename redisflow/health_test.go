package redisflow

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/redistest"
)

// clusterEvents returns the guard's ClusterChanged events, oldest first.
func clusterEvents(g *slidegate.Guard) []slidegate.Event {
	var out []slidegate.Event
	for _, e := range g.Events() {
		if e.Kind == "cluster_changed" {
			out = append(out, e)
		}
	}
	return out
}

// describe writes health as the tests compare it.
func describe(h slidegate.ClusterHealth) string {
	switch {
	case h.Err != nil:
		return fmt.Sprintf("healthy=%v err", h.Healthy)
	case h.Healthy:
		return "healthy"
	}
	return "down"
}

// waitEvents waits until the guard has n ClusterChanged events, and returns
// them described.
func waitEvents(t *testing.T, g *slidegate.Guard, n int) []string {
	t.Helper()
	waitFor(20*time.Second, func() bool { return len(clusterEvents(g)) >= n })
	var out []string
	for _, e := range clusterEvents(g) {
		out = append(out, describe(e.Cluster))
	}
	return out
}

// Redis crashes and comes back: the guard records the cluster down, then
// healthy again, in that order, once each, however many decisions met the
// outage.
func TestAGuardIsToldOfAnOutageAndTheRecovery(t *testing.T) {
	srv := redistest.Start(t)
	c := cluster(t, srv, WithInstances(2), withProbeBackoff(10*time.Millisecond, 100*time.Millisecond))
	g, err := slidegate.New(slidegate.WithCluster(c))
	if err != nil {
		t.Fatal(err)
	}
	l := limiter(t, c, "outage", 1000, time.Minute)
	if !l.allow(bg).Allowed {
		t.Fatal("blocked under the limit")
	}
	if evs := clusterEvents(g); len(evs) != 0 {
		t.Fatalf("events %v while healthy; want none", evs)
	}

	srv.Stop()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				l.allow(bg)
			}
		})
	}
	wg.Wait()
	if got := waitEvents(t, g, 1); len(got) != 1 || got[0] != "down" {
		t.Fatalf("cluster events %q after Redis crashed; want one: down", got)
	}
	srv.Restart()
	got := waitEvents(t, g, 2)
	if len(got) != 2 || got[1] != "healthy" {
		t.Fatalf("cluster events %q after Redis came back; want down, healthy", got)
	}
	evs := clusterEvents(g)
	if evs[0].Seq >= evs[1].Seq || evs[0].Cluster.Failures == 0 {
		t.Errorf("events %+v; want them in order, the first counting the failures", evs)
	}
	if h, _ := g.ClusterHealth(); !h.Healthy {
		t.Errorf("ClusterHealth = %+v; want healthy, as the last event says", h)
	}
}

// The cluster's user loses a permission while the service runs, then gets
// it back: the guard records the cluster down with the error, then healthy,
// and nothing between, though the probe and the decisions met the error
// again and again.
func TestAGuardIsToldOfAPermissionLostAndRestored(t *testing.T) {
	srv := redistest.Start(t)
	logDefault(t) // the error's lines, which another test checks
	admin := client(t, srv.Addr)
	do(t, admin, "ACL", "SETUSER", "svc", "on", ">pw", "~slidegate:*", "+@all")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "svc", Password: "pw", ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	c, err := New(rdb, WithTimeout(testTimeout), WithInstances(2), withProbeBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	g, err := slidegate.New(slidegate.WithCluster(c))
	if err != nil {
		t.Fatal(err)
	}
	l := limiter(t, c, "acl", 1000, time.Minute)
	if !l.allow(bg).Allowed {
		t.Fatal("blocked under the limit")
	}

	do(t, admin, "ACL", "SETUSER", "svc", "-evalsha")
	for range 10 {
		l.allow(bg)
	}
	if !waitFor(20*time.Second, func() bool { return c.Stats().PermanentFailures >= 5 }) {
		t.Fatalf("stats %+v; want the probes to meet NOPERM", c.Stats())
	}
	evs := clusterEvents(g)
	if len(evs) != 1 || evs[0].Cluster.Healthy || !errors.Is(evs[0].Cluster.Err, ErrMisconfigured) ||
		!redis.HasErrorPrefix(evs[0].Cluster.Err, "NOPERM") {
		t.Fatalf("cluster events %+v; want one: down, with the NOPERM error", evs)
	}

	do(t, admin, "ACL", "SETUSER", "svc", "+evalsha")
	got := waitEvents(t, g, 2)
	if want := []string{"healthy=false err", "healthy"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cluster events %q; want %q", got, want)
	}
	if !l.allow(bg).Allowed {
		t.Error("blocked under the limit after the permission came back")
	}
	if evs := clusterEvents(g); len(evs) != 2 {
		t.Errorf("cluster events %+v after a decision; want the two", evs)
	}
}

// A cluster unhealthy when a func is given tells it at once; a later func is
// told too, nil is no func, and Close tells nothing.
func TestOnHealthChangeTellsTheHealthAtOnceAndOneFunc(t *testing.T) {
	c, err := New(client(t, "127.0.0.1:1"), WithInstances(2), WithTimeout(testTimeout), withProbeBackoff(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var first, second []string
	c.OnHealthChange(func(h slidegate.ClusterHealth) { mu.Lock(); first = append(first, describe(h)); mu.Unlock() })
	c.OnHealthChange(func(h slidegate.ClusterHealth) { mu.Lock(); second = append(second, describe(h)); mu.Unlock() })
	c.OnHealthChange(nil)
	c.failed(errors.New("connection refused")) // down already: no change
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(first) != "[down]" || fmt.Sprint(second) != "[down]" {
		t.Errorf("told %q, then %q; want each func told once, at once, that Redis is down", first, second)
	}
	g, err := slidegate.New(slidegate.WithCluster(c))
	if err != nil {
		t.Fatal(err)
	}
	if evs := clusterEvents(g); len(evs) != 0 {
		t.Errorf("a guard of a closed cluster recorded %+v; want nothing", evs)
	}
}

// Decisions fail from many goroutines while the probe finds Redis again and
// again: every telling says the opposite of the one before, the first says
// down, and the last says what is true at the end.
func TestHealthChangesAreToldInOrder(t *testing.T) {
	srv := redistest.Start(t)
	f := &faulty{Client: client(t, srv.Addr)}
	c, err := New(f, WithInstances(2), WithTimeout(testTimeout), withProbeBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var told []string
	c.OnHealthChange(func(h slidegate.ClusterHealth) { mu.Lock(); told = append(told, describe(h)); mu.Unlock() })
	l := limiter(t, c, "flap", 1_000_000, time.Minute)
	outage := errors.New("connection reset by peer") // not permanent: an outage
	changes := func() int { mu.Lock(); defer mu.Unlock(); return len(told) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					l.allow(bg)
				}
			}
		})
	}
	// Redis fails and answers by turns, at whatever pace the machine
	// allows, until many changes were told.
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; changes() < 40 && time.Now().Before(deadline); i++ {
		if i%2 == 0 {
			f.err.Store(&outage)
		} else {
			f.err.Store(nil)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	f.err.Store(nil)
	if !waitFor(20*time.Second, func() bool { return c.Stats().Healthy }) {
		t.Fatal("the probe did not find Redis again")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) < 2 || told[0] != "down" || told[len(told)-1] != "healthy" {
		t.Fatalf("told %d changes, first %q, last %q; want at least down then healthy", len(told), told[0], told[len(told)-1])
	}
	for i := 1; i < len(told); i++ {
		if told[i] == told[i-1] {
			t.Fatalf("told %q twice in a row (changes %d and %d of %d)", told[i], i-1, i, len(told))
		}
	}
	t.Logf("%d changes told", len(told))
}

// Guards that share one cluster, as a process's guards do, are each told.
func TestEveryGuardOfAClusterIsTold(t *testing.T) {
	c, err := New(client(t, "127.0.0.1:1"), WithInstances(2), WithTimeout(testTimeout), withProbeBackoff(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g1, err := slidegate.New(slidegate.WithCluster(c))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := slidegate.New(slidegate.WithCluster(c))
	if err != nil {
		t.Fatal(err)
	}
	before1, before2 := len(clusterEvents(g1)), len(clusterEvents(g2))
	c.markUp() // as the probe does when Redis answers
	for i, g := range []*slidegate.Guard{g1, g2} {
		evs := clusterEvents(g)
		if len(evs) != []int{before1, before2}[i]+1 || !evs[len(evs)-1].Cluster.Healthy {
			t.Errorf("guard %d: cluster events %+v, want the cluster healthy told last", i+1, evs)
		}
	}
}
