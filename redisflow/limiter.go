package redisflow

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
)

// A Limiter is one cluster-wide QPS limit: at most Limit permits in any
// interval of its length, wherever it starts, across every instance that
// shares it (every Limiter of the same name, interval and buckets under the
// same prefix). It has the semantics of flow.QPS, whose bucketed window it
// keeps in Redis: one hash per limit, decided on by one Lua script on the
// Redis server's clock (TIME), so the instances' clocks do not matter, in one
// round trip.
//
// The window is divided into k buckets (WithBuckets). A grant is admitted
// only if the bucket it falls in and the k buckets before it hold, with it,
// no more than the limit; an interval touches at most k+1 buckets, so no
// interval holds more than the limit (the exact guarantee, not a bound), and
// under steady overload the cluster admits k/(k+1) of its limit. The hash
// keeps the window's sum beside its buckets, so that a decision reads two
// fields whatever k is. GCRA (one timestamp per limit, as in redis_rate)
// would cost Redis a little less per decision, but bounds only the rate over
// the long run: it lets close to twice the limit through in some intervals.
// BENCHMARKS.md has what a decision costs.
//
// Without leasing, every decision is a round trip. With WithLease(L, ttl), a
// round trip that admits a request also takes up to L-1 more permits, which
// the limiter spends locally, without a round trip, until they run out or
// the ttl passes; then the next round trip gives back what is left. A lease is
// counted in Redis when it is taken, so the permits spent in an interval
// are those granted in it, at most the limit, plus what is left of the lease
// each limiter held when the interval began: at most Limit + P·(L-1) in any
// interval, for P limiters sharing the limit (normally one per instance).
// While a limiter's round trip for a lease is under way, its other requests
// wait for that lease rather than ask Redis too; one that cannot be served
// within the timeout is refused (flow.RateLimited), as Redis is answering.
//
// While Redis is down (see Cluster), decisions are the cluster's fallback.
// A decision never waits for Redis longer than the cluster's timeout. Redis
// does not learn what the fallback admitted, nor the fallback what Redis
// did: an interval that spans a switch between them can hold what each
// admitted, up to twice the limit with the Local fallback.
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

	lease        atomic.Pointer[lease]
	refusedUntil atomic.Int64 // the clock's time until which nothing can be admitted
	local        *flow.QPS    // the Local fallback

	mu     sync.Mutex // guards flight, and orders cached refusals with SetLimit
	flight *flight    // with leasing: the round trip under way, if any

	trace  func(now, granted int64) // tests: each answer from Redis (0 granted: refused), at the server's time in µs
	queued func()                   // tests: a request starts waiting for another's round trip
}

// A lease is the permits taken from Redis in one round trip beyond the
// request that took them.
type lease struct {
	left    atomic.Int64
	expires int64 // on the cluster's clock
	bucket  int64 // the Redis bucket they are counted in, for giving them back
}

// A flight is a round trip for a lease, which others wait for.
type flight struct{ done chan struct{} }

// A LimiterOption configures a Limiter.
type LimiterOption func(*limiterOptions)

type limiterOptions struct {
	buckets int
	lease   int64
	ttl     time.Duration
}

// MaxBuckets is the most buckets a Limiter divides its interval into: the
// guard's bound on a cluster rule's buckets.
const MaxBuckets = slidegate.MaxClusterBuckets

// WithBuckets divides the limiter's interval into k buckets (default
// flow.DefaultBuckets, at most MaxBuckets). Each must be a whole number of
// microseconds, the resolution of Redis's clock. More buckets admit closer to
// the limit under steady overload and cost a decision no more; a refusal
// reads every bucket.
func WithBuckets(k int) LimiterOption { return func(o *limiterOptions) { o.buckets = k } }

// WithLease makes the limiter take up to size permits per round trip and
// spend the rest locally for at most ttl (0: one bucket width). size 1, the
// default, leases nothing. See Limiter for the slack this adds.
func WithLease(size int64, ttl time.Duration) LimiterOption {
	return func(o *limiterOptions) { o.lease, o.ttl = size, ttl }
}

// NewLimiter returns the cluster-wide limiter called name, admitting at most
// limit permits in any interval of the given length across all instances.
// limit must be in [0, flow.MaxLimit] and the interval positive, dividing
// into buckets of whole microseconds.
func (c *Cluster) NewLimiter(name string, limit int64, interval time.Duration, opts ...LimiterOption) (*Limiter, error) {
	o := limiterOptions{buckets: flow.DefaultBuckets, lease: 1}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	bad := func(format string, args ...any) (*Limiter, error) {
		return nil, fmt.Errorf("%w: limiter %q: "+format, append([]any{ErrInvalidConfig, name}, args...)...)
	}
	k := int64(o.buckets)
	switch {
	case name == "":
		return bad("name is empty")
	case o.buckets < 1 || o.buckets > MaxBuckets:
		return bad("buckets = %d: must be between 1 and %d", o.buckets, MaxBuckets)
	case interval <= 0 || interval%(time.Duration(k)*time.Microsecond) != 0:
		return bad("interval = %v: must be positive and divide into %d buckets of whole microseconds", interval, k)
	case o.lease < 1:
		return bad("lease = %d: must be at least 1 (1 leases nothing)", o.lease)
	case o.ttl < 0:
		return bad("lease ttl = %v: must not be negative", o.ttl)
	}
	local, err := flow.NewQPS(limit, interval, flow.WithBuckets(o.buckets), flow.WithClock(c.clock))
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
		size:     o.lease,
		ttl:      int64(o.ttl),
		local:    local,
	}
	l.limit.Store(limit)
	return l, nil
}

// key returns the Redis key of a limit. The name is the hash tag, so that
// every key of one limit lands in one Redis Cluster slot; braces in it are
// escaped, as they would end the tag.
func key(prefix, name string, interval time.Duration, k int64) string {
	esc := strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")
	return prefix + ":{" + esc.Replace(name) + "}:" + interval.String() + ":" + strconv.FormatInt(k, 10)
}

// Key returns the limiter's key in Redis.
func (l *Limiter) Key() string { return l.keys[0] }

// Limit returns the most permits the limiter admits in any interval.
func (l *Limiter) Limit() int64 { return l.limit.Load() }

// Interval returns the length of the limiter's interval.
func (l *Limiter) Interval() time.Duration { return l.interval }

// SetLimit changes the limit. Redis keeps the counts, which count against
// the new limit from the next decision on. A limit outside
// [0, flow.MaxLimit] is refused, and the limit in force stays.
func (l *Limiter) SetLimit(limit int64) error {
	if limit < 0 || limit > flow.MaxLimit {
		return fmt.Errorf("%w: limiter %q: limit = %d: must be between 0 and %d", ErrInvalidConfig, l.name, limit, int64(flow.MaxLimit))
	}
	l.mu.Lock()
	l.limit.Store(limit)
	l.refusedUntil.Store(0)
	l.mu.Unlock()
	return nil
}

var allowed = flow.Decision{Allowed: true}

// Allow is AllowN(ctx, 1).
func (l *Limiter) Allow(ctx context.Context) flow.Decision { return l.AllowN(ctx, 1) }

// AllowN decides whether n permits may be taken, all or none, and counts
// them if so. n <= 0 is allowed and counts nothing; n above the limit is
// refused with flow.ExceedsLimit. A refusal for the rate says in RetryAfter
// when, if nothing else were admitted, the permits would fit.
//
// It returns within the cluster's timeout: past it, or if ctx ends first,
// or while Redis is down, the decision is the cluster's fallback; with
// leasing, a request still waiting for another's round trip at the timeout
// is refused instead, Redis being up.
func (l *Limiter) AllowN(ctx context.Context, n int64) flow.Decision {
	if n <= 0 {
		return allowed
	}
	limit := l.limit.Load()
	if n > limit {
		return flow.Decision{Reason: flow.ExceedsLimit}
	}
	now := l.c.clock.Now()
	if l.size > 1 && l.spend(now, n) {
		return allowed
	}
	// A refusal for one permit holds until the window moves on.
	if until := l.refusedUntil.Load(); now < until {
		return flow.Decision{Reason: flow.RateLimited, RetryAfter: time.Duration(until - now)}
	}
	if l.c.down.Load() || ctx.Err() != nil {
		return l.fallback(now, n)
	}
	return l.ask(ctx, now, n, limit)
}

// spend takes n permits from the lease, if it has them and is alive.
func (l *Limiter) spend(now, n int64) bool {
	ls := l.lease.Load()
	if ls == nil || now >= ls.expires {
		return false
	}
	for {
		left := ls.left.Load()
		if left < n {
			return false
		}
		if ls.left.CompareAndSwap(left, left-n) {
			return true
		}
	}
}

// ask takes the decision to Redis, within the cluster's timeout.
func (l *Limiter) ask(parent context.Context, now, n, limit int64) flow.Decision {
	ctx, cancel := context.WithTimeout(parent, l.c.timeout)
	defer cancel()
	if l.size == 1 {
		return l.roundTrip(parent, ctx, true, now, n, 0, -1, 0, limit)
	}
	// With leasing, one round trip at a time: the permits left in a lease
	// when an interval begins are the only ones spent in it without being
	// granted in it. The others wait for its lease instead of asking Redis
	// too.
	for waited := false; ; waited = true {
		l.mu.Lock()
		f := l.flight
		if f == nil {
			f = &flight{done: make(chan struct{})}
			l.flight = f
			l.mu.Unlock()
			d := l.renew(parent, ctx, !waited, now, n, limit)
			l.mu.Lock()
			l.flight = nil
			l.mu.Unlock()
			close(f.done)
			return d
		}
		l.mu.Unlock()
		if l.queued != nil {
			l.queued()
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			if parent.Err() != nil || l.c.down.Load() {
				return l.fallback(l.c.clock.Now(), n)
			}
			// Redis answers, but not to us in time: the lease could
			// not be had.
			return flow.Decision{Reason: flow.RateLimited}
		}
		now = l.c.clock.Now()
		if l.spend(now, n) {
			return allowed
		}
		if until := l.refusedUntil.Load(); now < until {
			return flow.Decision{Reason: flow.RateLimited, RetryAfter: time.Duration(until - now)}
		}
		if l.c.down.Load() {
			return l.fallback(now, n)
		}
	}
}

// renew takes a new lease from Redis, giving back what is left of the old
// one, unless a round trip that ended since now was read brought the permits
// needed.
func (l *Limiter) renew(parent, ctx context.Context, full bool, now, n, limit int64) flow.Decision {
	if l.spend(now, n) {
		return allowed
	}
	back, backBucket := int64(0), int64(-1)
	if old := l.lease.Load(); old != nil {
		if back = old.left.Swap(0); back > 0 {
			backBucket = old.bucket
		}
	}
	return l.roundTrip(parent, ctx, full, now, n, max(l.size-n, 0), backBucket, back, limit)
}

// roundTrip runs the limit script: n permits needed, extra more wanted as a
// lease, back permits of bucket backBucket given back. full says whether ctx
// gave Redis the whole timeout: a call cut short by a deadline that came
// earlier does not mark Redis down, and is refused.
func (l *Limiter) roundTrip(parent, ctx context.Context, full bool, now, n, extra, backBucket, back, limit int64) flow.Decision {
	l.c.roundTrips.Add(1)
	r, err := l.c.run(ctx, limitScript, l.keys, limit, l.width, l.k, n, extra, backBucket, back).Int64Slice()
	if err == nil && len(r) < 5 {
		err = fmt.Errorf("redisflow: the limit script answered %v", r)
	}
	if err != nil {
		switch {
		case parent.Err() != nil: // the caller gave up, not Redis
		case full || ctx.Err() == nil:
			l.c.failed(err)
		default:
			// Cut short by the time spent waiting for the round trip
			// before: Redis may be well, and only too slow for what
			// was left.
			return flow.Decision{Reason: flow.RateLimited}
		}
		return l.fallback(now, n)
	}
	if l.trace != nil {
		l.trace(r[4], r[1])
	}
	if r[0] == 0 {
		d := time.Duration(r[2]) * time.Microsecond
		if n == 1 { // nothing fits until then: cache it, unless the limit changed meanwhile
			l.mu.Lock()
			if l.limit.Load() == limit {
				l.refusedUntil.Store(now + int64(d))
			}
			l.mu.Unlock()
		}
		return flow.Decision{Reason: flow.RateLimited, RetryAfter: d}
	}
	if granted := r[1]; granted > n {
		ls := &lease{expires: now + l.ttl, bucket: r[3]}
		ls.left.Store(granted - n)
		l.lease.Store(ls)
	}
	return allowed
}

// fallback decides while Redis cannot.
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
	if l.local.Limit() != share {
		l.local.SetLimit(share) // in [0, limit]: cannot fail
	}
	return l.local.AllowNAt(now, n)
}

// Release gives back to Redis the permits left in the limiter's lease, so
// that other instances can take them at once; otherwise they expire with
// the window. The limiter stays usable.
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
	return l.c.run(ctx, limitScript, l.keys, l.limit.Load(), l.width, l.k, 0, 0, ls.bucket, back).Err()
}
