package flow

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowsim"
)

// These pin edges found by review: buckets whose tags repeat after a long
// idle spell, extreme times, lent places, and late callers.

const tagPeriod = 1 << 31 // buckets after which a slot's tag repeats

func TestQPSBucketsWhoseTagsRepeatAfterALongIdleChangeNothing(t *testing.T) {
	const w = int64(100 * time.Millisecond)
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 10, Interval: time.Second, Buckets: 10, Clock: c})
	var allowed []flowsim.Arrival
	record := func(d Decision, n int64) {
		if d.Allowed {
			allowed = append(allowed, flowsim.Arrival{At: c.Now() + int64(d.Wait), N: n})
		}
	}
	record(q.AllowN(10), 10) // bucket X, 10 places
	// An idle spell that brings the same tags round, plus a window.
	c.Set((tagPeriod+10)*w + w/2)
	record(q.AllowN(10), 10)
	for i := 0; i < 10; i++ { // the leaving bucket is empty: nothing to lend
		record(q.AllowPriorityN(1, time.Second), 1)
	}
	slices.SortFunc(allowed, func(a, b flowsim.Arrival) int { return int(a.At - b.At) })
	if got := flowsim.MaxInAnyInterval(allowed, time.Second); got > 10 {
		t.Fatalf("%d allowed in one interval after an idle spell of 2^31 buckets", got)
	}

	// A stale bucket with the same tag must not count in a later window.
	q2 := mustQPS(t, QPSSettings{Limit: 10, Interval: time.Second, Buckets: 10, Clock: c})
	c.Set(0)
	q2.AllowN(10)
	c.Set((tagPeriod+1)*w + w/2)
	q2.Allow()
	c.Set((tagPeriod+2)*w + w/2)
	if d := q2.AllowN(5); !d.Allowed {
		t.Fatalf("one request in the window, 5 more blocked: %+v", d)
	}
}

func TestQPSRetryAfterCountsPlacesLentToTheNextBucket(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 10, Interval: 200 * time.Millisecond, Buckets: 2, Clock: c})
	q.AllowN(10)                         // bucket [0, 100ms)
	c.Set(int64(250 * time.Millisecond)) // bucket [200, 300ms): the 10 still count
	for i := 0; i < 10; i++ {
		if !q.AllowPriorityN(1, time.Second).Allowed { // lent from [300, 400ms)
			t.Fatalf("borrow %d blocked", i)
		}
	}
	d := q.Allow()
	if d.Allowed || d.RetryAfter != 350*time.Millisecond { // the lent 10 leave at 600 ms
		t.Fatalf("%+v, want blocked with RetryAfter 350ms", d)
	}
	c.Advance(d.RetryAfter - 1)
	if q.Allow().Allowed {
		t.Fatal("allowed before RetryAfter")
	}
	c.Advance(1)
	if !q.Allow().Allowed {
		t.Fatal("blocked at RetryAfter")
	}
}

func TestQPSAtExtremeTimes(t *testing.T) {
	c := clock.NewManual(1 << 59)
	q := mustQPS(t, QPSSettings{Limit: 10, Interval: time.Second, Clock: c})
	q.AllowN(10)
	d := q.AllowNAt(math.MinInt64, 1) // counted in the open bucket, far ahead
	if d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("a caller far behind a full window: %+v, want blocked with a RetryAfter", d)
	}
	if d := q.AllowPriorityNAt(math.MinInt64, 1, time.Second); d.Allowed {
		t.Fatalf("a caller far behind borrowed: %+v", d)
	}
	if d := q.AllowNAt(math.MaxInt64, 10); !d.Allowed { // clamped to MaxTime, years later
		t.Fatalf("the latest time: %+v", d)
	}
}

func TestQPSWarmingUpBlocksRequestsAboveTheColdLimitWithoutARetryTime(t *testing.T) {
	q := mustQPS(t, QPSSettings{Limit: 30, Interval: time.Second, WarmUp: 10 * time.Second, ColdFactor: 3, Clock: clock.NewManual(0)})
	d := q.AllowN(20) // the cold limit is 10
	if d.Allowed || d.Reason != RateLimited || d.RetryAfter != 0 {
		t.Fatalf("%+v, want blocked with no RetryAfter: only traffic can warm the limiter", d)
	}
}

// TestQPSALateOpenerTouchesNothing runs advance for a bucket that is no
// longer open, as a caller does that stalled after reading the open bucket:
// it must not seal the bucket now in its slot.
func TestQPSALateOpenerTouchesNothing(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 10, Interval: time.Second, Buckets: 2, Clock: c})
	q.Allow()
	stale := q.open.Load() >> 1
	c.Advance(time.Duration(len(q.slots)) * 500 * time.Millisecond) // a whole ring of slots later
	q.Allow()
	now := q.open.Load() >> 1
	if now&q.mask != stale&q.mask {
		t.Fatalf("test setup: buckets %d and %d are in different slots", stale, now)
	}
	q.advance(stale, stale+1)
	if q.slots[now&q.mask].Load()&sealedBit != 0 || q.lent.Load()&sealedBit != 0 {
		t.Fatal("a late opener sealed the open bucket")
	}
	if q.open.Load() != now<<1|1 {
		t.Fatal("a late opener moved the open bucket")
	}
	q.AllowN(9)
	if d := q.AllowPriorityN(1, time.Second); d.Allowed {
		t.Fatalf("borrowing with nothing leaving: %+v", d)
	}
}

func TestThrottleAtExtremeTimesAndIntervals(t *testing.T) {
	th := mustThrottle(t, 10, time.Second, 0, clock.NewManual(0))
	th.AllowNAt(math.MaxInt64-1, "", 1)
	if d := th.AllowNAt(math.MaxInt64-1, "", 1); d.Allowed {
		t.Fatalf("two places at the same time near MaxInt64: %+v", d)
	}
	th2 := mustThrottle(t, 10, time.Second, time.Hour, clock.NewManual(0))
	th2.ReserveNAt(1<<62, "", 1)
	if d := th2.ReserveNAt(math.MinInt64, "", 1); d.Wait < 0 {
		t.Fatalf("negative wait: %+v", d)
	}
	if _, err := NewThrottle(ThrottleSettings{Limit: 1, Interval: time.Duration(math.MaxInt64), MaxWait: time.Hour}); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("an interval of 292 years: %v", err)
	}
	th3 := mustThrottle(t, 1, time.Hour, time.Duration(math.MaxInt64), clock.NewManual(0))
	a, b := th3.ReserveNAt(0, "", 1), th3.ReserveNAt(0, "", 1)
	if !a.Allowed || !b.Allowed || b.Wait != time.Hour {
		t.Fatalf("waiting forever allowed: %+v %+v", a.Decision, b.Decision)
	}
}

func TestThrottleWaitPastItsDeadline(t *testing.T) {
	th := mustThrottle(t, 1, time.Second, time.Hour, clock.NewManual(0))
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if err := th.Wait(ctx, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a passed deadline = %v", err)
	}
}

func TestConcurrencyBlocksANilPermit(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencySettings{Limit: 1})
	if d := c.Acquire(nil, ""); d.Allowed {
		t.Fatal("a nil Permit was allowed")
	}
	if c.InFlight("") != 0 {
		t.Fatal("a blocked nil Permit took a place")
	}
}
