package envoyrls

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/slidegate/slidegate/internal/redistest"
	"github.com/slidegate/slidegate/redisflow"
)

// sharedRig serves a service whose windows are in the Redis of srv,
// through a cluster of its own that counts instances sharing the limits,
// with the config files given. The service reads the system clock: Redis
// decides on its own.
func sharedRig(t testing.TB, srv *redistest.Server, instances int, files map[string]string) (*rig, *redisflow.Cluster) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	// A wide timeout: a loaded machine must not take Redis for down.
	c, err := redisflow.New(rdb, redisflow.WithTimeout(2*time.Second), redisflow.WithInstances(instances), redisflow.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return rigOver(t, c, files), c
}

// rigOver serves a service whose windows are kept through c, with the
// config files given.
func rigOver(t testing.TB, c *redisflow.Cluster, files map[string]string) *rig {
	t.Helper()
	svc, err := New(Settings{Cluster: c, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return serveRig(t, svc)
}

const sharedConfig = `domain: d
descriptors:
  - key: a
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: wide
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: narrow
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: fall
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: long
    rate_limit: { unit: minute, requests_per_unit: 1 }
`

// Two instances sharing one Redis, each sent a burst of twice the limit
// just before each second's edge, just after it, and in the middle, never
// allow more than the limit in any window of one second between them:
// where fixed windows allow twice the limit across each edge. The time of
// a grant is known to within its round trip, so windows of one second
// less the longest round trip are counted: any two grants they hold were
// decided within one second on Redis's clock.
func TestTwoInstancesSharingOneRedisNeverAllowMoreThanTheLimitInAnyWindow(t *testing.T) {
	srv := redistest.Start(t)
	files := map[string]string{"d.yaml": sharedConfig}
	one, _ := sharedRig(t, srv, 2, files)
	two, _ := sharedRig(t, srv, 2, files)
	const limit = 10
	var mu sync.Mutex
	var allowed []int64 // when each grant's answer came
	var rtt time.Duration
	burst := func(r *rig) {
		for range limit {
			from := time.Now()
			resp, err := r.call(request("d", desc("a", "x")))
			if err != nil {
				t.Error(err)
				return
			}
			to := time.Now()
			mu.Lock()
			rtt = max(rtt, to.Sub(from))
			if resp.OverallCode == ok {
				allowed = append(allowed, to.UnixNano())
			}
			mu.Unlock()
		}
	}
	both := func() {
		var wg sync.WaitGroup
		wg.Go(func() { burst(one) })
		wg.Go(func() { burst(two) })
		wg.Wait()
	}
	// Three edges: a burst 30 ms before each, one on it, one in the middle.
	edge := time.Now().Truncate(time.Second).Add(time.Second)
	for range 3 {
		for _, at := range []time.Time{edge.Add(-30 * time.Millisecond), edge, edge.Add(time.Second / 2)} {
			time.Sleep(time.Until(at))
			both()
		}
		edge = edge.Add(time.Second)
	}
	span := int64(time.Second - rtt)
	most := 0
	for i, from := range allowed {
		n := 0
		for _, at := range allowed[i:] {
			if at < from+span {
				n++
			}
		}
		most = max(most, n)
	}
	if most > limit {
		t.Errorf("%d allowed in one window of %v between two instances; limit %d", most, time.Duration(span), limit)
	}
	// The limit is used: 2 or more seconds' worth over the three.
	if len(allowed) < 2*limit {
		t.Errorf("only %d allowed over three seconds of a limit of %d", len(allowed), limit)
	}
	t.Logf("%d allowed; most in a window of %v: %d of %d (longest round trip %v)", len(allowed), time.Duration(span), most, limit, rtt)
}

// A request that one of its descriptors refuses is counted in no window in
// Redis: the other instance sees the other descriptor's room untouched.
func TestARequestOneRuleRefusesIsCountedInNoWindowInRedis(t *testing.T) {
	srv := redistest.Start(t)
	files := map[string]string{"d.yaml": sharedConfig}
	one, c := sharedRig(t, srv, 2, files)
	two, _ := sharedRig(t, srv, 2, files)
	both := request("d", desc("wide", "u"), desc("narrow", "u"))
	for i := range 2 {
		if code, _ := codesOf(one.ask(t, both)); code != ok {
			t.Fatalf("request %d: %v; want OK", i, code)
		}
	}
	resp := one.ask(t, both)
	if code, cs := codesOf(resp); code != over || cs[0] != ok || cs[1] != over {
		t.Fatalf("third request: %v %v; want OVER_LIMIT [OK OVER_LIMIT]", code, cs)
	}
	// A check of wide on the other instance: hits_addend 0 counts nothing.
	check := request("d", desc("wide", "u"))
	check.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
	if got := two.ask(t, check).Statuses[0].LimitRemaining; got != 98 {
		t.Errorf("wide's remaining on the other instance = %d; want 98: the refused request counted nowhere", got)
	}
	if s := c.Stats(); s.Fallbacks != 0 || !s.Healthy {
		t.Errorf("stats %+v: want Redis deciding, no fallback", s)
	}
}

// Redis stopped mid-run: the cluster's Local fallback decides, each
// instance to its share of the limit; once Redis is back, Redis decides
// again.
func TestRedisStoppedMidRunTheFallbackDecidesThenRedisAgain(t *testing.T) {
	srv := redistest.Start(t)
	r, c := sharedRig(t, srv, 2, map[string]string{"d.yaml": sharedConfig})
	req := request("d", desc("fall", "u"))
	if code, _ := codesOf(r.ask(t, req)); code != ok {
		t.Fatalf("with Redis up: %v", code)
	}
	srv.Stop()
	allowed := 0
	for range 8 {
		if code, _ := codesOf(r.ask(t, req)); code == ok {
			allowed++
		}
	}
	if allowed != 5 {
		t.Errorf("%d of 8 allowed while Redis is down; want 5, the share of 10 on 2 instances", allowed)
	}
	if s := c.Stats(); s.Fallbacks == 0 || s.Healthy {
		t.Errorf("stats %+v while Redis is down: want fallbacks, not healthy", s)
	}
	srv.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for !c.Stats().Healthy && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !c.Stats().Healthy {
		t.Fatal("Redis not found again within 30s")
	}
	before := c.Stats()
	allowed = 0
	for range 12 {
		if code, _ := codesOf(r.ask(t, req)); code == ok {
			allowed++
		}
	}
	after := c.Stats()
	if after.Fallbacks != before.Fallbacks || after.RoundTrips == before.RoundTrips {
		t.Errorf("after Redis came back: stats %+v then %+v: want round trips and no fallback", before, after)
	}
	// The restarted Redis, without persistence, starts empty: the limit.
	if allowed != 10 {
		t.Errorf("%d of 12 allowed once Redis is back; want 10", allowed)
	}
}

// Hostile requests over Redis stay bounded: descriptors of long values,
// 64 to a request near its bound, each make one Redis string of a bounded name,
// and two values alike in their first kilobytes keep counts of their own.
func TestLongValuesOverRedisKeepCountsOfTheirOwnInBoundedKeys(t *testing.T) {
	srv := redistest.Start(t)
	r, _ := sharedRig(t, srv, 1, map[string]string{"d.yaml": sharedConfig})
	long := strings.Repeat("v", 900) // 64 of them near the request's bound
	req := request("d")
	for i := range 64 {
		req.Descriptors = append(req.Descriptors, desc("long", long+strconv.Itoa(100+i)))
	}
	resp, err := r.call(req)
	if err != nil {
		t.Fatalf("64 long values: %v", err)
	}
	if code, cs := codesOf(resp); code != ok {
		t.Fatalf("64 long values, each once: %v %v; want OK: each its own count", code, cs)
	}
	if resp, err := r.call(request("d", desc("long", long+"100"))); err != nil || resp.OverallCode != over {
		t.Errorf("a long value asked again: %v, %v; want OVER_LIMIT", resp.GetOverallCode(), err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), "*:k:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 64 {
		t.Errorf("%d window strings in Redis; want 64", len(keys))
	}
	for _, k := range keys {
		if len(k) > 400 {
			t.Errorf("a Redis key of %d bytes", len(k))
		}
	}
}

// One request that names a key twice, with hits 1 and 2^64-1, is refused
// and counted nowhere: the hits summed once wrapped to a negative count,
// answered OK, and lifted the key's limit in Redis.
func TestHitsThatSumPastMaxInt64AreRefusedOverRedis(t *testing.T) {
	srv := redistest.Start(t)
	r, c := sharedRig(t, srv, 1, map[string]string{"d.yaml": sharedConfig})
	big := desc("narrow", "x")
	big.HitsAddend = wrapperspb.UInt64(math.MaxUint64)
	if resp := r.ask(t, request("d", desc("narrow", "x"), big)); resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("1 + 2^64-1 hits under a limit of 2: %v; want OVER_LIMIT", resp.OverallCode)
	}
	ok := 0
	for range 20 {
		if r.ask(t, request("d", desc("narrow", "x"))).OverallCode == rlsv3.RateLimitResponse_OK {
			ok++
		}
	}
	if s := c.Stats(); ok != 2 || !s.Healthy {
		t.Errorf("then %d of 20 requests allowed in a minute under a limit of 2 (stats %+v); want 2, Redis healthy", ok, s)
	}
}

// A request over Redis is one round trip, however many descriptors it has,
// allowed or refused: the script that counts them answers what each had
// left. Only a request served with a descriptor over its limit (in shadow
// mode) takes a second, to count the others without it.
func TestARequestOverRedisTakesOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	r, c := sharedRig(t, srv, 1, map[string]string{"d.yaml": sharedConfig + `  - key: quiet
    rate_limit: { unit: minute, requests_per_unit: 1 }
    shadow_mode: true
`})
	trips := func(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, uint64) {
		t.Helper()
		before := c.Stats().RoundTrips
		resp, err := r.call(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, c.Stats().RoundTrips - before
	}
	three := request("d", desc("wide", "u"), desc("narrow", "u"), desc("a", "u"))
	for i, want := range []struct {
		code      rlsv3.RateLimitResponse_Code
		remaining uint32 // narrow's
	}{{ok, 1}, {ok, 0}, {over, 0}} {
		resp, n := trips(three)
		if n != 1 || resp.OverallCode != want.code || resp.Statuses[1].LimitRemaining != want.remaining {
			t.Errorf("request %d of three descriptors: %d round trips, %v, narrow's remaining %d; want 1, %v, %d",
				i, n, resp.OverallCode, resp.Statuses[1].LimitRemaining, want.code, want.remaining)
		}
	}
	if resp, _ := trips(request("d", desc("wide", "u"))); resp.Statuses[0].LimitRemaining != 97 {
		t.Errorf("wide's remaining %d; want 97: counted for the 2 allowed and this one", resp.Statuses[0].LimitRemaining)
	}
	trips(request("d", desc("quiet", "u")))
	resp, n := trips(request("d", desc("wide", "v"), desc("quiet", "u")))
	if n != 2 || resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 99 {
		t.Errorf("with a shadow rule over its limit: %d round trips, %v, wide's remaining %d; want 2, OK, 99", n, resp.OverallCode, resp.Statuses[0].LimitRemaining)
	}
}

// clusterRig serves a service whose windows are in the Redis Cluster rc,
// through a cluster of its own that counts instances sharing the limits.
func clusterRig(t *testing.T, rc *redistest.Cluster, instances int, files map[string]string) (*rig, *redisflow.Cluster) {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	// A wide timeout: a loaded machine must not take Redis for down.
	c, err := redisflow.New(rdb, redisflow.WithTimeout(2*time.Second), redisflow.WithInstances(instances), redisflow.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return rigOver(t, c, files), c
}

const clusterConfig = `domain: d
descriptors:
  - key: route
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 5 }
`

// Two instances share limits over a Redis Cluster of three masters. A
// request's descriptors lie in several slots, and are counted together all
// the same: a request refused by its second descriptor leaves its first
// counted nowhere. A master stopped mid-run leaves every request answered,
// by the fallback, each instance to its share; once it is back, Redis
// decides again.
func TestTwoInstancesShareLimitsOverARedisClusterWithANodeStopped(t *testing.T) {
	rc := redistest.StartCluster(t, 3, 0)
	files := map[string]string{"d.yaml": clusterConfig}
	one, c1 := clusterRig(t, rc, 2, files)
	two, c2 := clusterRig(t, rc, 2, files)
	rigs := []*rig{one, two}

	// The route is counted first; the user refuses the 6th request on.
	allowed := 0
	for i := range 12 {
		resp, err := rigs[i%2].call(request("d", desc("route", "r1"), desc("user", "alice")))
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode == ok {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("%d of 12 requests allowed under a user limit of 5 a minute; want 5", allowed)
	}
	resp, err := two.call(request("d", desc("route", "r1")))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Statuses[0].LimitRemaining; resp.OverallCode != ok || got != 94 {
		t.Fatalf("the route alone: %v, %d remaining; want OK, 94: counted for the 5 allowed and itself only", resp.OverallCode, got)
	}
	spread := map[string]bool{}
	for _, m := range rc.Masters() {
		if n, err := redistest.Do(m.Addr, "DBSIZE"); err == nil && n != "0" {
			spread[m.Addr] = true
		}
	}
	if len(spread) < 2 {
		t.Errorf("the request's windows lie on %d master(s); want them on 2 at least, for the test to mean anything", len(spread))
	}
	for _, c := range []*redisflow.Cluster{c1, c2} {
		if s := c.Stats(); !s.Healthy || s.Fallbacks != 0 {
			t.Fatalf("stats %+v: want every decision Redis's", s)
		}
	}

	// A master stops: every request is answered. A user is decided by
	// Redis (5 a minute), by the fallback (2 an instance, its share), or by
	// both, as the instances find the master gone: at least 4, at most 9.
	victim := rc.Masters()[1]
	victim.Stop()
	for _, user := range []string{"bob", "dave"} {
		allowed = 0
		for i := range 10 {
			resp, err := rigs[i%2].call(request("d", desc("user", user)))
			if err != nil {
				t.Fatalf("request %d with a master stopped: %v", i, err)
			}
			if resp.OverallCode == ok {
				allowed++
			}
		}
		if allowed < 4 || allowed > 9 {
			t.Errorf("%s: %d of 10 allowed with a master stopped; want 4 to 9 (Redis's 5, the fallback's 2 an instance, or both)", user, allowed)
		}
	}
	if c1.Stats().Fallbacks+c2.Stats().Fallbacks == 0 {
		t.Error("no decision made by the fallback with a master stopped")
	}

	victim.Restart()
	rc.WaitOK(rc.Nodes...)
	for _, c := range []*redisflow.Cluster{c1, c2} {
		if !redistest.WaitFor(30*time.Second, func() bool {
			one.call(request("d", desc("route", "probe")))
			two.call(request("d", desc("route", "probe")))
			return c.Stats().Healthy
		}) {
			t.Fatalf("Redis not deciding again 30s after the master came back: %+v", c.Stats())
		}
	}
	before := c1.Stats().Fallbacks + c2.Stats().Fallbacks
	allowed = 0
	for i := range 8 {
		if resp, err := rigs[i%2].call(request("d", desc("user", "carol"))); err == nil && resp.OverallCode == ok {
			allowed++
		}
	}
	if after := c1.Stats().Fallbacks + c2.Stats().Fallbacks; allowed != 5 || after != before {
		t.Errorf("after the master came back: %d of 8 allowed, %d fallbacks; want 5, by Redis", allowed, after-before)
	}
}

// quietRedis drops go-redis's own log lines (dial failures, which the
// outage tests cause on purpose).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	os.Exit(m.Run())
}
