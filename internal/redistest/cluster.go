package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A Cluster is a Redis Cluster of redis-servers that a test started, each
// on a free loopback port with its cluster configuration in a directory of
// its own, stopped when the test ends.
type Cluster struct {
	// Nodes are the masters first, then the replicas.
	Nodes []*Node
	tb    testing.TB
}

// A Node is one server of a Cluster.
type Node struct {
	*Server
	// ID is the node's cluster ID (CLUSTER MYID).
	ID string
	// Master is a replica's master; nil for a master.
	Master *Node
}

// NodeTimeout is how long the nodes of a test cluster take to find one of
// them failing: short, for failovers in a test's time, and long enough
// that a loaded machine does not fail a node over on its own.
const NodeTimeout = 2 * time.Second

// StartCluster starts a Redis Cluster of masters masters, each with
// replicas replicas, the slots split evenly between the masters, and waits
// until every node sees the whole cluster in state ok. It skips the test
// when redis-server is not installed. args are given to every server.
func StartCluster(tb testing.TB, masters, replicas int, args ...string) *Cluster {
	tb.Helper()
	rc := &Cluster{tb: tb}
	args = append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(NodeTimeout.Milliseconds(), 10),
		// A replica takes over however long ago it last heard its master.
		"--cluster-replica-validity-factor", "0"}, args...)
	for i := range masters * (1 + replicas) {
		n := &Node{Server: Start(tb, args...)}
		id, err := Do(n.Addr, "CLUSTER", "MYID")
		if err != nil {
			tb.Fatalf("redistest: CLUSTER MYID of %s: %v", n.Addr, err)
		}
		n.ID = id
		if i >= masters {
			n.Master = rc.Nodes[(i-masters)%masters]
		}
		rc.Nodes = append(rc.Nodes, n)
	}
	for i, n := range rc.Masters() {
		lo, hi := i*16384/masters, (i+1)*16384/masters-1
		if _, err := Do(n.Addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			tb.Fatalf("redistest: CLUSTER ADDSLOTSRANGE %d %d on %s: %v", lo, hi, n.Addr, err)
		}
	}
	first := rc.Nodes[0]
	for _, n := range rc.Nodes[1:] {
		host, port, _ := net.SplitHostPort(n.Addr)
		if _, err := Do(first.Addr, "CLUSTER", "MEET", host, port); err != nil {
			tb.Fatalf("redistest: CLUSTER MEET %s: %v", n.Addr, err)
		}
	}
	for _, n := range rc.Nodes {
		if n.Master == nil {
			continue
		}
		// A replica can follow its master once it knows it.
		var err error
		if !WaitFor(30*time.Second, func() bool {
			_, err = Do(n.Addr, "CLUSTER", "REPLICATE", n.Master.ID)
			return err == nil
		}) {
			tb.Fatalf("redistest: CLUSTER REPLICATE on %s: %v", n.Addr, err)
		}
	}
	rc.WaitOK(rc.Nodes...)
	for _, n := range rc.Nodes {
		if n.Master == nil {
			continue
		}
		// A replica that has not copied its master's data would not take
		// over from it.
		if !WaitFor(30*time.Second, func() bool {
			info, err := Do(n.Addr, "INFO", "replication")
			return err == nil && strings.Contains(info, "master_link_status:up")
		}) {
			tb.Fatalf("redistest: the replica %s did not copy its master %s within 30s", n.Addr, n.Master.Addr)
		}
	}
	return rc
}

// Masters returns the nodes started as masters.
func (rc *Cluster) Masters() []*Node {
	var ms []*Node
	for _, n := range rc.Nodes {
		if n.Master == nil {
			ms = append(ms, n)
		}
	}
	return ms
}

// Addrs returns the address of every node, for a cluster client to start
// from.
func (rc *Cluster) Addrs() []string {
	var a []string
	for _, n := range rc.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

// WaitOK waits until each of nodes says the cluster is ok, knows every node
// and sees every slot served, and fails the test after 30s.
func (rc *Cluster) WaitOK(nodes ...*Node) {
	rc.tb.Helper()
	var last string
	if !WaitFor(30*time.Second, func() bool {
		for _, n := range nodes {
			info, err := Do(n.Addr, "CLUSTER", "INFO")
			if err != nil {
				last = fmt.Sprintf("%s: %v", n.Addr, err)
				return false
			}
			for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384",
				"cluster_known_nodes:" + strconv.Itoa(len(rc.Nodes))} {
				if !strings.Contains(info, want) {
					last = fmt.Sprintf("%s: no %s in\n%s", n.Addr, want, info)
					return false
				}
			}
		}
		return true
	}) {
		rc.tb.Fatalf("redistest: the cluster is not ok within 30s: %s", last)
	}
}

// WaitFor polls cond until it holds or d passes, and reports whether it
// held. Redis keeps real time, so tests of what Redis does over time poll.
func WaitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Do sends one command to the server at addr on a new connection and
// returns its reply: a status, a bulk string or an integer, as text. An
// error reply is an error. It is for the administration of test servers,
// whose replies are not arrays.
func Do(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: an empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redistest: a bulk reply of length %q", line[1:])
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redistest: a reply of type %q; want a status, a bulk string or an integer", line[0])
}
