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

// A Limiter is one cluster-wide QPS limit: at most Limit permits in any
// interval of its length, wherever it starts. The limit holds across every
// instance that shares it: every Limiter of the same name, interval and
// buckets under the same prefix. It has the semantics of [flow.QPS], whose
// bucketed window it keeps in Redis, in one hash per limit. One Lua script
// decides, in one round trip, on the Redis server's clock (TIME). So the
// instances' clocks do not matter.
//
// The window is divided into k buckets ([WithBuckets]). No interval holds
// more than the limit: that is exact, not a bound. Under steady overload
// the cluster allows k/(k+1) of its limit. BENCHMARKS.md has what a
// decision costs, beside other limiters over Redis.
//
// Without leasing, every decision is a round trip. With WithLease(L, ttl),
// a round trip that allows a request also takes up to L-1 more permits. The
// limiter spends them locally, without a round trip, until they run out or
// the ttl passes. Then the next round trip gives back what is left. An
// interval then holds at most Limit + P·(L-1) permits, for P limiters
// sharing the limit (normally one per instance). While a limiter's round
// trip for a lease is under way, its other requests wait for that lease
// rather than ask Redis too. One that cannot be served within the timeout
// is blocked ([flow.RateLimited]), as Redis is answering.
//
// While Redis is down (see [Cluster]), decisions are the cluster's
// fallback. A decision never waits for Redis longer than the cluster's
// timeout. Redis does not learn what the fallback allowed, nor the fallback
// what Redis did. So an interval that spans a switch between them can hold
// what each allowed: up to twice the limit with the [Local] fallback.
//
// A decision taken to Redis is on Redis's clock. What the limiter keeps
// locally is on the cluster's clock ([WithClock]): its lease, a cached
// block, the Local fallback's window. That clock is read at the now that
// [Limiter.AllowNAt] is given, or that [Limiter.AllowN] reads once.
// [Limiter.Release] and [Limiter.SetLimit] read no clock.
//
// A Limiter is safe for concurrent use. Spending a lease allocates nothing.
type Limiter struct {
	c        *Cluster
	name     string
	keys     []string // the limit's one key
	limit    atomic.Int64
	interval time.Duration
	k        int64
	width    int64 // a bucket's width in microseconds
	size     int64 // permits per round trip (the lease's size)
	ttl      int64 // a lease's life, in nanoseconds

	maxRetry int64 // the longest retry the limit script answers, in microseconds

	lease        atomic.Pointer[lease]
	blockedUntil atomic.Int64 // the clock's time until which nothing can be allowed
	local        *flow.QPS    // the Local fallback
	localLimit   atomic.Int64 // local's limit: the share it was last set to

	mu      sync.Mutex  // orders cached blocks with SetLimit
	flights leaseFlight // with leasing: the round trip under way, if any

	trace  func(now, granted int64) // tests: each answer from Redis (0 granted: blocked), at the server's time in µs
	queued func()                   // tests: a request starts waiting for another's round trip
}

// A LimiterOption configures a Limiter.
type LimiterOption func(*limiterOptions)

type limiterOptions struct {
	buckets int
	lease   int64
	ttl     time.Duration
}

// maxBuckets is the most buckets a Limiter divides its interval into. It is
// the guard's bound on a cluster rule's buckets.
const maxBuckets = bounds.MaxClusterBuckets

// WithBuckets divides the limiter's interval into k buckets (default
// 25, at most 1,000). Each must be a whole number
// of microseconds, the resolution of Redis's clock. More buckets allow
// closer to the limit under steady overload, and cost a decision no more. A
// block reads every bucket.
func WithBuckets(k int) LimiterOption { return func(o *limiterOptions) { o.buckets = k } }

// WithLease makes the limiter take up to size permits per round trip. It
// spends the rest locally for at most ttl (0: one bucket width). A size of
// 1, the default, leases nothing. size is at most 2^32-1, and ttl
// must not be negative. A lease is spent until its ttl has passed on the
// cluster's clock, however long that is. See [Limiter] for the slack this
// adds.
func WithLease(size int64, ttl time.Duration) LimiterOption {
	return func(o *limiterOptions) { o.lease, o.ttl = size, ttl }
}

// NewLimiter returns the cluster-wide limiter called name. It allows at most
// limit permits in any interval of the given length, across all instances.
// limit must be in [0, 2^32-1]. The interval must be positive, and
// divide into buckets of whole microseconds. A bad argument or option is an
// error matching [slidegate.ErrInvalidConfig] that names it and its value. A nil
// LimiterOption is no option.
func (c *Cluster) NewLimiter(name string, limit int64, interval time.Duration, opts ...LimiterOption) (*Limiter, error) {
	o := limiterOptions{buckets: flowlimits.DefaultBuckets, lease: 1}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	bad := func(format string, args ...any) (*Limiter, error) {
		return nil, fmt.Errorf("%w: limiter %q: "+format, append([]any{errInvalidConfig, name}, args...)...)
	}
	k := int64(o.buckets)
	switch {
	case name == "":
		return bad("name is empty")
	case o.buckets < 1 || o.buckets > maxBuckets:
		return bad("buckets = %d: must be between 1 and %d", o.buckets, maxBuckets)
	case interval <= 0 || interval%(time.Duration(k)*time.Microsecond) != 0:
		return bad("interval = %v: must be positive and divide into %d buckets of whole microseconds", interval, k)
	case o.lease < 1 || o.lease > flowlimits.MaxLimit:
		return bad("lease = %d: must be between 1 and %d (1 leases nothing)", o.lease, int64(flowlimits.MaxLimit))
	case o.ttl < 0:
		return bad("lease ttl = %v: must not be negative", o.ttl)
	}
	local, err := flow.NewQPS(flow.QPSSettings{Limit: limit, Interval: interval, Buckets: o.buckets, Clock: c.clock})
	if err != nil {
		return bad("%w", err)
	}
	width := interval / time.Duration(k)
	if o.ttl == 0 {
		o.ttl = width
	}
	l := &Limiter{
		c:        c,
		name:     name,
		keys:     []string{key(c.prefix, name, interval, k)},
		interval: interval,
		k:        k,
		width:    width.Microseconds(),
		maxRetry: maxRetry(width.Microseconds(), k),
		size:     o.lease,
		ttl:      int64(o.ttl),
		local:    local,
	}
	l.limit.Store(limit)
	l.localLimit.Store(limit)
	return l, nil
}

// key returns the Redis key of a limit. The name is the hash tag, so that
// every key of one limit lands in one Redis Cluster slot; braces in it are
// escaped, as they would end the tag.
func key(prefix, name string, interval time.Duration, k int64) string {
	esc := strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")
	return prefix + ":{" + esc.Replace(name) + "}:" + interval.String() + ":" + strconv.FormatInt(k, 10)
}

// Limit returns the most permits the limiter allows in any interval.
func (l *Limiter) Limit() int64 { return l.limit.Load() }

// Interval returns the length of the limiter's interval.
func (l *Limiter) Interval() time.Duration { return l.interval }

// SetLimit changes the limit. Redis keeps the counts, which count against
// the new limit from the next decision on. A limit outside
// [0, 2^32-1] is an error matching [slidegate.ErrInvalidConfig], and the limit
// in force stays.
func (l *Limiter) SetLimit(limit int64) error {
	if limit < 0 || limit > flowlimits.MaxLimit {
		return fmt.Errorf("%w: limiter %q: limit = %d: must be between 0 and %d", errInvalidConfig, l.name, limit, int64(flowlimits.MaxLimit))
	}
	l.mu.Lock()
	l.limit.Store(limit)
	l.blockedUntil.Store(0)
	l.mu.Unlock()
	return nil
}

var allowed = flow.Decision{Allowed: true}

// AllowN is AllowNAt(ctx, now, n) at the time now on the cluster's clock
// ([WithClock]): the one clock read of the decision.
func (l *Limiter) AllowN(ctx context.Context, n int64) flow.Decision {
	return l.AllowNAt(ctx, l.c.clock.Now(), n)
}

// AllowNAt decides whether n permits may be taken by requests arriving at
// time now, all or none, and counts them if so. n <= 0 is allowed and
// counts nothing. n above the limit is blocked with [flow.ExceedsLimit]. A
// block for the rate says in RetryAfter when the permits would fit, if
// nothing else were allowed.
//
// now is in nanoseconds on the cluster's clock ([WithClock]). The limiter's
// own state is read at now alone: whether the lease is alive, whether a
// cached block still holds, and the Local fallback's window. A decision
// taken to Redis is on Redis's clock (TIME), whatever now says. AllowNAt
// reads no clock, but what Redis answers depends on the server's time too.
// A now earlier than one given before keeps a lease alive, and a cached
// block in force, for that much longer. The fallback counts it as
// [flow.QPS] does.
//
// It returns within the cluster's timeout, which is real time whatever the
// clock. Past the timeout, if ctx ends first, or while Redis is down, the
// decision is the cluster's fallback. With leasing, a request still waiting
// for another's round trip at the timeout is blocked instead, Redis being
// up.
func (l *Limiter) AllowNAt(ctx context.Context, now, n int64) flow.Decision {
	if n <= 0 {
		return allowed
	}
	limit := l.limit.Load()
	if n > limit {
		return flow.Decision{Reason: flow.ExceedsLimit}
	}
	if l.size > 1 && l.spend(now, n) {
		return allowed
	}
	// A block of one permit holds until the window moves on.
	if until := l.blockedUntil.Load(); now < until {
		return flow.Decision{Reason: flow.RateLimited, RetryAfter: time.Duration(until - now)}
	}
	if l.c.down.Load() || ctx.Err() != nil {
		return l.fallback(now, n)
	}
	if l.size > 1 {
		return l.askLeasing(ctx, now, n, limit)
	}
	return l.roundTrip(ctx, l.c.timeout, now, query{limit: limit, need: n, backBucket: -1})
}

// fallback decides, at now, while Redis cannot.
func (l *Limiter) fallback(now, n int64) flow.Decision {
	l.c.fallbacks.Add(1)
	switch l.c.fallback {
	case FailOpen:
		return allowed
	case FailClosed:
		return flow.Decision{Reason: flow.RateLimited}
	}
	limit, instances := l.limit.Load(), l.c.instances.Load()
	share := limit / instances
	if share == 0 && limit > 0 {
		share = 1
	}
	if l.localLimit.Load() != share {
		l.local.SetLimit(share) // in [0, limit]: cannot fail
		l.localLimit.Store(share)
	}
	return l.local.AllowNAt(now, n)
}

// Release gives back to Redis the permits left in the limiter's lease, so
// that other instances can take them at once. Otherwise they expire with
// the window. It waits for Redis at most the cluster's timeout. It reads no
// clock: giving back is right whether the lease is alive or not, as Redis
// ignores permits given back to a bucket that has left the window. The
// limiter stays usable.
func (l *Limiter) Release(ctx context.Context) error {
	ls := l.lease.Load()
	if ls == nil {
		return nil
	}
	back := ls.left.Swap(0)
	if back == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.c.timeout)
	defer cancel()
	l.c.roundTrips.Add(1)
	_, err := l.run(ctx, query{limit: l.limit.Load(), back: back, backBucket: ls.bucket})
	return err
}
