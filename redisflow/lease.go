package redisflow

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/flow"
)

// A lease is the permits taken from Redis in one round trip beyond the
// request that took them, spent locally until they run out or it expires.
type lease struct {
	left    atomic.Int64
	expires int64 // on the cluster's clock; math.MaxInt64: never
	bucket  int64 // the Redis bucket they are counted in, for giving them back
}

// spend takes n permits from the limiter's lease, if it has them and is
// alive at now.
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

// A leaseFlight keeps a leasing limiter to one round trip to Redis at a
// time: the permits left in a lease when an interval begins are the only
// ones spent in it without being granted in it (see Limiter), and two round
// trips under way at once could each bring a lease. A request that finds a
// round trip under way waits for it and tries the lease it brought, rather
// than ask Redis too.
//
// The zero leaseFlight has no round trip under way. Its methods are safe for
// concurrent use.
type leaseFlight struct {
	mu  sync.Mutex
	cur *flight // the round trip under way; nil when none is
}

// A flight is one round trip for a lease; done is closed when it ends.
type flight struct{ done chan struct{} }

// begin makes a new flight the one under way and returns it, with mine
// true, for the caller to make the round trip and then end it; or, if one is
// under way already, returns that one, with mine false, for the caller to
// wait for.
func (s *leaseFlight) begin() (f *flight, mine bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return s.cur, false
	}
	s.cur = &flight{done: make(chan struct{})}
	return s.cur, true
}

// end ends flight f, which begin made the caller's: the next begin starts a
// new one, and those waiting for f go on.
func (s *leaseFlight) end(f *flight) {
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
	close(f.done)
}

// askLeasing takes the decision on n permits, for a request arriving at now,
// to Redis through the limiter's leaseFlight, within the cluster's timeout.
// The request that finds no round trip under way makes one, with the whole
// timeout. One that finds a round trip under way waits for it, then spends
// the lease it brought, or is blocked by the block it cached, or makes the
// next round trip with what is left of its timeout, counted from when it
// began to wait. Past the timeout, a request still waiting is blocked
// (flow.RateLimited), Redis being up; if ctx ends first, or Redis goes down,
// the decision is the fallback's. The whole decision is taken at now: the
// only time read is the real time that the timeout is measured in, and only
// by a request that waits.
func (l *Limiter) askLeasing(ctx context.Context, now, n, limit int64) flow.Decision {
	budget := l.c.timeout
	var deadline time.Time
	var timer *time.Timer // fires at deadline; made by the first wait
	for {
		f, mine := l.flights.begin()
		if mine {
			d := l.renew(ctx, budget, now, n, limit)
			l.flights.end(f)
			return d
		}
		if l.queued != nil {
			l.queued()
		}
		if timer == nil {
			deadline = time.Now().Add(budget)
			timer = time.NewTimer(budget)
			defer timer.Stop()
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return l.fallback(now, n)
		case <-timer.C:
			if l.c.down.Load() {
				return l.fallback(now, n)
			}
			// Redis answers, but not to us in time: the lease could not be
			// had.
			return flow.Decision{Reason: flow.RateLimited}
		}
		if l.spend(now, n) {
			return allowed
		}
		if until := l.blockedUntil.Load(); now < until {
			return flow.Decision{Reason: flow.RateLimited, RetryAfter: time.Duration(until - now)}
		}
		if l.c.down.Load() {
			return l.fallback(now, n)
		}
		budget = time.Until(deadline)
	}
}

// renew takes a new lease from Redis within budget, giving back what is left
// of the old one, unless a round trip that ended since the request arrived
// brought the permits needed.
func (l *Limiter) renew(ctx context.Context, budget time.Duration, now, n, limit int64) flow.Decision {
	if l.spend(now, n) {
		return allowed
	}
	q := query{limit: limit, need: n, extra: max(l.size-n, 0), backBucket: -1}
	if old := l.lease.Load(); old != nil {
		if q.back = old.left.Swap(0); q.back > 0 {
			q.backBucket = old.bucket
		}
	}
	return l.roundTrip(ctx, budget, now, q)
}
