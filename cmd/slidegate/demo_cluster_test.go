package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/internal/redistest"
)

// clusterSummary reads the summary's cluster line: the decisions taken to
// Redis and those the fallback made.
func clusterSummary(t *testing.T, out, addr string) (trips, fallbacks int) {
	t.Helper()
	prefix := "cluster (Redis at " + addr + "): "
	i := strings.Index(out, prefix)
	if i < 0 {
		t.Fatalf("no cluster line in the summary:\n%s", out)
	}
	if _, err := fmt.Sscanf(out[i+len(prefix):], "%d decisions taken to Redis, %d by the fallback", &trips, &fallbacks); err != nil {
		t.Fatalf("the cluster line %q: %v", strings.SplitN(out[i:], "\n", 2)[0], err)
	}
	return trips, fallbacks
}

// Two demos on one Redis: each makes the demo's three QPS rules
// cluster-wide, takes its decisions to Redis, joins the other in the
// heartbeat, and exits cleanly when its time is up.
func TestDemosShareTheirLimitsThroughRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("the demos run for 8 s")
	}
	srv := redistest.Start(t)
	type result struct {
		code     int
		out, err string
	}
	var results [2]result
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			var r result
			r.code, r.out, r.err = runCmd("demo", "--duration", "8s", "--addr", "127.0.0.1:0", "--cpu", "0.5", "--redis", srv.Addr)
			results[i] = r
		})
	}
	// While both run, both count in the heartbeat: they share the limits.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	shared := false
	for deadline := time.Now().Add(8 * time.Second); !shared && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		n, err := rdb.ZCard(context.Background(), clusterPrefix+":instances").Result()
		shared = err == nil && n == 2
	}
	wg.Wait()
	if !shared {
		t.Error("the two demos never counted together in the heartbeat key")
	}
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("demo %d exited %d\n%s\n%s", i, r.code, r.out, r.err)
		}
		if !strings.Contains(r.out, "Cluster-wide: 3 of the flow rules, kept in Redis at "+srv.Addr) {
			t.Errorf("demo %d does not say which rules are cluster-wide:\n%s", i, r.out)
		}
		if trips, _ := clusterSummary(t, r.out, srv.Addr); trips == 0 {
			t.Errorf("demo %d took no decision to Redis:\n%s", i, r.out)
		}
		if !strings.Contains(r.out, "stopped after ") {
			t.Errorf("demo %d did not stop cleanly:\n%s", i, r.out)
		}
	}
	keys, err := rdb.Keys(context.Background(), clusterPrefix+":k:{"+abusiveUser+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Errorf("keys of %s's per-user limits in Redis: %q, %v; want them kept there", abusiveUser, keys, err)
	}
}

// A Redis that does not answer is an outage, not a mistake: the demo says
// so, limits on its own, and stops cleanly. One that refuses the cluster
// (it wants a password) stops the demo with the reason.
func TestDemoWithoutItsRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs for 2 s")
	}
	code, out, errOut := runCmd("demo", "--duration", "2s", "--addr", "127.0.0.1:0", "--cpu", "0.5", "--redis", "127.0.0.1:1")
	if code != 0 || !strings.Contains(out, "Redis at 127.0.0.1:1 does not answer now") {
		t.Fatalf("demo with nothing at --redis: %d\n%s\n%s", code, out, errOut)
	}
	if trips, fallbacks := clusterSummary(t, out, "127.0.0.1:1"); trips != 0 || fallbacks == 0 {
		t.Errorf("%d decisions taken to Redis, %d by the fallback; want none, and the fallback's", trips, fallbacks)
	}

	srv := redistest.Start(t, "--requirepass", "secret")
	code, out, errOut = runCmd("demo", "--duration", "2s", "--addr", "127.0.0.1:0", "--redis", srv.Addr)
	if code != 1 || !strings.Contains(errOut, "--redis "+srv.Addr) || !strings.Contains(errOut, "NOAUTH") {
		t.Fatalf("demo with a Redis that wants a password: %d\n%s\n%s", code, out, errOut)
	}
}

func TestDemoRedisFlag(t *testing.T) {
	for _, addr := range []string{"localhost", "6379", "a:b:c", "localhost:", "localhost:typo", "localhost:0", "localhost:65536"} {
		if code, _, errOut := runCmd("demo", "--redis", addr); code != 2 || !strings.Contains(errOut, "--redis") {
			t.Errorf("demo --redis %q: %d %q, want status 2 and a message naming the flag", addr, code, errOut)
		}
	}
	if code, out, _ := runCmd("demo", "--help"); code != 0 || !strings.Contains(out, "--redis ADDR") {
		t.Errorf("--help: %d %q, want --redis described", code, out)
	}
}

// The demo's own rules made cluster-wide: their QPS rules, and only those.
func TestClusterWideMarksTheQPSRules(t *testing.T) {
	r := slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "a", Limit: 1},
		{Resource: "a", Limit: 1, Type: slidegate.QPSRule, PerKey: true},
		{Resource: "a", Limit: 1, Type: slidegate.ConcurrencyRule},
		{Resource: slidegate.InboundResource, Type: slidegate.ShedRule},
	}}
	got := clusterWide(r)
	for i, want := range []bool{true, true, false, false} {
		if got.Flow[i].Cluster != want {
			t.Errorf("flow[%d] (%s %s): cluster = %v, want %v", i, got.Flow[i].Type, got.Flow[i].Resource, got.Flow[i].Cluster, want)
		}
	}
	if r.Flow[0].Cluster {
		t.Error("clusterWide changed the rules it was given")
	}
}

func TestEventLines(t *testing.T) {
	var changes []slidegate.RuleChange
	for i := range 7 {
		changes = append(changes, slidegate.RuleChange{Resource: "r", Rule: fmt.Sprint("qps", i), Change: "added"})
	}
	var lines string // the first five changes, a line each
	for i := range 5 {
		lines += fmt.Sprintf("           flow rule \"qps%d\" of \"r\" added\n", i)
	}
	for _, tc := range []struct {
		e    slidegate.Event
		want string
	}{
		{slidegate.Event{Kind: "breaker_changed", Resource: "db", Rule: "breaker",
			Breaker: breaker.Transition{From: breaker.Closed, To: breaker.Open, OpenFor: time.Second, Stats: breaker.Stats{Requests: 10, Failures: 6}}},
			"breaker breaker on db: closed → open (tripped: 6 of 10 requests failed, 0 in a row, 0 slow, open for 1s)\n"},
		{slidegate.Event{Kind: "breaker_changed", Resource: "db", Rule: "breaker",
			Breaker: breaker.Transition{From: breaker.HalfOpen, To: breaker.Closed}},
			"breaker breaker on db: half-open → closed\n"},
		{slidegate.Event{Kind: "rules_changed", Changes: changes[:1]},
			"rules reloaded: 1 change\n           flow rule \"qps0\" of \"r\" added\n"},
		{slidegate.Event{Kind: "rules_changed", Changes: changes, MoreChanges: 3},
			"rules reloaded: 10 changes\n" + lines + "           and 5 more\n"},
		{slidegate.Event{Kind: "rules_changed"}, "rules reloaded: nothing changed\n"},
		{slidegate.Event{Kind: "cluster_changed", Cluster: slidegate.ClusterHealth{Healthy: true}}, "cluster healthy\n"},
		{slidegate.Event{Kind: "rules_refused"}, ""},
	} {
		if got := eventLine(tc.e); got != tc.want {
			t.Errorf("eventLine(%v):\n%q\nwant\n%q", tc.e.Kind, got, tc.want)
		}
	}
}

// The demo prints the guard's events as they come, and nothing once
// stopped.
func TestPrintEventsStopsPrinting(t *testing.T) {
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var b strings.Builder
	out := &syncWriter{w: writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return b.Write(p) })}
	read := func() string { mu.Lock(); defer mu.Unlock(); return b.String() }
	stop := printEvents(g, time.Now(), out)
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "a", Limit: 5}}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(read(), "rules reloaded: 1 change") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !strings.Contains(read(), `flow rule "qps" of "a" added`) {
		t.Fatalf("printed %q; want the rules reloaded", read())
	}
	stop()
	before := read()
	for limit := range int64(50) {
		_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "a", Limit: 6 + limit}}})
	}
	if got := read(); got != before {
		t.Errorf("printed after stop:\n%s", strings.TrimPrefix(got, before))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
