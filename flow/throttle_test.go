package flow

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
)

func mustThrottle(t testing.TB, limit int64, interval, maxWait time.Duration, c clock.Clock) *Throttle {
	t.Helper()
	th, err := NewThrottle(ThrottleSettings{Limit: limit, Interval: interval, MaxWait: maxWait, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func TestThrottleGivesEvenlySpacedPlacesUpToTheMaxWait(t *testing.T) {
	c := clock.NewManual(0)
	th := mustThrottle(t, 10, time.Second, 350*time.Millisecond, c)
	for i, want := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond} {
		d := th.ReserveN("", 1).Decision
		if !d.Allowed || d.Wait != want {
			t.Fatalf("request %d: %+v, want allowed after %v", i, d, want)
		}
	}
	d := th.ReserveN("", 1).Decision
	if d.Allowed || d.Reason != WaitTooLong || d.RetryAfter != 50*time.Millisecond {
		t.Fatalf("fifth request: %+v, want WaitTooLong, retry after 50ms", d)
	}
	c.Advance(50 * time.Millisecond)
	if d := th.ReserveN("", 1).Decision; !d.Allowed || d.Wait != 350*time.Millisecond {
		t.Fatalf("after 50ms: %+v, want allowed after 350ms", d)
	}
	// After a quiet spell the first request goes at once, with no burst.
	c.Advance(10 * time.Second)
	if d := th.ReserveN("", 1).Decision; d.Wait != 0 {
		t.Fatalf("after a quiet spell: %+v", d)
	}
	if d := th.ReserveN("", 1).Decision; d.Wait != 100*time.Millisecond {
		t.Fatalf("the second after a quiet spell: %+v", d)
	}
}

// TestThrottlePlacesAreNeverCloserThanThePace offers random arrivals, single
// and batched, and checks every pair of neighbouring places.
func TestThrottlePlacesAreNeverCloserThanThePace(t *testing.T) {
	for _, tc := range []struct {
		limit    int64
		interval time.Duration
	}{{10, time.Second}, {3, time.Second}, {300000, time.Second}, {1000000, time.Second}, {7, 10 * time.Microsecond}} {
		th := mustThrottle(t, tc.limit, tc.interval, time.Hour, clock.NewManual(0))
		rng := rand.New(rand.NewPCG(uint64(tc.limit), 9))
		type place struct{ at, n int64 }
		var places []place
		now := int64(0)
		pace := int64(tc.interval) / tc.limit // exact pace, rounded down
		for i := 0; i < 3000; i++ {
			now += rng.Int64N(3 * pace / 2)
			n := 1 + rng.Int64N(min(tc.limit, 3))
			r := th.ReserveNAt(now, "", n)
			if !r.Allowed {
				t.Fatalf("limit %d: blocked with an hour of max wait: %+v", tc.limit, r.Decision)
			}
			places = append(places, place{now + int64(r.Wait), n})
		}
		for i := 1; i < len(places); i++ {
			gap := places[i].at - places[i-1].at
			// n places take n × interval / limit, rounded up.
			min := (places[i-1].n*int64(tc.interval) + tc.limit - 1) / tc.limit
			if gap < min {
				t.Fatalf("limit %d per %v: places %d ns apart after %d requests, want at least %d", tc.limit, tc.interval, gap, places[i-1].n, min)
			}
		}
		// The pace is no slower than one nanosecond per request.
		var total int64
		for _, p := range places[:len(places)-1] {
			total += p.n
		}
		span := places[len(places)-1].at - places[0].at
		if exact := total * int64(tc.interval) / tc.limit; span > exact+total+int64(len(places)) {
			t.Fatalf("limit %d: %d requests took %d ns of places, exact pace %d", tc.limit, total, span, exact)
		}
	}
}

func TestThrottleWaitSleepsOnItsClockAndCancelGivesThePlaceBack(t *testing.T) {
	c := clock.NewManual(0)
	th := mustThrottle(t, 10, time.Second, time.Second, c)
	if err := th.Wait(context.Background(), ""); err != nil { // first place: no wait
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- th.Wait(context.Background(), "") }()
	for c.Sleepers() == 0 {
		runtime.Gosched()
	}
	c.Advance(100 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v", err)
	}

	// A cancelled wait gives its place back: the next request gets it.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- th.Wait(ctx, "") }()
	for c.Sleepers() == 0 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait = %v", err)
	}
	if d := th.ReserveN("", 1).Decision; !d.Allowed || d.Wait != 100*time.Millisecond {
		t.Fatalf("after the cancelled wait: %+v, want the cancelled place, 100ms away", d)
	}
}

func TestThrottleCancelOnlyGivesBackTheLastPlace(t *testing.T) {
	c := clock.NewManual(0)
	th := mustThrottle(t, 10, time.Second, time.Second, c)
	th.ReserveN("", 1)
	middle := th.ReserveN("", 1) // 100 ms
	last := th.ReserveN("", 1)   // 200 ms
	if middle.Cancel() {
		t.Fatal("a place in the middle of the queue was given back")
	}
	if !last.Cancel() || last.Cancel() {
		t.Fatal("the last place must be given back exactly once")
	}
	if d := th.ReserveN("", 1).Decision; d.Wait != 200*time.Millisecond {
		t.Fatalf("next place %v, want 200ms", d.Wait)
	}
	var blocked Reservation
	if blocked.Cancel() {
		t.Fatal("cancelling a zero Reservation")
	}
	c.Advance(time.Second)
	past := th.ReserveN("", 1)
	if past.CancelAt(c.Now() + 1) {
		t.Fatal("a place that has come cannot be given back")
	}
}

func TestThrottleWaitBlocks(t *testing.T) {
	c := clock.NewManual(0)
	th := mustThrottle(t, 1, time.Second, 500*time.Millisecond, c)
	th.Allow("")
	var re *BlockError
	err := th.Wait(context.Background(), "")
	if !errors.As(err, &re) || re.Reason != WaitTooLong || re.RetryAfter != 500*time.Millisecond {
		t.Fatalf("Wait = %v, want a BlockError: wait too long, retry after 500ms", err)
	}
	if err.Error() != "flow: blocked: wait too long, retry after 500ms" {
		t.Fatalf("message %q", err.Error())
	}
	if !errors.Is(err, ErrBlocked) {
		t.Fatalf("errors.Is(%v, ErrBlocked) = false", err)
	}
	if err := th.WaitN(context.Background(), "", 2); !errors.As(err, &re) || re.Reason != ExceedsLimit || re.Error() != "flow: blocked: exceeds limit" {
		t.Fatalf("WaitN(2) of 1 = %v", err)
	}
	c.Advance(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	th2 := mustThrottle(t, 1, 2*time.Hour, 3*time.Hour, c)
	th2.Allow("")
	if err := th2.Wait(ctx, ""); !errors.As(err, &re) || re.Reason != WaitTooLong || re.RetryAfter != 0 {
		t.Fatalf("a place beyond the context's deadline: %v", err)
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if err := th2.Wait(done, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a done context = %v", err)
	}
}

func TestThrottleConcurrentReservationsGetDistinctSpacedPlaces(t *testing.T) {
	c := clock.NewManual(0)
	th := mustThrottle(t, 1000, time.Second, time.Hour, c)
	var mu sync.Mutex
	var places []int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				now := c.Now()
				d := th.ReserveNAt(now, "", 1)
				mu.Lock()
				places = append(places, now+int64(d.Wait))
				mu.Unlock()
				if i%50 == 0 {
					c.Advance(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(places)
	for i := 1; i < len(places); i++ {
		if places[i]-places[i-1] < int64(time.Millisecond) {
			t.Fatalf("places %d and %d are %d ns apart, pace 1ms", i-1, i, places[i]-places[i-1])
		}
	}
}

func TestThrottleConfigAndEdges(t *testing.T) {
	for _, tc := range []struct {
		limit             int64
		interval, maxWait time.Duration
		mention           string
	}{{0, time.Second, 0, "limit = 0"}, {1, 0, 0, "interval = 0s"}, {1, time.Second, -1, "max_wait = -1ns"}} {
		if _, err := NewThrottle(ThrottleSettings{Limit: tc.limit, Interval: tc.interval, MaxWait: tc.maxWait}); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("NewThrottle(%d, %v, %v) = %v, want mention of %q", tc.limit, tc.interval, tc.maxWait, err, tc.mention)
		}
	}
	th := mustThrottle(t, 5, time.Second, 0, clock.NewManual(0))
	if !th.AllowNAt(0, "", 0).Allowed || th.AllowNAt(0, "", 6).Reason != ExceedsLimit {
		t.Fatal("n = 0 must be allowed and n above the limit blocked")
	}
	if th.limitNow() != 5 || th.per != uint64(time.Second) || th.maxWait != 0 {
		t.Fatal("accessors")
	}
	if n := testing.AllocsPerRun(1000, func() { th.Allow(""); th.ReserveNAt(0, "", 1) }); n != 0 {
		t.Fatalf("deciding allocates %.1f times", n)
	}
}

// TestThrottleAllowNeverAsksToWait: Allow lets a request through only when
// its place is now, as QPS.Allow does; a place in the future is blocked, and
// RetryAfter says when it comes. A caller that reads only Allowed cannot
// break the pace.
func TestThrottleAllowNeverAsksToWait(t *testing.T) {
	c := clock.NewManual(0)
	th := mustThrottle(t, 10, time.Second, time.Second, c)
	if d := th.Allow(""); !d.Allowed || d.Wait != 0 {
		t.Fatalf("first request: %+v, want allowed at once", d)
	}
	if d := th.Allow(""); d.Allowed || d.Reason != RateLimited || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("second request at once: %+v, want blocked, rate limited, retry after 100ms", d)
	}
	c.Advance(99 * time.Millisecond)
	if d := th.AllowNAt(c.Now(), "", 1); d.Allowed || d.RetryAfter != time.Millisecond {
		t.Fatalf("at 99ms: %+v, want blocked, retry after 1ms", d)
	}
	c.Advance(time.Millisecond)
	if d := th.Allow(""); !d.Allowed || d.Wait != 0 {
		t.Fatalf("at 100ms: %+v, want allowed at once", d)
	}
	// A blocked Allow takes no place: the next reservation is the next place.
	if r := th.ReserveN("", 1); !r.Allowed || r.Wait != 100*time.Millisecond {
		t.Fatalf("a reservation after a blocked Allow: %+v, want 100ms away", r.Decision)
	}
}

// TestThrottleAllowVariantsAgree: AllowN, AllowAt and AllowNAt decide as
// Allow does, at the clock's time or the one given, for n places.
func TestThrottleAllowVariantsAgree(t *testing.T) {
	c := clock.NewManual(int64(time.Hour))
	th := mustThrottle(t, 10, time.Second, time.Second, c)
	if d := th.AllowN("", 3); !d.Allowed || d.Wait != 0 {
		t.Fatalf("AllowN(3): %+v", d)
	}
	// 3 places take 300ms.
	if d := th.AllowN("", 1); d.Allowed || d.RetryAfter != 300*time.Millisecond {
		t.Fatalf("AllowN(1) after 3: %+v, want retry after 300ms", d)
	}
	at := c.Now() + int64(300*time.Millisecond)
	if d := th.AllowAt(at-1, ""); d.Allowed || d.RetryAfter != 1 {
		t.Fatalf("AllowAt 1ns early: %+v", d)
	}
	if d := th.AllowAt(at, ""); !d.Allowed {
		t.Fatalf("AllowAt the next place: %+v", d)
	}
	if d := th.AllowNAt(at+int64(100*time.Millisecond), "", 11); d.Allowed || d.Reason != ExceedsLimit || d.RetryAfter != 0 {
		t.Fatalf("AllowNAt 11 of 10: %+v, want ExceedsLimit", d)
	}
	if d := th.AllowNAt(at, "", 0); !d.Allowed {
		t.Fatalf("AllowNAt 0: %+v, want allowed", d)
	}
	if n := testing.AllocsPerRun(1000, func() { th.AllowN("", 1); th.AllowAt(at, "") }); n != 0 {
		t.Fatalf("AllowN and AllowAt allocate %.1f times", n)
	}
}

// TestThrottleWaitAtTakesThePlaceOfTheTimeGiven: WaitAt and WaitNAt reserve
// at the time given, not the clock's, and wait on the clock for what is left.
func TestThrottleWaitAtTakesThePlaceOfTheTimeGiven(t *testing.T) {
	c := clock.NewManual(0)
	th := mustThrottle(t, 10, time.Second, time.Second, c)
	ctx := context.Background()
	th.ReserveNAt(0, "", 1) // the place at 0; the next is at 100ms
	// Arriving at 100ms, the place is now: no wait, though the clock says 0.
	if err := th.WaitAt(ctx, int64(100*time.Millisecond), ""); err != nil {
		t.Fatalf("WaitAt(100ms) = %v", err)
	}
	if c.Sleepers() != 0 {
		t.Fatal("WaitAt slept for a place that had come")
	}
	// Three places arriving at 100ms come at 200ms: wait 100ms on the clock.
	done := make(chan error, 1)
	go func() { done <- th.WaitNAt(ctx, int64(100*time.Millisecond), "", 3) }()
	for c.Sleepers() == 0 {
		runtime.Gosched()
	}
	c.Advance(99 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("WaitNAt returned %v before its place", err)
	default:
	}
	c.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("WaitNAt = %v", err)
	}
	var be *BlockError
	if err := th.WaitNAt(ctx, 0, "", 11); !errors.As(err, &be) || be.Reason != ExceedsLimit {
		t.Fatalf("WaitNAt 11 of 10 = %v, want a BlockError, exceeds limit", err)
	}
	// The next place is at 500ms: arriving at 0 it is 500ms away, within the
	// maximum wait; arriving at -1s it is 1.5s away, beyond it.
	if err := th.WaitAt(ctx, -int64(time.Second), ""); !errors.As(err, &be) || be.Reason != WaitTooLong || be.RetryAfter != 500*time.Millisecond {
		t.Fatalf("WaitAt(-1s) = %v, want a BlockError, wait too long, retry after 500ms", err)
	}
}
