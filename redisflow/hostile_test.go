package redisflow

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/flow"
)

// hostileBytes are answers that no Redis gives to the cluster's scripts, as
// a proxy that mangles replies, or another program on Redis's port, might
// send: lengths that would take all memory or more than there is, negative
// lengths, nesting that would take all stack, replies cut short, types the
// scripts never answer, and a good reply with garbage after it. honestFirst
// marks those that begin with the honest answer to the limit script; kept,
// those of Redis's protocol and within its bounds, after which the
// connection is in step and stays open.
var hostileBytes = []struct {
	name, b     string
	honestFirst bool
	kept        bool
}{
	{"an array of 2^45 elements", "*35184372088832\r\n", false, false},
	{"an array of 2^40 elements", "*1099511627776\r\n", false, false},
	{"an array of 2^62 elements", "*4611686018427387904\r\n", false, false},
	{"an array longer than an int", "*99999999999999999999\r\n", false, false},
	{"an array of a million elements", "*1000000\r\n:1\r\n", false, false},
	{"an array of -2 elements", "*-2\r\n", false, false},
	{"a bulk string of 2^45 bytes", "$35184372088832\r\n", false, false},
	{"a bulk string of 2^40 bytes", "$1099511627776\r\n", false, false},
	{"a bulk string of a GiB", "$1073741824\r\nabc", false, false},
	{"a bulk string of -5 bytes", "$-5\r\n", false, false},
	{"a bulk string longer than it says", "$1\r\nabc\r\n", false, false},
	{"arrays nested 10,000 deep", strings.Repeat("*1\r\n", 10_000) + ":1\r\n", false, false},
	{"arrays nested 2 million deep", strings.Repeat("*1\r\n", 2_000_000) + ":1\r\n", false, false},
	{"a reply cut short", "*5\r\n:1\r\n:1\r\n", false, false},
	{"a line without its end", ":1", false, false},
	{"a line of 4 MiB", ":" + strings.Repeat("1", 4<<20) + "\r\n", false, false},
	{"an empty line", "\r\n", false, false},
	{"a type Redis does not have", "@1\r\n", false, false},
	{"a status", "+OK\r\n", false, true},
	{"a nil", "$-1\r\n", false, true},
	{"an error", "-ERR no\r\n", false, true},
	{"an integer too long", ":99999999999999999999\r\n", false, false},
	{"an array of bulk strings", "*5\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n0\r\n$1\r\n7\r\n$1\r\n9\r\n", false, true},
	{"a map of 2^45 entries", "%35184372088832\r\n", false, false},
	{"a set of 2^45 elements", "~35184372088832\r\n", false, false},
	{"a push of 2^45 elements", ">35184372088832\r\n", false, false},
	{"an attribute of 2^45 entries", "|35184372088832\r\n", false, false},
	{"a verbatim string of 2^45 bytes", "=35184372088832\r\n", false, false},
	{"a blob error of 2^45 bytes", "!35184372088832\r\n", false, false},
	{"a map with an array for a key", "%1\r\n*1\r\n:1\r\n:1\r\n", false, false},
	{"a verbatim string without its format", "=2\r\nab\r\n", false, false},
	{"a big number", "(12345678901234567890123456789\r\n", false, false},
	{"a double", ",nan\r\n", false, false},
	{"the reply, then 2^45 elements", honest["limit"] + "*35184372088832\r\n", true, false},
	{"the reply twice", honest["limit"] + honest["limit"], true, false},
	{"the reply, then half of another", honest["limit"] + "*5\r\n:1\r\n", true, false},
}

// hostileTimeout is the cluster timeout of the tests that meet hostile
// replies: a reply cut short is waited for that long, and an honest one,
// after, must come within it on a loaded machine.
const hostileTimeout = 500 * time.Millisecond

// hostileCluster returns a cluster over a client of f that falls back by
// FailClosed (so that a fallback is told from a decision of Redis's) and
// probes Redis often, closed when the test ends.
func hostileCluster(t *testing.T, f *fakeRedis, opts ...Option) *Cluster {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: f.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	c, err := New(rdb, append([]Option{WithFallback(FailClosed), WithTimeout(hostileTimeout),
		withProbeBackoff(10*time.Millisecond, 10*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// afterHostile checks what follows a hostile answer: Redis, answering
// honestly again, is found again by the probe, and the next decision is
// Redis's, read from a reply to it: the garbage of the hostile answer is
// never read as the answer to a later call.
func afterHostile(t *testing.T, f *fakeRedis, c *Cluster, decide func() bool) {
	t.Helper()
	if !waitFor(10*time.Second, func() bool { return c.Stats().Healthy }) {
		t.Fatalf("Redis answers honestly again, but the cluster did not find it within 10s: %+v", c.Stats())
	}
	for i := range 3 {
		if !decide() {
			t.Fatalf("decision %d after the hostile answer: blocked; want allowed by Redis's honest answer (stats %+v)", i, c.Stats())
		}
	}
	if s := c.Stats(); !s.Healthy {
		t.Fatalf("stats %+v after honest answers; want healthy", s)
	}
}

// A limiter's decision that Redis answers with hostile bytes neither panics
// nor decides: it is the fallback's (FailClosed: blocked, no RetryAfter),
// Redis is marked down and the failure counted; or, for bytes that begin
// with the honest reply, it is that reply's. Either way, what follows
// decides by Redis's honest answers again.
func TestAHostileReplyToALimiterNeitherPanicsNorDecides(t *testing.T) {
	for _, h := range hostileBytes {
		for _, lease := range []int64{1, 10} {
			name := h.name
			if lease > 1 {
				name += ", leasing"
			}
			t.Run(name, func(t *testing.T) {
				f := startFakeRedis(t)
				c := hostileCluster(t, f, WithInstances(1))
				l := limiter(t, c, "hostile", 100, time.Second, WithLease(lease, time.Nanosecond))
				f.answer("limit", once(h.b))
				d := l.allow(bg)
				s := c.Stats()
				switch {
				case h.honestFirst && !d.Allowed:
					t.Fatalf("%+v; want allowed by the honest reply the bytes begin with (stats %+v)", d, s)
				case !h.honestFirst && (d.Allowed || d.RetryAfter != 0 || s.Failures == 0):
					// Not s.Healthy: the probe, every 10 ms, may have found
					// Redis honest again before Stats is read.
					t.Fatalf("%+v, stats %+v; want the FailClosed fallback's block, a failure counted", d, s)
				}
				if !h.kept && !waitFor(5*time.Second, func() bool { return f.hungUp.Load() > 0 }) {
					t.Fatal("the connection that carried the bytes is still open")
				}
				afterHostile(t, f, c, func() bool { return l.allow(bg).Allowed })
			})
		}
	}
}

// The same for a keyed limiter: the fallback refuses by window 0.
func TestAHostileReplyToAKeyedLimiterNeitherPanicsNorDecides(t *testing.T) {
	for _, h := range hostileBytes {
		if h.honestFirst {
			continue // the honest reply is the limit script's
		}
		t.Run(h.name, func(t *testing.T) {
			f := startFakeRedis(t)
			c := hostileCluster(t, f, WithInstances(1))
			l := keyed(t, c, "hostile", flow.KeyWindow{Limit: 100, Interval: time.Second})
			f.answer("keyed", once(h.b))
			d, j := l.allowKey(bg, "alice")
			if s := c.Stats(); d.Allowed || j != 0 || d.RetryAfter != 0 || s.Failures == 0 { // not s.Healthy: see above
				t.Fatalf("%+v by window %d, stats %+v; want the FailClosed fallback's refusal, a failure counted", d, j, s)
			}
			afterHostile(t, f, c, func() bool { d, _ := l.allowKey(bg, "bob"); return d.Allowed })
		})
	}
}

// Release, giving a lease back, returns an error for hostile bytes, and
// panics no more than a decision does.
func TestAHostileReplyToReleaseIsAnError(t *testing.T) {
	for _, h := range hostileBytes {
		if h.honestFirst {
			continue
		}
		t.Run(h.name, func(t *testing.T) {
			f := startFakeRedis(t)
			c := hostileCluster(t, f, WithInstances(1))
			l := limiter(t, c, "hostile", 100, time.Second, WithLease(10, time.Hour))
			f.answer("limit", once("*5\r\n:1\r\n:10\r\n:0\r\n:7\r\n:9\r\n")) // a lease of 9
			if !l.allow(bg).Allowed {
				t.Fatal("blocked; want allowed, with a lease")
			}
			f.answer("limit", once(h.b))
			if err := l.Release(bg); err == nil {
				t.Fatal("Release = nil; want the error of the hostile reply")
			}
		})
	}
}

// The heartbeat, in the background, meets hostile bytes: the process goes
// on, and Redis is marked down until it answers honestly again.
func TestAHostileReplyToTheHeartbeatNeitherPanicsNorStopsIt(t *testing.T) {
	for _, h := range hostileBytes {
		if h.honestFirst {
			continue
		}
		t.Run(h.name, func(t *testing.T) {
			f := startFakeRedis(t)
			c := hostileCluster(t, f, withHeartbeat(5*time.Millisecond))
			l := limiter(t, c, "hostile", 100, time.Second)
			f.answer("heartbeat", once(h.b))
			if !waitFor(10*time.Second, func() bool { return c.Stats().Failures > 0 }) {
				t.Fatalf("stats %+v: the hostile heartbeat was not counted as a failure within 10s", c.Stats())
			}
			afterHostile(t, f, c, func() bool { return l.allow(bg).Allowed })
		})
	}
}

// New's checks meet hostile bytes: New returns a cluster that falls back
// from the start, and finds Redis when it answers honestly.
func TestAHostileReplyToNewsChecksNeitherPanicsNorFailsNew(t *testing.T) {
	for _, h := range hostileBytes {
		if h.honestFirst {
			continue
		}
		t.Run(h.name, func(t *testing.T) {
			f := startFakeRedis(t)
			f.answer("ping", once(h.b))
			c := hostileCluster(t, f, WithInstances(1))
			l := limiter(t, c, "hostile", 100, time.Second)
			afterHostile(t, f, c, func() bool { return l.allow(bg).Allowed })
		})
	}
}

// panicking is a client that panics reading every reply, as go-redis did
// reading an array of 2^45 elements.
type panicking struct{ *redis.Client }

func (panicking) EvalSha(context.Context, string, []string, ...any) *redis.Cmd {
	panic("runtime error: makeslice: len out of range")
}

// A client that panics reading a reply fails the call, as an outage does:
// New goes on, the heartbeat and the decisions fall back, each failure
// counted, and none panics.
func TestAPanickingClientIsAnOutageNotACrash(t *testing.T) {
	rdb := panicking{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})}
	defer rdb.Close()
	c, err := New(rdb, WithFallback(FailClosed), withHeartbeat(time.Millisecond), withProbeBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := limiter(t, c, "panics", 100, time.Second)
	k := keyed(t, c, "panics", flow.KeyWindow{Limit: 100, Interval: time.Second})
	if !waitFor(5*time.Second, func() bool { return c.Stats().Failures > 3 }) {
		t.Fatalf("stats %+v: the probe's calls were not counted as failures", c.Stats())
	}
	if d := l.allow(bg); d.Allowed {
		t.Errorf("%+v; want the FailClosed fallback's block", d)
	}
	if d, _ := k.allowKey(bg, "alice"); d.Allowed {
		t.Errorf("%+v; want the FailClosed fallback's refusal", d)
	}
	c.down.Store(false) // as the probe would, were Redis well: the next decision calls the client
	if d := l.allow(bg); d.Allowed || c.Stats().Healthy {
		t.Errorf("%+v, stats %+v; want the fallback's block, Redis down again", d, c.Stats())
	}
	if err := c.permanentErr(); err != nil {
		t.Errorf("Err = %v; a panic is an outage, not an error retrying will not fix", err)
	}
}
