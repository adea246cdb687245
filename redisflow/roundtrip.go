package redisflow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/slidegate/slidegate/flow"
)

// A query is what one run of the limit script asks of Redis (limit.lua's
// ARGV), beside the limit's shape, which the Limiter holds: its key, its
// bucket width and its number of buckets.
type query struct {
	limit int64 // the limit the decision is taken against (ARGV[1])
	need  int64 // permits needed, all or none (ARGV[4]); 0 asks for none
	extra int64 // permits wanted on top, as a lease, if free (ARGV[5])
	// back permits of an earlier lease, counted in bucket backBucket, are
	// given back (ARGV[7], ARGV[6]); back 0 gives nothing back, and then
	// backBucket is -1.
	back, backBucket int64
}

// A reply is the limit script's answer to a query, decoded and checked
// against what the script can answer to it.
type reply struct {
	// allowed: the permits needed were granted and counted.
	allowed bool
	// granted is the permits counted: the need, and the lease taken on top
	// (at most the query's extra); 0 when blocked.
	granted int64
	// retry, when blocked, is when the need would fit if nothing else were
	// granted meanwhile: at least 1µs, and at most the limiter's maxRetry.
	retry time.Duration
	// bucket is the bucket counted in, on the server's clock: where a lease
	// taken is given back to.
	bucket int64
	// now is the server's time (TIME), in microseconds.
	now int64
}

// replyFields name the elements of the limit script's reply, in order.
var replyFields = [...]string{"allowed", "granted", "retry", "bucket", "now"}

// ErrMalformedReply is wrapped by the error of a call that Redis answered
// with something the cluster's scripts cannot return:
//   - bytes outside Redis's protocol (RESP2).
//   - a reply larger, or nested deeper, than a reply to the cluster may be.
//   - a reply to no command.
//   - a value of another type or length.
//   - a number outside what the script answers.
//
// Such a number is a grant above what was asked, or a retry beyond two
// intervals. The server is then not the Redis it seems: a proxy that
// mangles replies, or another program on its port. Its answer decides
// nothing. A decision that meets one falls back, as in an outage, and
// [Limiter.Release] returns it. The connection that carried it is closed,
// so that no later call reads the rest.
var ErrMalformedReply = errors.New("redisflow: malformed reply")

// decodeReply decodes v, Redis's answer to q, a run of the limit script for
// a limiter whose retries are at most maxRetry microseconds. It returns an
// error wrapping ErrMalformedReply for anything the script cannot answer,
// naming the element and its type or value but never copying the reply,
// whose size the server chose. It does not allocate unless the reply is
// malformed.
func decodeReply(v any, q query, maxRetry int64) (reply, error) {
	a, ok := v.([]any)
	if !ok {
		return reply{}, fmt.Errorf("%w: a %T; want an array of %d integers", ErrMalformedReply, v, len(replyFields))
	}
	if len(a) != len(replyFields) {
		return reply{}, fmt.Errorf("%w: an array of %d elements; want %d integers", ErrMalformedReply, len(a), len(replyFields))
	}
	var f [len(replyFields)]int64
	for i, e := range a {
		x, ok := e.(int64)
		if !ok {
			return reply{}, fmt.Errorf("%w: %s is a %T; want an integer", ErrMalformedReply, replyFields[i], e)
		}
		f[i] = x
	}
	allowed, granted, retry := f[0], f[1], f[2]
	r := reply{allowed: allowed == 1, granted: granted, bucket: f[3], now: f[4]}
	bad := func(field string, value int64, want string) (reply, error) {
		return reply{}, fmt.Errorf("%w: %s = %d; want %s", ErrMalformedReply, field, value, want)
	}
	switch {
	case allowed != 0 && allowed != 1:
		return bad("allowed", allowed, "0 or 1")
	case r.allowed && (granted < q.need || granted-q.need > q.extra):
		return bad("granted", granted, fmt.Sprintf("between %d and %d", q.need, q.need+q.extra))
	case !r.allowed && granted != 0:
		return bad("granted", granted, "0 when blocked")
	case !r.allowed && (retry < 1 || retry > maxRetry):
		return bad("retry", retry, fmt.Sprintf("between 1 and %d µs when blocked", maxRetry))
	}
	if !r.allowed {
		r.retry = time.Duration(retry) * time.Microsecond // maxRetry keeps it in range
	}
	return r, nil
}

// maxRetry returns the longest retry, in microseconds, that the limit script
// answers for a window of k buckets of width µs: a block lasts until the
// oldest bucket that frees enough leaves the window, at most k+1 widths past
// the newest bucket, which is at most k widths past the server's time (the
// server's clock stepped back), so (2k+1) widths. It is capped so that it
// converts to a time.Duration without overflow.
func maxRetry(width, k int64) int64 {
	if width > (math.MaxInt64/int64(time.Microsecond))/(2*k+1) {
		return math.MaxInt64 / int64(time.Microsecond)
	}
	return (2*k + 1) * width
}

// run runs the limit script for q within ctx, one round trip, and decodes
// its reply.
func (l *Limiter) run(ctx context.Context, q query) (reply, error) {
	cmd := l.c.run(ctx, limitScript, l.keys, q.limit, l.width, l.k, q.need, q.extra, q.backBucket, q.back)
	if err := cmd.Err(); err != nil {
		return reply{}, err
	}
	return decodeReply(cmd.Val(), q, l.maxRetry)
}

// roundTrip takes the decision on q, for a request arriving at now, to
// Redis, waiting for it at most budget.
//
// The budget is the cluster's timeout, or, for a request that waited for
// another's round trip first (see leaseFlight), what it had left of it. A
// round trip that fails marks Redis down, and the decision is the fallback's,
// except in two cases: if ctx ended first, the caller gave up, not Redis, and
// the decision is the fallback's without marking Redis down; if a budget
// shorter than the timeout ran out, Redis may be well and only too slow for
// what was left, and the request is blocked (flow.RateLimited) without
// marking Redis down.
func (l *Limiter) roundTrip(ctx context.Context, budget time.Duration, now int64, q query) flow.Decision {
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	l.c.roundTrips.Add(1)
	r, err := l.run(rctx, q)
	if err != nil {
		switch {
		case ctx.Err() != nil: // the caller gave up, not Redis
		case budget >= l.c.timeout || rctx.Err() == nil:
			l.c.failed(err)
		default:
			return flow.Decision{Reason: flow.RateLimited}
		}
		return l.fallback(now, q.need)
	}
	if l.trace != nil {
		l.trace(r.now, r.granted)
	}
	if !r.allowed {
		if q.need == 1 { // nothing fits until then: cache it, unless the limit changed meanwhile
			l.mu.Lock()
			if l.limit.Load() == q.limit {
				l.blockedUntil.Store(addClamped(now, int64(r.retry)))
			}
			l.mu.Unlock()
		}
		return flow.Decision{Reason: flow.RateLimited, RetryAfter: r.retry}
	}
	if r.granted > q.need {
		ls := &lease{expires: addClamped(now, l.ttl), bucket: r.bucket}
		ls.left.Store(r.granted - q.need)
		l.lease.Store(ls)
	}
	return allowed
}

// addClamped returns t+d for d >= 0, or math.MaxInt64 where the sum would
// overflow: a time so far ahead stands for never.
func addClamped(t, d int64) int64 {
	if t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}
