package redisflow

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/redistest"
)

// records keeps what is logged through it.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.list = append(r.list, rec.Clone())
	r.mu.Unlock()
	return nil
}

// at returns the records of one level, each as its message and attributes.
func (r *records) at(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.list {
		if rec.Level != level {
			continue
		}
		var b strings.Builder
		b.WriteString(rec.Message)
		rec.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
		out = append(out, b.String())
	}
	return out
}

// logDefault makes slog.Default log into the records returned until the
// test ends.
func logDefault(t *testing.T) *records {
	r := &records{}
	old := slog.Default()
	slog.SetDefault(slog.New(r))
	t.Cleanup(func() { slog.SetDefault(old) })
	return r
}

// do runs a command that must succeed.
func do(t *testing.T, rdb *redis.Client, args ...any) {
	t.Helper()
	if err := rdb.Do(bg, args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}

// New returns the errors that retrying will not fix, naming what Redis
// said: a wrong or missing password, a command or key the user may not use
// (in a call or inside a script), a command Redis does not have, a key under
// the prefix of another type.
func TestNewReturnsTheErrorsRetryingWillNotFix(t *testing.T) {
	srv := redistest.Start(t)
	admin := client(t, srv.Addr)
	do(t, admin, "ACL", "SETUSER", "noevalsha", "on", ">pw", "~*", "+@all", "-evalsha")
	do(t, admin, "ACL", "SETUSER", "noeval", "on", ">pw", "~*", "+@all", "-eval")
	do(t, admin, "ACL", "SETUSER", "noscript", "on", ">pw", "~slidegate:*", "+@all", "-script")
	do(t, admin, "ACL", "SETUSER", "nohset", "on", ">pw", "~*", "+@all", "-hset")
	do(t, admin, "ACL", "SETUSER", "otherkeys", "on", ">pw", "~other:*", "+@all")
	do(t, admin, "ACL", "SETUSER", "readkeys", "on", ">pw", "%R~*", "+@all")
	do(t, admin, "ACL", "SETUSER", "limitkeys", "on", ">pw", "~slidegate:{*", "+@all")
	do(t, admin, "ACL", "SETUSER", "good", "on", ">pw", "~slidegate:*", "+@all")
	do(t, admin, "SET", "taken:instances", "something else's")
	do(t, admin, "CONFIG", "SET", "requirepass", "secret") // admin's connection stays signed in
	heartbeat := []Option{withHeartbeat(time.Hour)}
	ping := []Option{WithInstances(2)}
	for _, tc := range []struct {
		name       string
		user, pass string
		opts       []Option
		want       string
	}{
		{"wrong password", "", "wrong", heartbeat, "WRONGPASS"},
		{"no password", "", "", ping, "NOAUTH"},
		{"no EVALSHA", "noevalsha", "pw", heartbeat, "NOPERM this user has no permissions to run the 'evalsha' command"},
		{"no EVAL", "noeval", "pw", ping, "NOPERM this user has no permissions to run the 'eval' command"},
		{"no HSET, inside the limit script", "nohset", "pw", ping, "can't run this command"},
		{"no key under the prefix", "otherkeys", "pw", ping, "NOPERM this user has no permissions to access one of the keys"},
		{"keys read only", "readkeys", "pw", ping, "NOPERM this user has no permissions to access one of the keys"},
		{"no heartbeat key", "limitkeys", "pw", heartbeat, "NOPERM this user has no permissions to access one of the keys"},
		{"a key of another type", "", "secret", append(heartbeat, WithPrefix("taken")), "WRONGTYPE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: tc.user, Password: tc.pass, ContextTimeoutEnabled: true})
			defer rdb.Close()
			c, err := New(rdb, append(tc.opts, WithTimeout(testTimeout))...)
			if err == nil {
				t.Fatalf("New = nil error, stats %+v; want ErrMisconfigured naming %q", c.Stats(), tc.want)
			}
			var redisErr redis.Error
			if !errors.Is(err, ErrMisconfigured) || !errors.As(err, &redisErr) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v; want ErrMisconfigured wrapping Redis's error %q", err, tc.want)
			}
		})
	}
	// A script not loaded yet runs by its text (EVAL), on the node of its
	// keys: SCRIPT is not needed.
	for _, user := range []string{"", "good", "noscript"} {
		do(t, admin, "SCRIPT", "FLUSH")
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: user, Password: map[string]string{"": "secret", "good": "pw", "noscript": "pw"}[user], ContextTimeoutEnabled: true})
		defer rdb.Close()
		c, err := New(rdb, WithTimeout(testTimeout), withHeartbeat(time.Hour))
		if err != nil {
			t.Fatalf("user %q, with the right password and permissions: New: %v", user, err)
		}
		if s := c.Stats(); !s.Healthy || s.Err != nil || s.PermanentFailures != 0 || s.ScriptLoads == 0 {
			t.Errorf("user %q: stats %+v; want healthy, no error, the scripts loaded", user, s)
		}
		c.Close()
	}

	// A Redis without the command.
	renamed := redistest.Start(t, "--rename-command", "EVALSHA", "")
	_, err := New(client(t, renamed.Addr), WithTimeout(testTimeout))
	if !errors.Is(err, ErrMisconfigured) || !strings.Contains(err.Error(), "unknown command 'evalsha'") {
		t.Errorf("New without EVALSHA: %v; want ErrMisconfigured naming the unknown command", err)
	}
}

// A Redis that cannot be reached at the start is an outage, not a mistake:
// New returns the cluster, which falls back at once, within the timeout.
func TestNewFallsBackWhileRedisCannotBeReached(t *testing.T) {
	hung := redistest.Start(t)
	hung.Pause()
	defer hung.Resume()
	const timeout = 200 * time.Millisecond
	for _, tc := range []struct{ name, addr string }{
		{"refused", "127.0.0.1:1"}, // nothing listens on port 1
		{"hung", hung.Addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c, err := New(client(t, tc.addr), WithInstances(2), WithTimeout(timeout), WithClock(clock.NewManual(0)))
			if err != nil {
				t.Fatalf("New: %v; want a cluster that falls back", err)
			}
			defer c.Close()
			if d := time.Since(start); d > timeout+time.Second {
				t.Errorf("New took %v; want at most the timeout, %v, and scheduling", d, timeout)
			}
			l := limiter(t, c, "unreachable", 10, time.Second)
			for range 10 {
				l.allow(bg)
			}
			if s := c.Stats(); s.Healthy || s.Err != nil || s.RoundTrips != 0 || s.Fallbacks != 10 {
				t.Errorf("stats %+v; want Redis down from the start, no error to fix, 10 decisions by the fallback without a round trip", s)
			}
		})
	}
}

// A Redis that starts asking for a password while the cluster runs: the
// cluster falls back, says why in Stats, Health and the guard's
// ClusterHealth, and logs it once, at Error level, through slog.Default,
// having no logger of its own; it logs nothing else there. When Redis
// accepts the cluster again, the error clears, and that is logged once too.
func TestAPasswordSetWhileRunningIsReportedOnceAndClearedWhenFixed(t *testing.T) {
	srv := redistest.Start(t)
	logs := logDefault(t)
	admin := client(t, srv.Addr)
	c := cluster(t, srv, WithInstances(2), withProbeBackoff(time.Millisecond, 10*time.Millisecond))
	g, err := slidegate.New(slidegate.WithCluster(c))
	if err != nil {
		t.Fatal(err)
	}
	l := limiter(t, c, "password", 1000, time.Minute)
	if !l.allow(bg).Allowed {
		t.Fatal("blocked under the limit")
	}
	if h, ok := g.ClusterHealth(); !ok || !h.Healthy || h.Err != nil {
		t.Fatalf("ClusterHealth = %+v, %v; want healthy, no error", h, ok)
	}

	do(t, admin, "CONFIG", "SET", "requirepass", "secret")
	do(t, admin, "CLIENT", "KILL", "TYPE", "normal") // all but admin's: the cluster signs in again
	for range 20 {
		l.allow(bg)
	}
	// The probes meet the error too, again and again.
	if !waitFor(10*time.Second, func() bool { return c.Stats().PermanentFailures >= 5 }) {
		t.Fatalf("stats %+v; want the probes to meet NOAUTH", c.Stats())
	}
	h, ok := g.ClusterHealth()
	s := c.Stats()
	if !ok || h.Healthy || !errors.Is(h.Err, ErrMisconfigured) || !redis.HasErrorPrefix(h.Err, "NOAUTH") {
		t.Errorf("ClusterHealth = %+v, %v; want down, with the NOAUTH error", h, ok)
	}
	if h.Failures == 0 || h.Fallbacks < 19 || !errors.Is(s.Err, ErrMisconfigured) {
		t.Errorf("ClusterHealth = %+v, stats %+v; want the failures, the fallbacks and the error", h, s)
	}
	if errs := logs.at(slog.LevelError); len(errs) != 1 || !strings.Contains(errs[0], "refused=the password") {
		t.Errorf("logged at Error level: %q; want the password refused, once", errs)
	}
	if warns := logs.at(slog.LevelWarn); len(warns) != 0 {
		t.Errorf("logged at Warn level through slog.Default: %q; want nothing: only errors to fix go there", warns)
	}

	do(t, admin, "CONFIG", "SET", "requirepass", "")
	if !waitFor(10*time.Second, func() bool { s := c.Stats(); return s.Healthy && s.Err == nil }) {
		t.Fatalf("stats %+v; want healthy, the error cleared, once Redis accepts the cluster again", c.Stats())
	}
	if h, _ := g.ClusterHealth(); !h.Healthy || h.Err != nil {
		t.Errorf("ClusterHealth = %+v; want healthy, no error", h)
	}
	trips := c.Stats().RoundTrips
	if !l.allow(bg).Allowed || c.Stats().RoundTrips != trips+1 {
		t.Error("after the fix, a decision was not taken to Redis and allowed")
	}
	if errs := logs.at(slog.LevelError); len(errs) != 1 {
		t.Errorf("logged at Error level: %q; want one line", errs)
	}
	if infos := logs.at(slog.LevelInfo); len(infos) != 1 || !strings.Contains(infos[0], "again") {
		t.Errorf("logged at Info level: %q; want one line saying Redis accepts the cluster again", infos)
	}
}

// faulty answers EvalSha with err while err is set, as a Redis whose ACL
// changes back and forth would.
type faulty struct {
	*redis.Client
	err atomic.Pointer[error]
}

func (f *faulty) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if err := f.err.Load(); err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(*err)
		return cmd
	}
	return f.Client.EvalSha(ctx, sha, keys, args...)
}

// An error that comes and goes is logged once a minute at most, on the
// cluster's clock, and each clearing after a logged error once.
func TestAFlappingErrorIsLoggedOnceAMinute(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr)
	do(t, rdb, "SET", "string", "x")
	wrongType := rdb.HGet(bg, "string", "f").Err() // Redis's own error value
	if !redis.HasErrorPrefix(wrongType, "WRONGTYPE") {
		t.Fatalf("HGET of a string: %v; want WRONGTYPE", wrongType)
	}
	m := clock.NewManual(0)
	logs := &records{}
	f := &faulty{Client: rdb}
	c, err := New(f, WithInstances(1), WithTimeout(testTimeout), WithClock(m), WithLogger(slog.New(logs)),
		withProbeBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := limiter(t, c, "flap", 1_000_000, time.Minute)
	counts := func() (errs, cleared int) {
		return len(logs.at(slog.LevelError)), len(logs.at(slog.LevelInfo)) - len(filter(logs.at(slog.LevelInfo), "Redis is back"))
	}
	fail := func() {
		f.err.Store(&wrongType)
		l.allow(bg)
		if s := c.Stats(); !errors.Is(s.Err, ErrMisconfigured) || !redis.HasErrorPrefix(s.Err, "WRONGTYPE") {
			t.Fatalf("stats %+v; want the WRONGTYPE error", s)
		}
	}
	heal := func() {
		f.err.Store(nil)
		if !waitFor(10*time.Second, func() bool { return c.Stats().Healthy }) {
			t.Fatal("the probe did not find Redis again")
		}
		if !l.allow(bg).Allowed {
			t.Fatal("blocked under the limit")
		}
		if s := c.Stats(); s.Err != nil {
			t.Fatalf("stats %+v; want the error cleared by a decision that succeeded", s)
		}
	}
	for i, want := range []struct{ errs, cleared int }{{1, 1}, {1, 1}, {1, 1}} {
		fail()
		heal()
		if e, cl := counts(); e != want.errs || cl != want.cleared {
			t.Errorf("round %d within a minute: %d errors and %d clearings logged; want %d and %d", i, e, cl, want.errs, want.cleared)
		}
	}
	m.Advance(time.Minute)
	fail()
	heal()
	if e, cl := counts(); e != 2 || cl != 2 {
		t.Errorf("a minute later: %d errors and %d clearings logged; want 2 and 2", e, cl)
	}
	if n := c.Stats().PermanentFailures; n < 4 {
		t.Errorf("PermanentFailures = %d; want every failure counted, at least 4", n)
	}
}

// filter returns the lines that contain s.
func filter(lines []string, s string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// Failed probes count as failures, as Stats says.
func TestFailedProbesCount(t *testing.T) {
	c, err := New(client(t, "127.0.0.1:1"), WithInstances(2), withProbeBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !waitFor(10*time.Second, func() bool { return c.Stats().Failures >= 3 }) {
		t.Errorf("stats %+v; want the failed probes counted", c.Stats())
	}
}
