package redisflow

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"
)

// clusterTimeout is the cluster timeout of the tests on a Redis Cluster
// that is not well: what no decision may outlast, but for latencySlack.
const clusterTimeout = 200 * time.Millisecond

// clusterBuckets is the buckets of the tests' limiters.
const clusterBuckets = 10

// An instance is one instance of a service over a Redis Cluster: a client
// and a Cluster of its own, a limiter whose key lands on each master, and a
// keyed limiter.
type instance struct {
	c        *Cluster
	byMaster []*Limiter // byMaster[i]: its key lands on the cluster's master i
	keyed    *KeyedLimiter
}

// clusterUsers are the keyed limiter's keys: their strings spread over the
// masters.
var clusterUsers = func() []string {
	u := make([]string, 30)
	for i := range u {
		u[i] = "user-" + strconv.Itoa(i)
	}
	return u
}()

// limitNames returns, for each master of rc, the name of a limit whose key
// lands on it.
func limitNames(rc *redisCluster) []string {
	var names []string
	for _, m := range rc.masters() {
		names = append(names, rc.keyOn(m, "limit-", func(name string) string {
			return key("slidegate", name, time.Second, clusterBuckets)
		}))
	}
	return names
}

// newInstance starts an instance over rc, its limiters named names, and
// returns it with how long New took. The instances discover each other
// through the heartbeat.
func newInstance(t *testing.T, rc *redisCluster, names []string, opts ...Option) (*instance, time.Duration) {
	t.Helper()
	start := time.Now()
	c, err := New(clusterClient(t, rc), append([]Option{WithTimeout(clusterTimeout),
		withHeartbeat(100 * time.Millisecond), withProbeBackoff(20*time.Millisecond, 500*time.Millisecond)}, opts...)...)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	in := &instance{c: c}
	for _, name := range names {
		in.byMaster = append(in.byMaster, limiter(t, c, name, 1_000_000, time.Second, WithBuckets(clusterBuckets)))
	}
	in.keyed = keyed(t, c, "users", flow.KeyWindow{Limit: 1_000_000, Interval: time.Second, Buckets: clusterBuckets})
	return in, took
}

// decide takes the instance's i-th decision of a round over every limiter
// and every user, and records how long it took.
func (in *instance) decide(i int, lat *latencies) flow.Decision {
	start := time.Now()
	var d flow.Decision
	if i%2 == 0 {
		d = in.byMaster[(i/2)%len(in.byMaster)].allow(bg)
	} else {
		d, _ = in.keyed.allowKey(bg, clusterUsers[(i/2)%len(clusterUsers)])
	}
	lat.add(start, time.Since(start))
	return d
}

// A load is decisions taken without pause but for a millisecond between
// two, by two workers per instance, as a service's requests would take
// them; it does not keep the machine's cores busy by itself.
type load struct {
	stop chan struct{}
	wg   sync.WaitGroup
	lat  latencies
}

func startLoad(ins []*instance) *load {
	ld := &load{stop: make(chan struct{})}
	for w, in := range append(ins, ins...) {
		ld.wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-ld.stop:
					return
				case <-time.After(time.Millisecond):
				}
				in.decide(i, &ld.lat)
			}
		})
	}
	return ld
}

// halt stops the load and waits for its workers.
func (ld *load) halt() {
	close(ld.stop)
	ld.wg.Wait()
}

// startInstances starts n instances over rc, each having decided once on
// every limiter and for a few users, through Redis.
func startInstances(t *testing.T, rc *redisCluster, names []string, n int) []*instance {
	t.Helper()
	var ins []*instance
	for range n {
		in, _ := newInstance(t, rc, names)
		ins = append(ins, in)
		for i := range 2 * len(clusterUsers) {
			if d := in.decide(i, &latencies{}); !d.Allowed {
				t.Fatalf("decision %d of a healthy cluster: %+v; want allowed", i, d)
			}
		}
		if s := in.c.Stats(); !s.Healthy || s.Fallbacks != 0 {
			t.Fatalf("stats %+v; want every decision of a healthy cluster taken by Redis", s)
		}
	}
	return ins
}

// checkLatency fails the test if a decision took more than the timeout and
// the slack, beyond what the process was stalled meanwhile (see stalls),
// and logs their distribution.
func checkLatency(t *testing.T, what string, lat *latencies, st *stalls) {
	t.Helper()
	t.Logf("%s: %v (timeout %v; the process stalled for up to %v)", what, lat, clusterTimeout, st.longest())
	if over := lat.over(clusterTimeout+latencySlack, st); len(over) > 0 {
		t.Errorf("%s: %d took longer than the timeout, %v, and %v of slack, beyond the process's stalls: %v",
			what, len(over), clusterTimeout, latencySlack, over)
	}
}

// waitRedisDecides waits until every instance decides through Redis again
// on every limiter and every user's key, allowed by Redis, not its fallback.
func waitRedisDecides(t *testing.T, ins []*instance, within time.Duration) {
	t.Helper()
	for n, in := range ins {
		if !waitFor(within, func() bool {
			if !in.c.Stats().Healthy {
				return false
			}
			before := in.c.Stats()
			for i := range 2 * len(clusterUsers) {
				if !in.decide(i, &latencies{}).Allowed {
					return false
				}
			}
			after := in.c.Stats()
			return after.Healthy && after.Fallbacks == before.Fallbacks
		}) {
			t.Fatalf("instance %d: not every decision was Redis's again within %v: %+v", n, within, in.c.Stats())
		}
	}
}

// victimOf returns a master that does not hold the heartbeat's key, which
// the probe asks: decisions whose keys it holds fail while the probe finds
// Redis well, the hardest case for the timeout, as instances go back and
// forth between Redis and the fallback.
func victimOf(t *testing.T, rc *redisCluster) *redisNode {
	t.Helper()
	beat := rc.owner("slidegate:instances")
	for _, m := range rc.masters() {
		if m != beat {
			return m
		}
	}
	t.Fatal("rediscluster: one master only")
	return nil
}

// Four instances share a limit over a Redis Cluster of three masters, and a
// per-key limit: no interval holds more than either limit, for the limit
// and for each key, counting every instance's grants at the server's time;
// and the keys spread over every master.
func TestInstancesShareLimitsExactlyOverARedisCluster(t *testing.T) {
	rc := startRedisCluster(t, 3, 0)
	const limit, interval, k = 30, 200 * time.Millisecond, 10
	var ls []*Limiter
	var ks []*KeyedLimiter
	for range 4 {
		c, err := New(clusterClient(t, rc), WithInstances(4), WithTimeout(testTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ls = append(ls, limiter(t, c, "shared", limit, interval, WithBuckets(k)))
		ks = append(ks, keyed(t, c, "users", flow.KeyWindow{Limit: 8, Interval: interval, Buckets: 4}))
	}
	g := hammer(t, ls, 2, 1, 6)
	if most, end := busiest(g.list, interval.Microseconds()); most > limit {
		t.Fatalf("%d allowed in the interval ending at %dµs; the limit is %d", most, end, limit)
	}
	if err := blockedOnlyWhenFull(g.list, (interval / k).Microseconds(), k, limit, 1); err != nil {
		t.Error(err)
	}

	var mu sync.Mutex
	byKey := map[string][]grant{}
	refused := map[string]int{}
	for _, l := range ks {
		l.trace = func(now int64, key string, n int64, j int) {
			mu.Lock()
			defer mu.Unlock()
			if j >= 0 {
				refused[key]++
			} else {
				byKey[key] = append(byKey[key], grant{now, n})
			}
		}
	}
	users := clusterUsers[:12]
	overloaded := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, u := range users {
			g := byKey[u]
			if refused[u] == 0 || len(g) == 0 || g[len(g)-1].at-g[0].at < 4*interval.Microseconds() {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for i, l := range ks {
		for w := range 2 {
			wg.Go(func() {
				for r := 0; !overloaded() && time.Now().Before(deadline); r++ {
					l.allowKey(bg, users[(i+w+r)%len(users)])
				}
			})
		}
	}
	wg.Wait()
	if !overloaded() {
		t.Fatalf("in a minute, not every key was refused with grants spanning 4 intervals: refusals %v", refused)
	}
	for _, u := range users {
		if most, end := busiest(byKey[u], interval.Microseconds()); most > 8 {
			t.Errorf("key %q: %d granted in the interval ending at %dµs; the limit is 8", u, most, end)
		}
	}
	for _, l := range ks {
		if s := l.c.Stats(); !s.Healthy || s.Failures != 0 || s.Fallbacks != 0 {
			t.Fatalf("stats %+v: want every decision taken by Redis", s)
		}
	}
	// Where the keys are, read from each master: the strings of a window
	// of a minute, which outlive any stall of the machine.
	spread := keyed(t, ls[0].c, "spread", flow.KeyWindow{Limit: 1, Interval: time.Minute})
	for _, u := range users {
		if d, _ := spread.allowKey(bg, u); !d.Allowed {
			t.Fatalf("%s: %+v; want the first request of the minute allowed", u, d)
		}
	}
	held := rc.keysOn("slidegate:k:")
	for _, m := range rc.masters() {
		if len(held[m]) == 0 {
			t.Errorf("master %s holds none of the keys: %v", m.Addr, held)
		}
	}
	t.Logf("%d grants of the shared limit; keys per master: %d, %d, %d",
		g.granted, len(held[rc.masters()[0]]), len(held[rc.masters()[1]]), len(held[rc.masters()[2]]))
}

// A master dies under load, then comes back. No decision waits for Redis
// longer than the timeout, whatever it meets: a connection refused, the
// cluster failing for want of the master's slots, instances that start
// while the master is dead. Once the master is back, every instance decides
// through Redis again.
func TestADecisionWaitsAtMostTheTimeoutWhenAMasterDies(t *testing.T) {
	rc := startRedisCluster(t, 3, 0)
	names := limitNames(rc)
	victim := victimOf(t, rc)
	ins := startInstances(t, rc, names, 4)
	st := measureStalls(t)
	ld := startLoad(ins)
	time.Sleep(300 * time.Millisecond)
	victim.Stop()
	time.Sleep(time.Second)
	// Instances that start while the master is dead: New waits no longer.
	// (A client that asked a random node first for COMMAND, with 5s of
	// its own, met the dead one a third of the time.)
	var starts latencies
	for range 10 {
		begun := time.Now()
		in, took := newInstance(t, rc, names)
		starts.add(begun, took)
		for i := range 2 * len(clusterUsers) {
			in.decide(i, &ld.lat)
		}
	}
	time.Sleep(time.Second + clusterNodeTimeout) // past the cluster's failing the master
	ld.halt()
	checkLatency(t, "decisions", &ld.lat, st)
	checkLatency(t, "New", &starts, st)

	victim.Restart()
	rc.waitOK(rc.nodes...)
	waitRedisDecides(t, ins, 15*time.Second)
}

// A master hangs (SIGSTOP): the connections to it stay open, and nothing
// answers. No decision waits longer than the timeout; once the master
// answers again, every instance decides through Redis again.
func TestADecisionWaitsAtMostTheTimeoutWhenAMasterHangs(t *testing.T) {
	rc := startRedisCluster(t, 3, 0, "--cluster-node-timeout", "60000") // no node is failed meanwhile
	names := limitNames(rc)
	victim := victimOf(t, rc)
	ins := startInstances(t, rc, names, 4)
	st := measureStalls(t)
	ld := startLoad(ins)
	time.Sleep(300 * time.Millisecond)
	victim.Pause()
	time.Sleep(2 * time.Second)
	var starts latencies
	for range 3 {
		begun := time.Now()
		in, took := newInstance(t, rc, names)
		starts.add(begun, took)
		for i := range 2 * len(clusterUsers) {
			in.decide(i, &ld.lat)
		}
	}
	ld.halt()
	victim.Resume()
	checkLatency(t, "decisions", &ld.lat, st)
	checkLatency(t, "New", &starts, st)
	waitRedisDecides(t, ins, 15*time.Second)
}

// A master dies, and its replica takes over its slots. No decision waits
// longer than the timeout meanwhile, and once the replica serves the slots,
// every instance decides through Redis again, the replica running the
// scripts it had never been asked.
func TestADecisionWaitsAtMostTheTimeoutWhileAMasterFailsOver(t *testing.T) {
	rc := startRedisCluster(t, 3, 1)
	names := limitNames(rc)
	victim := victimOf(t, rc)
	ins := startInstances(t, rc, names, 4)
	st := measureStalls(t)
	ld := startLoad(ins)
	time.Sleep(300 * time.Millisecond)
	victim.Stop()
	var promoted *redisNode
	if !waitFor(30*time.Second, func() bool {
		for _, n := range rc.nodes {
			if n.master == victim {
				if role, err := n.admin.Do(bg, "ROLE").Slice(); err == nil && len(role) > 0 && role[0] == "master" {
					promoted = n
					return true
				}
			}
		}
		return false
	}) {
		t.Fatal("the replica did not take over within 30s")
	}
	if !waitFor(30*time.Second, func() bool {
		info, err := promoted.admin.ClusterInfo(bg).Result()
		return err == nil && containsAll(info, "cluster_state:ok")
	}) {
		t.Fatal("the cluster is not ok again within 30s of the failover")
	}
	time.Sleep(time.Second)
	ld.halt()
	checkLatency(t, "decisions", &ld.lat, st)
	waitRedisDecides(t, ins, 15*time.Second)
}

// The slot of a limit moves from one master to another under load:
// decisions meet ASK and then MOVED. No decision waits longer than the
// timeout, the limit's key is counted in on the master its slot moved to,
// and every decision after the move is Redis's.
func TestADecisionWaitsAtMostTheTimeoutWhileASlotMoves(t *testing.T) {
	rc := startRedisCluster(t, 3, 0)
	names := limitNames(rc)
	ins := startInstances(t, rc, names, 4)
	st := measureStalls(t)
	ld := startLoad(ins)
	time.Sleep(300 * time.Millisecond)
	src, dst := rc.masters()[0], rc.masters()[2]
	k := ins[0].byMaster[0].redisKey()
	s := slot(k)
	for _, step := range []struct {
		n    *redisNode
		args []any
	}{
		{dst, []any{"CLUSTER", "SETSLOT", s, "IMPORTING", src.ID}},
		{src, []any{"CLUSTER", "SETSLOT", s, "MIGRATING", dst.ID}},
	} {
		if err := step.n.admin.Do(bg, step.args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", step.args, step.n.Addr, err)
		}
	}
	time.Sleep(300 * time.Millisecond) // decisions meet the slot migrating
	host, port, _ := net.SplitHostPort(dst.Addr)
	for {
		keys, err := src.admin.ClusterGetKeysInSlot(bg, s, 100).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.admin.Do(bg, args...).Err(); err != nil {
			t.Fatalf("MIGRATE: %v", err)
		}
	}
	time.Sleep(300 * time.Millisecond) // decisions meet ASK
	for _, n := range rc.masters() {
		if err := n.admin.Do(bg, "CLUSTER", "SETSLOT", s, "NODE", dst.ID).Err(); err != nil {
			t.Fatalf("CLUSTER SETSLOT NODE on %s: %v", n.Addr, err)
		}
	}
	time.Sleep(time.Second) // decisions meet MOVED
	// The load keeps the limit's key alive, counting.
	if n, err := dst.admin.Exists(bg, k).Result(); err != nil || n != 1 {
		t.Errorf("the limit's key on the master its slot moved to: %d, %v; want it there", n, err)
	}
	ld.halt()
	checkLatency(t, "decisions", &ld.lat, st)
	waitRedisDecides(t, ins, 15*time.Second)
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
