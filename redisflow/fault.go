package redisflow

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrMisconfigured is wrapped by the errors that retrying will not fix:
//   - WRONGPASS or NOAUTH: Redis refuses the cluster's password, or wants one.
//   - NOPERM: Redis denies the cluster's user a command or a key.
//   - an unknown command: Redis does not run a command the cluster runs.
//   - WRONGTYPE: a key under the cluster's prefix holds another type.
//
// A command refused inside a script is denied too. A command Redis does not
// know was renamed or disabled. A key of another type means something else
// writes under the prefix.
//
// [New] returns such an error when Redis answers it at the start. One met
// later is in [Cluster.Stats] and [Cluster.Health], and is logged (see
// [WithLogger]).
var ErrMisconfigured = errors.New("redisflow: Redis refuses the cluster's commands")

// permanentPrefixes begin the Redis errors that retrying will not fix
// (after the "ERR " that some carry), each with what Redis refuses: its kind.
// Anything else, a dropped connection, a timeout, LOADING, BUSY, READONLY
// during a failover, OOM, is an outage, which the probe waits out.
var permanentPrefixes = []struct{ prefix, kind string }{
	{"WRONGPASS", "the password"},
	{"NOAUTH", "the password"},
	// A call of more than 10 arguments from a connection that has not
	// signed in, Redis refuses as a protocol error, not NOAUTH.
	{"Protocol error: unauthenticated", "the password"},
	{"NOPERM", "a permission"},
	{"The user executing the script can't run this command", "a permission"},
	{"unknown command", "a command"}, // renamed or disabled
	{"Unknown Redis command called from script", "a command"},
	{"This Redis command is not allowed from script", "a command"},
	{"WRONGTYPE", "a key's type"}, // another program writes under the prefix
}

// permanent returns the kind of err if it is a Redis error that retrying
// will not fix, and "" otherwise.
func permanent(err error) (kind string) {
	for _, p := range permanentPrefixes {
		if redis.HasErrorPrefix(err, p.prefix) {
			return p.kind
		}
	}
	return ""
}

// misconfigured wraps Redis's error err, of the given kind, met by script s
// on key.
func misconfigured(kind string, s *script, key string, err error) error {
	return fmt.Errorf("%w (%s): %s on key %q: %w", ErrMisconfigured, kind, s.name, key, err)
}

// A fault is an error that retrying will not fix, and the call that met it:
// the same script on the same key. That call succeeding clears it; any other
// succeeding does not, as the ACL may allow one key or script and not
// another.
type fault struct {
	err    error  // from misconfigured
	kind   string // what Redis refuses (permanentPrefixes)
	redis  string // Redis's error's text
	script *script
	key    string
	// logged: an Error line about the faults in force was logged, and no
	// line saying they cleared since.
	logged bool
}

// faultLogEvery spaces the Error lines of one kind of error: an error that
// comes and goes (a password rotated while old connections stay signed in)
// is logged once in it, on the cluster's clock.
const faultLogEvery = time.Minute

// note records what the call of s on key met: a fault when err is one that
// retrying will not fix; the fault's end when the call that met it succeeds.
// It takes no lock unless one of them happens.
func (c *Cluster) note(s *script, key string, err error) {
	if err == nil {
		if f := c.fault.Load(); f != nil && f.script == s && f.key == key {
			c.clearFault(f)
		}
		return
	}
	if kind := permanent(err); kind != "" {
		c.permanent.Add(1)
		c.setFault(kind, s, key, err)
	}
}

// setFault makes the fault of s on key the one in force, and logs it at
// Error level unless an error of its kind was logged within faultLogEvery.
func (c *Cluster) setFault(kind string, s *script, key string, err error) {
	c.faultMu.Lock()
	defer c.faultMu.Unlock()
	old := c.fault.Load()
	msg := err.Error()
	if old != nil && old.script == s && old.key == key && old.redis == msg {
		return // the same call failing the same way: nothing new
	}
	f := &fault{err: misconfigured(kind, s, key, err), kind: kind, redis: msg, script: s, key: key, logged: old != nil && old.logged}
	now := c.clock.Now()
	if c.faultLog == nil {
		c.faultLog = make(map[string]int64, 4) // one per kind: bounded
	}
	if last, ok := c.faultLog[kind]; !ok || now-last >= int64(faultLogEvery) {
		c.faultLog[kind] = now
		f.logged = true
		c.alarm().Error("redisflow: Redis refuses the cluster's commands, which retrying will not fix; decisions fall back until it is fixed",
			"refused", kind, "err", err, "call", s.name, "key", key, "fallback", c.fallback.String())
	}
	c.fault.Store(f)
	// Redis refuses: it is down to the limiters until the call succeeds
	// (the caller would mark it down next, as for any failure; marking it
	// here tells of the error and of Redis down at once).
	c.markDown(err, true)
}

// clearFault ends fault f if it is still the one in force.
func (c *Cluster) clearFault(f *fault) {
	c.faultMu.Lock()
	defer c.faultMu.Unlock()
	if !c.fault.CompareAndSwap(f, nil) {
		return
	}
	if f.logged {
		c.alarm().Info("redisflow: Redis accepts the cluster's commands again", "call", f.script.name, "key", f.key)
	}
	// With Redis marked down, the probe tells: the one that cleared it
	// marks Redis up next, and one that fails tells of Redis down. Telling
	// here would tell of an outage between the error and its end that
	// there was not.
	if !c.down.Load() {
		c.tellHealth()
	}
}

// alarm is the logger of what an operator must fix: the cluster's own
// (WithLogger), or else slog.Default, as it is when the line is logged.
func (c *Cluster) alarm() *slog.Logger {
	if c.ownLog {
		return c.log
	}
	return slog.Default()
}
