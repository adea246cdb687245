package redisflow

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// A KeyedLimiter keeps cluster-wide limits per key: a user, a tenant, a
// client address. For every key and every window, it allows at most the
// window's limit in any interval of the window's length, wherever it
// starts. A key's override, if it has one, is its limit. The limits hold
// across every instance that shares them: every KeyedLimiter of the same
// name and windows under the same prefix. It has the semantics of
// [flow.KeyedQPS], whose windows it keeps in Redis, exactly for every key.
// There is no sketch: Redis holds each key's counts until they no longer
// count.
//
// A request is decided against all the windows of its key together (5 per
// second and 100 per minute and 1,000 per day), all or nothing. One Lua
// script decides, on the Redis server's clock, in one round trip. A request
// that one window refuses counts in none.
//
// Each window of a key is one Redis string. Its key is
//
//	PREFIX:k:{KEY}:NAME:INTERVAL:BUCKETS    slidegate:k:{alice}:GET /orders:1m0s:20
//
// The request's key is the hash tag. So every window of one key lands in
// one Redis Cluster slot, while different keys spread over the nodes. In
// the tag, '%', '{' and '}' are written %25, %7B and %7D, and the empty key
// is a lone %. So no key can close the tag early, leave it empty, or name
// another key's strings. Keys are bytes, any bytes. Those longer than
// 256 bytes are told apart by their first 256
// bytes, as the guard tells them apart. A string expires once it no longer
// counts, a little more than its interval after its key's last request. A
// refused request writes nothing.
//
// Redis holds a string per window for every key allowed a request within
// the window's interval. For k buckets, it holds 8(k+3) bytes of counts
// (184 for the default 20), the Redis key's name, and Redis's own overhead
// per key. Keys come from clients, so that is memory an attacker can fill.
// Key by an identity the service has checked (a user, a tenant), not a
// header anyone sets. Or bound the keys some other way, especially under
// long windows, whose strings live as long as they are.
//
// A request that Redis refused for the rate is remembered, for a bounded
// number of keys: the last refused, one per slot of a small table. The
// key's later requests for as many permits or more are refused without a
// round trip, until RetryAfter has passed. A request for more permits than
// a window's limit for its key is refused with [flow.ExceedsLimit], without
// a round trip. So is every request of a key whose override is 0.
//
// A KeyedLimiter does not lease: each decision is a round trip.
//
// While Redis is down (see [Cluster]), decisions are the cluster's
// fallback. With [Local], the fallback is a [flow.KeyedQPS] of the same
// windows. Each limit and override is divided by the number of instances,
// and is at least 1 where it was not 0. Redis does not learn what the
// fallback allowed, nor the fallback what Redis did. So an interval that
// spans a switch between them can hold what each allowed. A decision never
// waits for Redis longer than the cluster's timeout.
//
// Redis decides on its own clock. The cached refusals and the Local
// fallback are on the cluster's clock ([WithClock]). That clock is read at
// the now that [KeyedLimiter.AllowKeyNAt] is given, or that
// [KeyedLimiter.AllowKeyN] reads once.
//
// A KeyedLimiter is safe for concurrent use. A decision that Redis takes
// allocates what its round trip does. One refused without a round trip
// allocates nothing.
type KeyedLimiter struct {
	c       *Cluster
	name    string
	windows []keyWindow
	named   string // the name a fault is noted under: the first window's key, with * for the request's key

	blocks blockCache // the keys refused last, until they could fit

	localMu sync.Mutex                    // serialises building the Local fallback
	local   atomic.Pointer[keyedFallback] // the Local fallback, for some number of instances

	script   *script                                     // keyedScript; tests: one that takes the time from its arguments
	timeArgs bool                                        // tests: give the script the time given as its own
	trace    func(now int64, key string, n int64, j int) // tests: each answer from Redis, at the server's time in µs (j -1: allowed)
}

// A keyWindow is one window of a KeyedLimiter, as Redis is told it.
type keyWindow struct {
	limit     int64
	overrides map[string]int64
	interval  time.Duration
	k         int64
	width     int64  // a bucket's width in microseconds
	suffix    string // the window's Redis keys after the tag: ":NAME:INTERVAL:BUCKETS"
	maxRetry  int64  // the longest retry the script answers for it, in microseconds
	widthArg  any    // width, boxed once: the script's arguments
	bucketArg any    // k, boxed once
	limitArg  any    // limit, boxed once
}

// limitFor returns the window's limit for key.
func (w *keyWindow) limitFor(key string) int64 {
	if l, ok := w.overrides[key]; ok {
		return l
	}
	return w.limit
}

// A keyedFallback is the Local fallback of a KeyedLimiter: its windows,
// each limit divided by instances.
type keyedFallback struct {
	instances int64
	q         *flow.KeyedQPS
}

// NewKeyedLimiter returns the cluster-wide per-key limiter called name. It
// holds each of windows for every key. There must be between 1 and
// 8 windows. Each window must have:
//   - a limit in [0, 2^32-1].
//   - a positive interval that divides into its buckets.
//   - buckets of whole microseconds.
//   - at most 100 buckets (20 if 0).
//   - at most 10,000 overrides.
//
// An override's key has at most 256 bytes, and its
// limit is in [0, 2^32-1]. No two windows may have the same interval
// and buckets: they would keep one count. A bad argument is an error
// matching [slidegate.ErrInvalidConfig] that names it and its value.
//
// The windows' overrides are copied: changing the maps later changes
// nothing.
func (c *Cluster) NewKeyedLimiter(name string, windows []flow.KeyWindow) (*KeyedLimiter, error) {
	bad := func(format string, args ...any) (*KeyedLimiter, error) {
		return nil, fmt.Errorf("%w: keyed limiter %q: "+format, append([]any{errInvalidConfig, name}, args...)...)
	}
	if name == "" {
		return bad("name is empty")
	}
	if len(windows) == 0 || len(windows) > flowlimits.MaxKeyWindows {
		return bad("windows: %d given: must be between 1 and %d", len(windows), flowlimits.MaxKeyWindows)
	}
	l := &KeyedLimiter{c: c, name: name, windows: make([]keyWindow, len(windows)), script: keyedScript}
	copied := make([]flow.KeyWindow, len(windows))
	for j, w := range windows {
		k := int64(w.Buckets)
		if k == 0 {
			k = flowlimits.DefaultKeyBuckets
		}
		switch {
		case k < 1 || k > flowlimits.MaxKeyBuckets:
			return bad("windows[%d].buckets = %d: must be between 1 and %d", j, w.Buckets, flowlimits.MaxKeyBuckets)
		case w.Interval <= 0 || w.Interval%(time.Duration(k)*time.Microsecond) != 0:
			return bad("windows[%d].interval = %v: must be positive and divide into %d buckets of whole microseconds", j, w.Interval, k)
		case len(w.Overrides) > bounds.MaxOverrides:
			return bad("windows[%d].overrides: %d keys: at most %d", j, len(w.Overrides), bounds.MaxOverrides)
		}
		for key := range w.Overrides {
			if len(key) > bounds.MaxKeyLength {
				return bad("windows[%d].overrides: a key of %d bytes: keys are at most %d bytes long", j, len(key), bounds.MaxKeyLength)
			}
		}
		for i := range j {
			if o := l.windows[i]; o.interval == w.Interval && o.k == k {
				return bad("windows[%d]: interval %v and %d buckets, as windows[%d]: the two would keep one count in Redis", j, w.Interval, k, i)
			}
		}
		width := (w.Interval / time.Duration(k)).Microseconds()
		l.windows[j] = keyWindow{
			limit:     w.Limit,
			overrides: clone(w.Overrides),
			interval:  w.Interval,
			k:         k,
			width:     width,
			suffix:    ":" + name + ":" + w.Interval.String() + ":" + strconv.FormatInt(k, 10),
			maxRetry:  maxRetry(width, k),
			widthArg:  width,
			bucketArg: k,
			limitArg:  w.Limit,
		}
		copied[j] = w
		copied[j].Buckets = int(k)
		copied[j].Overrides = l.windows[j].overrides
	}
	// The Local fallback's constructor judges what is left (the limits and
	// the overrides' limits), and the fallback is ready for the instances
	// known now.
	q, err := flow.NewKeyedQPS(flow.KeyedQPSSettings{Windows: copied, KeyMemory: c.keyMemory, Clock: c.clock})
	if err != nil {
		return bad("%w", err)
	}
	l.local.Store(&keyedFallback{instances: 1, q: q})
	l.named = l.keys("*")[0]
	l.blocks.init()
	return l, nil
}

// clone returns a copy of m, nil for an empty one.
func clone(m map[string]int64) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	c := make(map[string]int64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// cut returns key as the limiter tells keys apart: its first
// 256 bytes.
func cut(key string) string {
	if len(key) > bounds.MaxKeyLength {
		return key[:bounds.MaxKeyLength]
	}
	return key
}

// keys returns the Redis keys of key's windows.
func (l *KeyedLimiter) keys(key string) []string {
	tag := l.c.prefix + ":k:{" + escapeTag(key) + "}"
	keys := make([]string, len(l.windows))
	for j := range l.windows {
		keys[j] = tag + l.windows[j].suffix
	}
	return keys
}

// escapeTag returns key as it is written in a Redis key's hash tag: '%',
// '{' and '}' as %25, %7B and %7D, and the empty key as "%". The result is
// never empty and holds no '}', and no two keys have the same: a '%' in it
// begins one of the three escapes, but for the lone "%".
func escapeTag(key string) string {
	if key == "" {
		return "%"
	}
	if !strings.ContainsAny(key, "%{}") {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 8)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// AllowKeyN is AllowKeyNAt(ctx, now, key, n) at the time now on the
// cluster's clock ([WithClock]): the one clock read of the decision. It
// makes KeyedLimiter a [slidegate.KeyedClusterLimiter].
func (l *KeyedLimiter) AllowKeyN(ctx context.Context, key string, n int64) (flow.Decision, int) {
	return l.AllowKeyNAt(ctx, l.c.clock.Now(), key, n)
}

// AllowKeyNAt decides whether n permits may be taken by requests with the
// given key arriving at time now. It decides under every window, all or
// none, and counts them in every window if so. It then returns the decision
// and -1.
//
// When they may not be taken, it also returns the index of the window that
// refused them. n above a window's limit for the key is refused with
// [flow.ExceedsLimit] by the first such window, without a round trip.
// Otherwise the window is the one that frees last of those that refuse n
// for the rate (the first of them on a tie). Its RetryAfter says when n
// would fit it, and so every window, if nothing else were allowed
// meanwhile. n <= 0 is allowed and counts nothing. The key is cut to
// 256 bytes.
//
// now is in nanoseconds on the cluster's clock ([WithClock]). It is when a
// cached refusal ends, and when the Local fallback counts. A decision taken
// to Redis is on Redis's clock, whatever now says.
//
// It returns within the cluster's timeout, which is real time whatever the
// clock. Past the timeout, if ctx ends first, or while Redis is down, the
// decision is the cluster's fallback. With [FailClosed], the fallback's
// refusal names window 0.
func (l *KeyedLimiter) AllowKeyNAt(ctx context.Context, now int64, key string, n int64) (flow.Decision, int) {
	if n <= 0 {
		return allowed, -1
	}
	key = cut(key)
	for j := range l.windows {
		if n > l.windows[j].limitFor(key) {
			return flow.Decision{Reason: flow.ExceedsLimit}, j
		}
	}
	if until, j, ok := l.blocks.find(key, now, n); ok {
		return flow.Decision{Reason: flow.RateLimited, RetryAfter: time.Duration(until - now)}, j
	}
	if l.c.down.Load() || ctx.Err() != nil {
		return l.fallback(now, key, n)
	}
	rctx, cancel := context.WithTimeout(ctx, l.c.timeout)
	defer cancel()
	l.c.roundTrips.Add(1)
	r, err := l.run(rctx, now, key, n)
	if err != nil {
		if ctx.Err() == nil { // else the caller gave up, not Redis
			l.c.failed(err)
		}
		return l.fallback(now, key, n)
	}
	if l.trace != nil {
		l.trace(r.now, key, n, r.window)
	}
	if r.window >= 0 {
		l.blocks.add(key, addClamped(now, int64(r.retry)), n, r.window)
		return flow.Decision{Reason: flow.RateLimited, RetryAfter: r.retry}, r.window
	}
	return allowed, -1
}

// run runs the keyed script for n permits of key within ctx, one round
// trip, and decodes its reply.
func (l *KeyedLimiter) run(ctx context.Context, now int64, key string, n int64) (keyedReply, error) {
	args := make([]any, 0, 4*len(l.windows)+2)
	nArg := any(n) // boxed once for every window
	for j := range l.windows {
		w := &l.windows[j]
		limit := w.limitArg
		if o, ok := w.overrides[key]; ok {
			limit = o
		}
		args = append(args, nArg, limit, w.widthArg, w.bucketArg)
	}
	if l.timeArgs {
		us := now / int64(time.Microsecond)
		args = append(args, us/1e6, us%1e6)
	}
	cmd := l.c.runAs(ctx, l.script, l.named, l.keys(key), args...)
	if err := cmd.Err(); err != nil {
		return keyedReply{}, err
	}
	return decodeKeyedReply(cmd.Val(), l.windows)
}

// fallback decides, at now, while Redis cannot.
func (l *KeyedLimiter) fallback(now int64, key string, n int64) (flow.Decision, int) {
	l.c.fallbacks.Add(1)
	switch l.c.fallback {
	case FailOpen:
		return allowed, -1
	case FailClosed:
		return flow.Decision{Reason: flow.RateLimited}, 0
	}
	return l.localFor(l.c.instances.Load()).q.AllowNAt(now, key, n)
}

// localFor returns the Local fallback for the given number of instances,
// made anew (with empty windows) when the number has changed since the last
// one was made. It changes only while Redis is up (the heartbeat learns it),
// so within one outage the fallback keeps its counts.
func (l *KeyedLimiter) localFor(instances int64) *keyedFallback {
	if f := l.local.Load(); f.instances == instances {
		return f
	}
	l.localMu.Lock()
	defer l.localMu.Unlock()
	f := l.local.Load()
	if f.instances == instances {
		return f
	}
	windows := make([]flow.KeyWindow, len(l.windows))
	for j, w := range l.windows {
		windows[j] = flow.KeyWindow{Limit: share(w.limit, instances), Interval: w.interval, Buckets: int(w.k)}
		if len(w.overrides) > 0 {
			windows[j].Overrides = make(map[string]int64, len(w.overrides))
			for key, limit := range w.overrides {
				windows[j].Overrides[key] = share(limit, instances)
			}
		}
	}
	q, err := flow.NewKeyedQPS(flow.KeyedQPSSettings{Windows: windows, KeyMemory: l.c.keyMemory, Clock: l.c.clock})
	if err != nil {
		// Smaller limits than NewKeyedLimiter's constructor accepted:
		// cannot fail. Keep deciding with the fallback there is.
		return f
	}
	f = &keyedFallback{instances: instances, q: q}
	l.local.Store(f)
	return f
}

// share returns an instance's share of limit: limit / instances, at least 1
// when limit is not 0.
func share(limit, instances int64) int64 {
	s := limit / max(instances, 1)
	if s == 0 && limit > 0 {
		s = 1
	}
	return s
}
