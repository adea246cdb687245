package flow

import (
	"context"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// A Throttle paces requests evenly. With a limit of N per interval, the
// places it gives are interval/N apart, rounded up to the nanosecond. After
// a quiet spell the first request goes at once; there is no burst.
//
// There are three ways to ask:
//
//   - [Throttle.Allow] lets a request through only if its place is now.
//     Otherwise it is blocked with [RateLimited], and RetryAfter says when
//     the place comes.
//   - [Throttle.ReserveN] gives a place up to the maximum wait away, in a
//     [Reservation]. The caller waits for it, or gives it back with
//     [Reservation.Cancel].
//   - [Throttle.Wait] reserves a place and waits for it on the throttle's
//     clock, so that a clock.Manual drives it in tests.
//
// With a warm-up ([ThrottleSettings.WarmUp]) the pace starts at Limit
// divided by ColdFactor. It quickens on the same curve as a [QPS]
// limiter's, never faster than the limit. Every place given warms the
// throttle; the time no place covers cools it.
//
// A throttle per key ([ThrottleSettings.PerKey]) paces each key so: a key
// is a user, a tenant or a client address. A key's pace holds whatever the
// other keys do, however many there are. Keys in the overrides have limits
// of their own. Its memory is fixed when it is made: a sketch sized for
// the keys paced at once ([ThrottleSettings.Keys]), and about 140 bytes
// per override. More keys than that are still paced, but wait for each
// other more often. At the sizing, a key not seen for a pace waits with
// probability 0.8%; at twice it, 2%. A throttle not per key ignores the
// key it is given; "" says so.
//
// A Throttle is safe for concurrent use, and deciding allocates nothing.
// Deciding is one compare-and-swap on the next free place; per key, it
// takes the mutex of the key's block of the sketch, no other. A key is
// hashed whole: its length is the caller's to bound. The zero Throttle is
// not usable; make one with [NewThrottle].
type Throttle struct {
	limit   atomic.Int64
	per     uint64 // the interval, in nanoseconds
	maxWait int64
	one     atomic.Int64 // cost(1), precomputed
	warm    *QPS         // with warm-up, the meter whose coldness sets the pace; nil otherwise
	curve   *warmUp      // with warm-up, warm.warm
	clock   clock.Clock
	next    atomic.Int64 // the earliest time the next place may be given
	keys    *keyThrottle // per key: the keys' places; nil otherwise
}

// ThrottleSettings configure a [Throttle]. Limit, Interval and MaxWait say
// what the pace is; every other zero field takes its default.
type ThrottleSettings struct {
	// Limit is how many requests are given places per interval, one every
	// Interval/Limit, in [1, 2^32-1].
	Limit int64
	// Interval is positive, at most 36 years.
	Interval time.Duration
	// MaxWait is how far away a reserved place may be. 0 refuses every
	// request that would have to wait; a wait beyond 36 years counts as
	// that long.
	MaxWait time.Duration
	// WarmUp, if positive, makes the pace start slow and quicken over that
	// period (see [Throttle]). It must span two intervals and ten buckets.
	WarmUp time.Duration
	// ColdFactor divides the pace while the throttle is cold (default 3,
	// with WarmUp only). It must be above 1 and at most Limit.
	ColdFactor float64
	// Buckets is how often, per interval, a warming pace changes (default
	// 25, with WarmUp only).
	Buckets int
	// PerKey paces each key by itself, at Limit per Interval; there is no
	// warm-up then. The fields below apply only to it.
	PerKey bool
	// Overrides are keys with limits of their own, in [0, 2^32-1]. 0
	// refuses the key.
	Overrides map[string]int64
	// Keys is how many keys the throttle expects to pace at once: those
	// given a place within one pace of now (default 4096, at most 262144).
	// The sketch takes 512 bytes per key, rounded up to a power of two.
	Keys int
	// KeyMemory is the budget the sketch draws from, at most a sixteenth
	// of it, halved down to 4 KiB if short (default: a budget of its own).
	KeyMemory *KeyMemory
	// Clock is the clock the throttle reads and waits on (default
	// clock.System).
	Clock clock.Clock
}

// NewThrottle returns a Throttle of the given settings. A bad setting is a
// configuration error naming it.
func NewThrottle(s ThrottleSettings) (*Throttle, error) {
	if err := checkPace(s.Limit, s.Interval, s.MaxWait); err != nil {
		return nil, err
	}
	if s.Buckets != 0 && s.WarmUp == 0 {
		return nil, &configError{Pkg: "flow", Field: "buckets", Value: s.Buckets, Detail: "a throttle has buckets only to warm up"}
	}
	if err := checkPerKey(s); err != nil {
		return nil, err
	}
	// Times are clamped to ±MaxTime and waits and costs to MaxTime, so no
	// place computed below overflows.
	maxWait := min(s.MaxWait, timegrid.MaxTime)
	t := &Throttle{per: uint64(s.Interval), maxWait: int64(maxWait), clock: clockOr(s.Clock)}
	if s.PerKey {
		keys, err := newKeyThrottle(s, t.clock)
		if err != nil {
			return nil, err
		}
		t.keys = keys
	}
	t.limit.Store(s.Limit)
	t.one.Store(t.cost(1, s.Limit))
	if s.WarmUp != 0 || s.ColdFactor != 0 {
		meter, err := newQPS(QPSSettings{Limit: s.Limit, Interval: s.Interval, Buckets: s.Buckets,
			WarmUp: s.WarmUp, ColdFactor: s.ColdFactor, Clock: t.clock}, true)
		if err != nil {
			return nil, err
		}
		t.warm, t.curve = meter, meter.warm
	}
	t.next.Store(-1 << 62) // long before any time: the first request goes at once
	return t, nil
}

// checkPerKey refuses the settings of a throttle per key given to one
// that is not, and a warm-up to one that is.
func checkPerKey(s ThrottleSettings) error {
	switch {
	case s.PerKey && s.WarmUp != 0:
		return &configError{Pkg: "flow", Field: "warm_up", Value: s.WarmUp, Detail: "a throttle per key does not warm up"}
	case s.PerKey:
	case s.Overrides != nil:
		return &configError{Pkg: "flow", Field: "overrides", Value: len(s.Overrides), Detail: "apply only to a throttle per key"}
	case s.Keys != 0:
		return &configError{Pkg: "flow", Field: "keys", Value: s.Keys, Detail: "applies only to a throttle per key"}
	case s.KeyMemory != nil:
		return &configError{Pkg: "flow", Field: "key_memory", Value: s.KeyMemory.limit, Detail: "applies only to a throttle per key"}
	}
	return nil
}

// cost returns the time n places take at the given limit:
// ceil(n × interval / limit). n must not exceed the configured limit.
func (t *Throttle) cost(n, limit int64) int64 {
	hi, lo := bits.Mul64(uint64(n), t.per)
	if hi >= uint64(limit) {
		// The quotient exceeds 64 bits (not for n <= limit, which callers
		// ensure): many intervals, saturating at an unreachable wait.
		if c := (n + limit - 1) / limit; c <= timegrid.MaxTime/int64(t.per) {
			return int64(t.per) * c
		}
		return timegrid.MaxTime
	}
	q, r := bits.Div64(hi, lo, uint64(limit))
	if r != 0 {
		q++
	}
	return min(int64(q), timegrid.MaxTime)
}

// warmCost returns the time n places take at time now while warming up: the
// curve's pace at the meter's coldness, and never less than at the limit,
// rounded up as cost does.
func (t *Throttle) warmCost(n, now int64) int64 {
	if n == 1 {
		return t.warm.placeTimeAt(now) // computed once per bucket
	}
	return t.curve.placeTime(n, t.warm.coldAt(now), t.cost(n, t.limit.Load()))
}

// A Reservation is a place given by a [Throttle].
// Its Decision says whether it was given and how long to wait for it. The
// zero Reservation holds no place, and cancelling it does nothing.
type Reservation struct {
	Decision
	clock clock.Clock // the throttle's, for Cancel; nil once there is nothing to give back
	// next is the exact next free place it was taken from: a Throttle's,
	// or a key's with an override. It is nil for a place in a
	// throttle's sketch per key, which kt, h and writes then find.
	next      *atomic.Int64
	kt        *keyThrottle
	h, writes uint64 // the key's hash; the writes of its block with this place
	start     int64  // the place
	// old is, for an exact place, the next free place before and after it;
	// for a place in the sketch, the key's counters before it.
	old [keyProbes]int64
}

// Cancel gives the place back if it can and it has not yet come, and
// reports whether it did. It can while the place is the last one given:
// by its throttle, or to its key. Per key, a place in the sketch is the
// last only if no other key of its block was given one since. A place in
// the middle of the queue stays empty, so the next request keeps the pace
// after its neighbour. Cancelling twice, or cancelling a blocked
// reservation, does nothing.
//
// Cancel through one Reservation value only: a copy does not know that the
// other was cancelled. Once a later request has taken the place back,
// cancelling the copy would give that request's place away.
func (r *Reservation) Cancel() bool {
	if r.clock == nil {
		return false
	}
	return r.CancelAt(r.clock.Now())
}

// CancelAt is [Reservation.Cancel] at time now.
func (r *Reservation) CancelAt(now int64) bool {
	if r.clock == nil || !r.Allowed || r.start <= now {
		return false
	}
	var back bool
	if r.next != nil {
		back = r.next.CompareAndSwap(r.old[1], r.old[0])
	} else {
		back = r.kt.giveBack(r)
	}
	if back {
		r.clock = nil
	}
	return back
}

// reserveExact takes the place of cost for requests arriving at now from
// next, an exact next free place, if it is at most maxWait away. It
// returns the decision, the next free place before and after, and the
// place. It reports false, having taken nothing, if next is sealedPace (a
// keyed throttle's override gone).
func reserveExact(next *atomic.Int64, now, cost, maxWait int64) (d Decision, prev, start, end int64, ok bool) {
	for {
		prev = next.Load()
		if prev == sealedPace {
			return Decision{}, 0, 0, 0, false
		}
		start = max(prev, now)
		if wait := start - now; wait > maxWait {
			return Decision{Reason: WaitTooLong, RetryAfter: time.Duration(wait - maxWait)}, 0, 0, 0, true
		}
		if next.CompareAndSwap(prev, start+cost) {
			return Decision{Allowed: true, Wait: time.Duration(start - now)}, prev, start, start + cost, true
		}
	}
}

// ReserveN reserves places for n requests of key now. See
// [Throttle.ReserveNAt].
func (t *Throttle) ReserveN(key string, n int64) Reservation {
	return t.ReserveNAt(t.clock.Now(), key, n)
}

// ReserveNAt reserves places for n requests of key arriving at time now:
// all n, next to each other, or none. The Decision says how long to wait
// for the first place, at most MaxWait. A place further away is blocked
// with [WaitTooLong]. n <= 0 is allowed at once and takes nothing. n above
// the limit (the key's) is blocked with [ExceedsLimit].
func (t *Throttle) ReserveNAt(now int64, key string, n int64) Reservation {
	return t.reservation(now, key, n, t.maxWait)
}

// reservation is ReserveNAt with a maximum wait of maxWait.
func (t *Throttle) reservation(now int64, key string, n, maxWait int64) Reservation {
	if t.keys != nil {
		return t.keys.reserve(now, key, n, maxWait)
	}
	d, prev, start, end := t.reserve(now, n, maxWait)
	if !d.Allowed || n <= 0 {
		return Reservation{Decision: d}
	}
	return Reservation{Decision: d, clock: t.clock, next: &t.next, start: start, old: [keyProbes]int64{prev, end}}
}

// reserve takes places for n requests arriving at now if the first is at most
// maxWait away, and returns the decision, the next free place before and
// after, and the first place. A first place further away is blocked with
// WaitTooLong, RetryAfter being how much further.
func (t *Throttle) reserve(now, n, maxWait int64) (d Decision, prev, start, end int64) {
	if n <= 0 {
		return allowed, 0, 0, 0
	}
	limit := t.limit.Load()
	if n > limit {
		return Decision{Reason: ExceedsLimit}, 0, 0, 0
	}
	now = timegrid.Clamp(now)
	var cost int64
	switch {
	case t.warm != nil:
		cost = t.warmCost(n, now)
	case n == 1:
		cost = t.one.Load()
	default:
		cost = t.cost(n, limit)
	}
	d, prev, start, end, _ = reserveExact(&t.next, now, cost, maxWait)
	if d.Allowed && t.warm != nil {
		t.warm.countAt(now, n)
	}
	return d, prev, start, end
}

// Allow decides whether one request of key may proceed now. See
// [Throttle.AllowNAt].
func (t *Throttle) Allow(key string) Decision { return t.AllowNAt(t.clock.Now(), key, 1) }

// AllowN decides whether n requests of key may proceed now. See
// [Throttle.AllowNAt].
func (t *Throttle) AllowN(key string, n int64) Decision { return t.AllowNAt(t.clock.Now(), key, n) }

// AllowAt decides whether one request of key arriving at time now may
// proceed. See [Throttle.AllowNAt].
func (t *Throttle) AllowAt(now int64, key string) Decision { return t.AllowNAt(now, key, 1) }

// AllowNAt decides whether n requests of key arriving at time now may
// proceed at once. If so it takes their places: all n, next to each
// other, or none. They are allowed only if the next free place is now, so
// Wait is 0. Otherwise they are blocked with [RateLimited], and RetryAfter
// says when the place comes. n <= 0 is allowed and takes nothing. n above
// the limit (the key's) is blocked with [ExceedsLimit].
func (t *Throttle) AllowNAt(now int64, key string, n int64) Decision {
	if t.keys != nil {
		return atOnce(t.keys.reserve(now, key, n, 0).Decision)
	}
	d, _, _, _ := t.reserve(now, n, 0)
	return atOnce(d)
}

// atOnce is the decision of a reservation that may not wait: a place
// still to come is a rate limit.
func atOnce(d Decision) Decision {
	if d.Reason == WaitTooLong {
		d.Reason = RateLimited
	}
	return d
}

// Wait waits for a place for one request of key now. See
// [Throttle.WaitNAt].
func (t *Throttle) Wait(ctx context.Context, key string) error {
	return t.WaitNAt(ctx, t.clock.Now(), key, 1)
}

// WaitN waits for places for n requests of key now. See [Throttle.WaitNAt].
func (t *Throttle) WaitN(ctx context.Context, key string, n int64) error {
	return t.WaitNAt(ctx, t.clock.Now(), key, n)
}

// WaitAt waits for a place for one request of key arriving at time now.
// See [Throttle.WaitNAt].
func (t *Throttle) WaitAt(ctx context.Context, now int64, key string) error {
	return t.WaitNAt(ctx, now, key, 1)
}

// WaitNAt reserves places for n requests of key arriving at time now, as
// [Throttle.ReserveNAt] does, and waits for the first. The wait starts at
// the call, on the throttle's clock. It returns nil when the requests may
// proceed. It returns a [*BlockError] when they are blocked: the place is
// beyond the maximum wait or ctx's deadline, or n exceeds the limit. It
// returns ctx.Err() if ctx is done first, and gives the place back as
// [Reservation.Cancel] would.
func (t *Throttle) WaitNAt(ctx context.Context, now int64, key string, n int64) error {
	maxWait, err := waitBudget(ctx, t.maxWait)
	if err != nil {
		return err
	}
	return waitFor(ctx, t.clock, t.reservation(now, key, n, maxWait), maxWait < t.maxWait)
}

// waitFor waits on c for the place of r, reserved with a maximum wait
// that ctx's deadline cut if cut, and cancels r if ctx is done first.
func waitFor(ctx context.Context, c clock.Clock, r Reservation, cut bool) error {
	if !r.Allowed || r.Wait <= 0 {
		return waitRefused(r.Decision, cut)
	}
	if err := clock.Sleep(ctx, c, r.Wait); err != nil {
		r.Cancel()
		return err
	}
	return nil
}

// checkPace checks a throttle's limit, interval and maximum wait.
func checkPace(limit int64, interval, maxWait time.Duration) error {
	if limit < 1 || limit > maxLimit {
		return badLimit(limit, 1)
	}
	if interval <= 0 || interval > timegrid.MaxTime {
		return &configError{Pkg: "flow", Field: "interval", Value: interval, Detail: fmt.Sprintf("must be positive and at most %v", time.Duration(timegrid.MaxTime))}
	}
	if maxWait < 0 {
		return &configError{Pkg: "flow", Field: "max_wait", Value: maxWait, Detail: "must not be negative"}
	}
	return nil
}

// waitBudget returns how long a waiter with ctx may wait for its place:
// maxWait, or less if ctx's deadline comes sooner; or ctx's error if it is
// done, or its deadline has passed.
func waitBudget(ctx context.Context, maxWait int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return 0, context.DeadlineExceeded
		}
		maxWait = min(maxWait, int64(left))
	}
	return maxWait, nil
}

// waitRefused is what a Wait returns for a decision that needs no waiting:
// nil if it allows, or its *BlockError; cut says the deadline shortened
// the wait, which then, not the throttle, is what blocks, and retrying
// will not help that context.
func waitRefused(d Decision, cut bool) error {
	switch {
	case d.Allowed:
		return nil
	case d.Reason == WaitTooLong && cut:
		return &BlockError{Reason: WaitTooLong}
	}
	return &BlockError{Reason: d.Reason, RetryAfter: d.RetryAfter}
}

// limitNow returns the number of requests allowed per interval (a key's
// without an override).
func (t *Throttle) limitNow() int64 {
	if t.keys != nil {
		return t.keys.limitNow()
	}
	return t.limit.Load()
}

// Set changes the limit, and per key the overrides, keeping the next free
// place (every key's). The next place comes no sooner than the last one
// given ends, whether the key gains, keeps or loses an override; the
// places after it take the new pace. A throttle with a warm-up keeps its
// limit. That, a limit outside [1, 2^32-1], a bad override and overrides
// for a throttle not per key are a configuration error, and the limits in force
// stay. Per key, Set takes time in proportion to the overrides, old and
// new; requests go on meanwhile.
func (t *Throttle) Set(limit int64, overrides map[string]int64) error {
	if t.keys != nil {
		return t.keys.set(limit, overrides)
	}
	if overrides != nil {
		return &configError{Pkg: "flow", Field: "overrides", Value: len(overrides), Detail: "apply only to a throttle per key"}
	}
	if t.warm != nil {
		return &configError{Pkg: "flow", Field: "limit", Value: limit, Detail: "a throttle with warm-up keeps its limit: make a new one"}
	}
	if err := checkPace(limit, time.Duration(t.per), 0); err != nil {
		return err
	}
	t.one.Store(t.cost(1, limit))
	t.limit.Store(limit)
	return nil
}
