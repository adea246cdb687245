package redisflow

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/config"
)

var (
	//go:embed limit.lua
	limitSource string
	//go:embed heartbeat.lua
	heartbeatSource string
	//go:embed keyed.lua
	keyedSource string

	limitScript     = &script{redis.NewScript(limitSource), "the limit script"}
	heartbeatScript = &script{redis.NewScript(heartbeatSource), "the heartbeat script"}
	keyedScript     = &script{redis.NewScript(keyedSource), "the keyed limit script"}
	leaveScript     = &script{redis.NewScript(`return redis.call('ZREM', KEYS[1], ARGV[1])`), "the leave script"}
	pingScript      = &script{redis.NewScript(`return 1`), "the ping script"}
)

// A script is a Lua script the cluster runs, named for errors and logs.
type script struct {
	*redis.Script
	name string
}

// errInvalidConfig is wrapped by every error that [New],
// [Cluster.NewLimiter], [Cluster.NewKeyedLimiter] and [Limiter.SetLimit]
// return for a bad argument or option. The message names the option (or
// argument) and the value it was given.
var errInvalidConfig = config.Sentinel("redisflow")

// A FallbackPolicy says how limiters decide while Redis cannot: while it is
// down, unreachable or too slow for the timeout, or answers with an error
// that retrying will not fix. [Stats].Fallbacks counts the decisions the
// policy makes.
type FallbackPolicy uint8

const (
	// Local makes each instance limit on its own to limit / instances, at
	// least 1 when the limit is not 0. The instances are configured
	// ([WithInstances]) or last discovered by the heartbeat. Local is the
	// default.
	Local FallbackPolicy = iota
	// FailOpen allows every request.
	FailOpen
	// FailClosed blocks every request ([flow.RateLimited], no RetryAfter).
	FailClosed
)

var fallbackNames = [...]string{"local", "fail open", "fail closed"}

// String returns the policy's name ("local", "fail open", "fail closed").
func (f FallbackPolicy) String() string {
	if int(f) < len(fallbackNames) {
		return fallbackNames[f]
	}
	return "FallbackPolicy(" + strconv.Itoa(int(f)) + ")"
}

// A Cluster is one instance's connection to the limits it shares with the
// other instances of a service, through one Redis or Redis Cluster. Make
// one per process with [New]. Then make a [Limiter] per limit with
// [Cluster.NewLimiter], or give the Cluster to a guard
// ([slidegate.WithCluster]) for the rules marked cluster-wide.
//
// A Cluster watches Redis's health for all its limiters. A round trip that
// fails, or does not answer within the timeout ([WithTimeout]), marks Redis
// down. From then on every limiter decides by its fallback
// ([WithFallback]), without a round trip. A background probe tries Redis
// with backoff, 100 ms doubling up to 5 s. It marks Redis up again as
// soon as it answers. An error that retrying will not fix ([ErrMisconfigured]) marks
// Redis down too. It is also reported, in [Cluster.Stats], [Cluster.Health]
// and the log.
//
// Unless the number of instances is configured ([WithInstances]), every
// instance sends a heartbeat every second. Through it, each learns how
// many instances share the limits.
//
// A Cluster is safe for concurrent use. Close it when done: it stops the
// background work and leaves the heartbeat.
type Cluster struct {
	client     redis.Scripter       // what the cluster calls: its own client (connect), or the one given
	closeConn  func() error         // closes client if it is the cluster's own
	slots      *redis.ClusterClient // client, if it is a Redis Cluster's: told to learn the slots again
	conns      connSet              // the open connections of client, if it is the cluster's own
	prefix     string
	id         string
	timeout    time.Duration
	clock      clock.Clock
	log        *slog.Logger
	ownLog     bool // log came from WithLogger
	ownID      bool // id came from withInstanceID
	fallback   FallbackPolicy
	configured int64 // WithInstances; 0: discover
	heartbeat  time.Duration
	probeMin   time.Duration
	probeMax   time.Duration
	keyMemory  *flow.KeyMemory // the keyed limiters' Local fallbacks draw from it; nil: one each
	ownKeyMem  bool            // keyMemory came from WithKeyMemory

	instances atomic.Int64 // configured, or last discovered (at least 1)
	down      atomic.Bool
	joined    atomic.Bool   // a heartbeat reached Redis
	wake      chan struct{} // nudges the keeper when Redis goes down
	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	starting  bool // while New checks Redis; read after it by other goroutines only

	roundTrips atomic.Uint64
	failures   atomic.Uint64
	fallbacks  atomic.Uint64
	loads      atomic.Uint64
	permanent  atomic.Uint64 // calls that met an error retrying will not fix

	fault    atomic.Pointer[fault] // the one in force, if any
	faultMu  sync.Mutex            // orders setting and clearing faults, and their lines
	faultLog map[string]int64      // a kind of fault: when its Error line was logged

	// Telling health changes (OnHealthChange). healthMu orders the
	// tellings, and marking Redis down or up (not reading it); it is taken
	// after faultMu, never before.
	onHealth []func(slidegate.ClusterHealth) // held by healthMu
	healthMu sync.Mutex
	told     healthState // the state last told
	closed   atomic.Bool // Close began: nothing more is told
}

// An Option configures a Cluster. [New] returns an error naming the option
// and its value for one it cannot honour. A nil Option is no option.
type Option func(*Cluster)

// WithPrefix sets the prefix of every key the cluster writes (default
// "slidegate"). Services that share a Redis but not their limits need
// different prefixes.
func WithPrefix(p string) Option { return func(c *Cluster) { c.prefix = p } }

// WithTimeout bounds how long a decision waits for Redis (default 50ms).
// Past it, the decision is the fallback's, and Redis is marked down.
func WithTimeout(d time.Duration) Option { return func(c *Cluster) { c.timeout = d } }

// WithFallback sets how limiters decide while Redis is down: [Local] (the
// default), [FailOpen] or [FailClosed].
func WithFallback(f FallbackPolicy) Option { return func(c *Cluster) { c.fallback = f } }

// WithInstances sets the number of instances sharing the limits, which the
// [Local] fallback divides them by. Without it (or with 0), the instances
// discover each other through a heartbeat key. An instance that has never
// reached Redis counts 1, itself, and so falls back to the whole limit.
func WithInstances(n int) Option { return func(c *Cluster) { c.configured = int64(n) } }

// WithKeyMemory makes the [Local] fallbacks of every [KeyedLimiter] of the
// cluster draw their per-key windows from m, so that a flood of keys while
// Redis is down holds at most m's bytes in all. Without it, each keyed
// limiter's fallback has a budget of its own, as [flow.NewKeyedQPS] gives
// one. m must not be nil.
func WithKeyMemory(m *flow.KeyMemory) Option {
	return func(c *Cluster) { c.keyMemory, c.ownKeyMem = m, true }
}

// withHeartbeat sets how often an instance renews its heartbeat (default
// 1s), between 1ms (more often would keep Redis busy for nothing) and 24h,
// for the tests. An instance counts until three periods after its last
// heartbeat.
func withHeartbeat(d time.Duration) Option { return func(c *Cluster) { c.heartbeat = d } }

// withProbeBackoff sets how soon Redis is probed after it went down (min,
// default 100ms) and how far the wait between failed probes doubles (max,
// default 5s), for the tests. min must be at least 1ms, and max between
// min and 24h.
func withProbeBackoff(min, max time.Duration) Option {
	return func(c *Cluster) { c.probeMin, c.probeMax = min, max }
}

// WithClock makes the cluster read time from cl (default [clock.System]).
// Its limiters read it for their leases, their cached blocks and the Local
// fallback ([Limiter.AllowNAt]). The cluster reads it to space the lines it
// logs at Error level. Redis decides on its own clock. The timeout, the
// heartbeat and the probe are real time, whatever the clock: they bound how
// long callers wait and how often Redis is called. cl must not be nil.
func WithClock(cl clock.Clock) Option { return func(c *Cluster) { c.clock = cl } }

// WithLogger makes the cluster log through l:
//   - Redis going down (Warn) and coming back (Info).
//   - the instances discovered (Info).
//   - the errors that retrying will not fix (Error), and their end (Info).
//
// Without it, the cluster logs only the errors that retrying will not fix,
// and their end. It logs them through [slog.Default], as it is when they
// happen: an operator must fix those, and a wrong password must not pass
// for an outage. Such an error is logged when one of its kind appears: the
// password, a permission, a command, a key's type. If errors of that kind
// come and go, it is not logged again within a minute (on the cluster's
// clock). Its end is logged if it was. The cluster never logs per request.
// WithLogger(slog.New(slog.DiscardHandler)) silences it; l must not be nil.
func WithLogger(l *slog.Logger) Option { return func(c *Cluster) { c.log, c.ownLog = l, true } }

// withInstanceID names this instance in the heartbeat key (default: host
// name, process id and a random suffix), for the tests. id must not be
// empty.
func withInstanceID(id string) Option { return func(c *Cluster) { c.id, c.ownID = id, true } }

// New returns a Cluster deciding through client: a [*redis.Client], a
// [*redis.ClusterClient], a [*redis.Ring], or anything else that runs
// scripts.
//
// New checks that Redis runs what the cluster will run. It gives each call
// the timeout, as a decision would:
//   - a script that touches no key.
//   - the limit script, on a key of its own under the prefix.
//   - unless the instances are configured, the first heartbeat.
//
// The limit script's key is PREFIX:{check}:1µs:1. The check counts nothing
// in it, and it expires within a millisecond. If Redis answers with an
// error that retrying will not fix, New returns it, wrapping
// [ErrMisconfigured]. If Redis cannot be reached or does not answer within
// the timeout, New returns the cluster. The cluster then falls back from
// the start, and finds Redis with its probe. So New waits once the timeout
// for a Redis that hangs.
//
// Given a go-redis client, the cluster makes connections of its own. They
// have the client's options (addresses, credentials, TLS, pool size),
// except for how long a call may wait. The timeout bounds each call, every
// retry, redirect and dial included, whatever the client's own timeouts.
// Replies are checked as they arrive. One that no Redis would send closes
// its connection (see [ErrMalformedReply]). Hooks added to client do not
// see these calls. [Cluster.Close] closes the connections. Anything else
// that runs scripts is called as it is. It must honour the deadline of each
// call's context.
//
// The pool (PoolSize) should hold as many connections as decisions taken to
// Redis at once. A decision that waits for a connection spends its timeout
// waiting, and takes Redis for down. Leasing needs fewer: one round trip at
// a time per limiter.
func New(client redis.Scripter, opts ...Option) (*Cluster, error) {
	c := &Cluster{
		client:    client,
		prefix:    "slidegate",
		timeout:   50 * time.Millisecond,
		clock:     clock.System,
		heartbeat: time.Second,
		probeMin:  100 * time.Millisecond,
		probeMax:  5 * time.Second,
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	c.client, c.closeConn = c.connect(c.client)
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.id == "" {
		c.id = defaultID()
	}
	c.instances.Store(max(c.configured, 1))
	if err := c.start(); err != nil {
		c.closeConn()
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	go c.keep(ctx)
	return c, nil
}

// start runs the checks New describes, each within the timeout, as a
// decision would: the ping first, whose few arguments a Redis that wants a
// password answers with NOAUTH (a longer call, it refuses as a protocol
// error); the limit script; the heartbeat last, so that an instance that
// fails a check never counts in the heartbeat key. An error that retrying
// will not fix is returned; any other marks Redis down, for the probe to find
// it again.
func (c *Cluster) start() error {
	c.starting = true // New reports what it meets; note would log it too
	defer func() { c.starting = false }()
	check := key(c.prefix, "check", time.Microsecond, 1)
	steps := []struct {
		s   *script
		key string
		run func(ctx context.Context) error
	}{
		{pingScript, c.instancesKey(), func(ctx context.Context) error {
			return c.run(ctx, pingScript, []string{c.instancesKey()}).Err()
		}},
		// Limit 0, nothing needed nor wanted: the script counts nothing,
		// and writes as a decision does. The key lives 1 ms.
		{limitScript, check, func(ctx context.Context) error {
			return c.run(ctx, limitScript, []string{check}, 0, 1, 1, 0, 0, -1, 0).Err()
		}},
		{heartbeatScript, c.instancesKey(), c.beat}, // beat sets its own timeout
	}
	if c.configured > 0 {
		steps = steps[:2] // the heartbeat would be the ping again
	}
	for _, step := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		err := step.run(ctx)
		cancel()
		if err == nil {
			continue
		}
		if kind := permanent(err); kind != "" {
			return misconfigured(kind, step.s, step.key, err)
		}
		c.failed(err)
		break
	}
	return nil
}

// maxPeriod bounds the heartbeat's period and the probe's backoff: longer
// ones would leave the instances' count, or Redis's health, stale for days.
const maxPeriod = 24 * time.Hour

// check returns an error naming the first option New cannot honour.
func (c *Cluster) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errInvalidConfig}, args...)...)
	}
	switch {
	case c.client == nil:
		return bad("client = nil: a Redis client is needed")
	case c.prefix == "" || strings.ContainsAny(c.prefix, "{}"):
		return bad("prefix = %q: must be non-empty, without braces", c.prefix)
	case c.timeout <= 0:
		return bad("timeout = %v: must be positive", c.timeout)
	case c.clock == nil:
		return bad("clock = nil: must not be nil")
	case c.ownLog && c.log == nil:
		return bad("logger = nil: must not be nil; leave WithLogger out for the default, or give slog.New(slog.DiscardHandler) to log nothing")
	case c.ownKeyMem && c.keyMemory == nil:
		return bad("key memory = nil: must not be nil; leave WithKeyMemory out for a budget per keyed limiter")
	case c.ownID && c.id == "":
		return bad(`instance id = "": must not be empty; leave the instance id out for the default`)
	case c.fallback > FailClosed:
		return bad("fallback = %v: must be Local, FailOpen or FailClosed", c.fallback)
	case c.configured < 0:
		return bad("instances = %d: must not be negative (0 discovers them)", c.configured)
	case c.heartbeat < time.Millisecond || c.heartbeat > maxPeriod:
		return bad("heartbeat = %v: must be between 1ms and %v", c.heartbeat, maxPeriod)
	case c.probeMin < time.Millisecond || c.probeMax < c.probeMin || c.probeMax > maxPeriod:
		return bad("probe backoff = %v..%v: min must be at least 1ms, max between min and %v", c.probeMin, c.probeMax, maxPeriod)
	}
	return nil
}

func defaultID() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b[:])
}

// instancesKey is the heartbeat's sorted set.
func (c *Cluster) instancesKey() string { return c.prefix + ":instances" }

// Close stops the cluster's background work. It removes the instance from
// the heartbeat key, so that the others stop counting it at once. It waits
// for Redis no longer than the timeout. Its limiters go on deciding, by
// their fallback. Close returns nil; calling it again does nothing.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.stop() // cuts short a heartbeat under way
		<-c.done
		if c.joined.Load() && !c.down.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			c.run(ctx, leaveScript, []string{c.instancesKey()}, c.id)
			cancel()
		}
		c.down.Store(true)
		c.closeConn()
	})
	return nil
}

// Stats is what a Cluster has done so far.
type Stats struct {
	// Healthy reports whether Redis is deciding; false while limiters
	// use their fallback.
	Healthy bool
	// Instances is the number of instances sharing the limits, configured
	// or last discovered (1 until discovered).
	Instances int
	// RoundTrips counts the decisions taken to Redis, answered or not.
	RoundTrips uint64
	// Failures counts the calls to Redis that failed or timed out:
	// decisions, heartbeats and probes.
	Failures uint64
	// Fallbacks counts the decisions made by the fallback.
	Fallbacks uint64
	// ScriptLoads counts the times a script had to be loaded into Redis.
	// Redis answered NOSCRIPT: it had not seen the script yet, it
	// restarted, or its scripts were flushed.
	ScriptLoads uint64
	// PermanentFailures counts the calls to Redis answered with an error
	// that retrying will not fix (see [ErrMisconfigured]).
	PermanentFailures uint64
	// Err is the last error that retrying will not fix, while it lasts;
	// nil when there is none. It wraps [ErrMisconfigured] and Redis's own
	// error. It lasts until the call that met it (the same script on the
	// same key) succeeds.
	Err error
}

// Stats returns what the cluster has done so far.
func (c *Cluster) Stats() Stats {
	return Stats{
		Healthy:     !c.down.Load(),
		Instances:   int(c.instances.Load()),
		RoundTrips:  c.roundTrips.Load(),
		Failures:    c.failures.Load(),
		Fallbacks:   c.fallbacks.Load(),
		ScriptLoads: c.loads.Load(),

		PermanentFailures: c.permanent.Load(),
		Err:               c.permanentErr(),
	}
}

// permanentErr returns the last error that retrying will not fix, while
// it lasts (Stats.Err), or nil.
func (c *Cluster) permanentErr() error {
	if f := c.fault.Load(); f != nil {
		return f.err
	}
	return nil
}

// failed records a round trip that failed with err, and marks Redis down.
func (c *Cluster) failed(err error) {
	c.failures.Add(1)
	c.markDown(err, false)
}

// keep runs in the background until ctx ends: it renews the heartbeat while
// Redis is up (when discovering instances) and probes Redis, with backoff,
// while it is down. A Redis that goes down soon after it came back is probed
// with the backoff it had reached, so that a flapping Redis is not probed
// ever more often.
func (c *Cluster) keep(ctx context.Context) {
	defer close(c.done)
	backoff := c.probeMin
	var upSince time.Time // when Redis last came back
	settled := func() bool { return time.Since(upSince) >= c.probeMax }
	// New ran the first heartbeat, or found Redis down.
	t := time.NewTimer(c.heartbeat)
	defer t.Stop()
	switch {
	case c.down.Load():
		t.Reset(backoff)
	case c.configured > 0:
		t.Stop()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake: // a limiter found Redis down
			if settled() {
				backoff = c.probeMin
			}
			t.Reset(backoff)
			continue
		case <-t.C:
		}
		down := c.down.Load()
		err := c.beat(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && down:
			c.markUp()
			upSince = time.Now()
			c.log.Info("redisflow: Redis is back; limiters decide through it again", "instances", c.instances.Load())
		case err != nil && down:
			c.failures.Add(1)
			backoff = min(2*backoff, c.probeMax)
			c.tellHealth() // an error cleared while Redis was down (clearFault)
		case err != nil:
			c.failed(err)
			select { // the nudge is for this loop, which is here
			case <-c.wake:
			default:
			}
			if settled() {
				backoff = c.probeMin
			}
		}
		switch {
		case c.down.Load():
			t.Reset(backoff)
		case c.configured == 0:
			t.Reset(c.heartbeat)
		}
	}
}

// beat renews the heartbeat, learning the number of instances, or, with the
// number configured, checks that Redis answers. It gives Redis the timeout
// a decision gives it, so that a Redis too slow for decisions is not found
// well by the probe.
func (c *Cluster) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.configured > 0 {
		return c.run(ctx, c.beatScript(), []string{c.instancesKey()}).Err()
	}
	n, err := c.run(ctx, c.beatScript(), []string{c.instancesKey()}, c.id, (3 * c.heartbeat).Microseconds()).Int64()
	if err != nil {
		return err
	}
	c.joined.Store(true)
	if n >= 1 && c.instances.Swap(n) != n {
		c.log.Info("redisflow: instances sharing the limits", "instances", n)
	}
	return nil
}

// beatScript is the script beat runs: the heartbeat, or with the number of
// instances configured, the ping.
func (c *Cluster) beatScript() *script {
	if c.configured > 0 {
		return pingScript
	}
	return heartbeatScript
}
