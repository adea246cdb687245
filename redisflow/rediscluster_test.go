package redisflow

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/redistest"
)

// A redisCluster is a Redis Cluster of redis-servers that a test started
// (redistest.StartCluster), each node with a client to administer it.
type redisCluster struct {
	t     testing.TB
	c     *redistest.Cluster
	nodes []*redisNode // the masters first, then the replicas
}

// A redisNode is one server of a redisCluster.
type redisNode struct {
	*redistest.Node
	master *redisNode // a replica's master; nil for a master
	admin  *redis.Client
}

// clusterNodeTimeout is how long the nodes of a test cluster take to find
// one of them failing.
const clusterNodeTimeout = redistest.NodeTimeout

// startRedisCluster starts a Redis Cluster of masters masters, each with
// replicas replicas (see redistest.StartCluster), with a client to
// administer each node.
func startRedisCluster(t testing.TB, masters, replicas int, args ...string) *redisCluster {
	t.Helper()
	rc := &redisCluster{t: t, c: redistest.StartCluster(t, masters, replicas, args...)}
	of := map[*redistest.Node]*redisNode{}
	for _, n := range rc.c.Nodes {
		rn := &redisNode{Node: n, admin: redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})}
		t.Cleanup(func() { rn.admin.Close() })
		of[n] = rn
		rc.nodes = append(rc.nodes, rn)
	}
	for _, rn := range rc.nodes {
		rn.master = of[rn.Master]
	}
	return rc
}

// masters returns the nodes started as masters: the first of nodes.
func (rc *redisCluster) masters() []*redisNode { return rc.nodes[:len(rc.c.Masters())] }

// addrs returns the address of every node.
func (rc *redisCluster) addrs() []string { return rc.c.Addrs() }

// waitOK waits until each of nodes says the cluster is ok (see
// redistest.Cluster.WaitOK).
func (rc *redisCluster) waitOK(nodes ...*redisNode) {
	rc.t.Helper()
	ns := make([]*redistest.Node, len(nodes))
	for i, n := range nodes {
		ns[i] = n.Node
	}
	rc.c.WaitOK(ns...)
}

// owner returns the master that serves key's slot, as the first node that
// answers sees it.
func (rc *redisCluster) owner(key string) *redisNode {
	rc.t.Helper()
	s := int64(slot(key))
	var shards []redis.ClusterShard
	var err error
	for _, n := range rc.nodes { // the first that answers: some may be down
		if shards, err = n.admin.ClusterShards(bg).Result(); err == nil {
			break
		}
	}
	if err != nil {
		rc.t.Fatalf("rediscluster: CLUSTER SHARDS: %v", err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if s < r.Start || s > r.End {
				continue
			}
			for _, sn := range sh.Nodes {
				for _, n := range rc.nodes {
					if sn.Role == "master" && n.ID == sn.ID {
						return n
					}
				}
			}
		}
	}
	rc.t.Fatalf("rediscluster: no master of slot %d (key %q)", s, key)
	return nil
}

// keyOn returns a name, made from prefix and a number, for which key(name)
// lands on master m.
func (rc *redisCluster) keyOn(m *redisNode, prefix string, key func(name string) string) string {
	rc.t.Helper()
	for i := range 10000 {
		name := prefix + strconv.Itoa(i)
		if rc.owner(key(name)) == m {
			return name
		}
	}
	rc.t.Fatalf("rediscluster: no name %s* lands on %s", prefix, m.Addr)
	return ""
}

// keysOn returns the keys under prefix that each master holds.
func (rc *redisCluster) keysOn(prefix string) map[*redisNode][]string {
	out := map[*redisNode][]string{}
	for _, m := range rc.masters() {
		keys, err := m.admin.Keys(bg, prefix+"*").Result()
		if err != nil {
			rc.t.Fatalf("rediscluster: KEYS on %s: %v", m.Addr, err)
		}
		slices.Sort(keys)
		out[m] = keys
	}
	return out
}

// clusterClient returns a go-redis ClusterClient of rc, closed when the test
// ends.
func clusterClient(t testing.TB, rc *redisCluster) *redis.ClusterClient {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// A latencies collects how long decisions took, and when, from many
// goroutines.
type latencies struct {
	mu    sync.Mutex
	start []time.Time
	d     []time.Duration
}

func (l *latencies) add(start time.Time, d time.Duration) {
	l.mu.Lock()
	l.start, l.d = append(l.start, start), append(l.d, d)
	l.mu.Unlock()
}

// quantile returns the q-quantile of the latencies (q 1: the slowest).
func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

func (l *latencies) String() string {
	return fmt.Sprintf("n %d, p50 %v, p90 %v, p99 %v, max %v", len(l.d), l.quantile(0.5), l.quantile(0.9), l.quantile(0.99), l.quantile(1))
}

// over returns the latencies above bound, each with its start, beyond what
// the process was stalled while it lasted: what the code, not the machine,
// made it wait.
func (l *latencies) over(bound time.Duration, st *stalls) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for i, d := range l.d {
		if d > bound && d > bound+st.within(l.start[i], l.start[i].Add(d)) {
			out = append(out, d)
		}
	}
	return out
}

// A stalls measures how late the process runs a goroutine that asks to
// wake every millisecond: a loaded machine, or other programs on it, may
// leave the process waiting for a core far longer than any timeout, and a
// decision's deadline passes unnoticed meanwhile.
type stalls struct {
	mu   sync.Mutex
	from []time.Time // when a sleep began that woke late
	to   []time.Time // when it woke
	stop chan struct{}
	done chan struct{}
}

// measureStalls starts measuring, until the test ends.
func measureStalls(t testing.TB) *stalls {
	st := &stalls{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(st.done)
		for {
			from := time.Now()
			select {
			case <-st.stop:
				return
			case <-time.After(time.Millisecond):
			}
			if to := time.Now(); to.Sub(from) > 10*time.Millisecond {
				st.mu.Lock()
				st.from, st.to = append(st.from, from), append(st.to, to)
				st.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { close(st.stop); <-st.done })
	return st
}

// within returns the longest stall that overlapped [from, to].
func (st *stalls) within(from, to time.Time) time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	var most time.Duration
	for i := range st.from {
		if st.from[i].Before(to) && st.to[i].After(from) {
			most = max(most, st.to[i].Sub(st.from[i])-time.Millisecond)
		}
	}
	return most
}

// longest returns the longest stall measured.
func (st *stalls) longest() time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	var most time.Duration
	for i := range st.from {
		most = max(most, st.to[i].Sub(st.from[i])-time.Millisecond)
	}
	return most
}
