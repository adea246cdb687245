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
)

func mustThrottle(t testing.TB, limit int64, interval, maxWait time.Duration, c clock.Clock) *Throttle {
	t.Helper()
	th, err := NewThrottle(limit, interval, maxWait, WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func TestThrottleGivesEvenlySpacedPlacesUpToTheMaxWait(t *testing.T) {
	c := clock.NewManual(0)
	th := mustThrottle(t, 10, time.Second, 350*time.Millisecond, c)
	for i, want := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond} {
		d := th.Allow()
		if !d.Allowed || d.Wait != want {
			t.Fatalf("request %d: %+v, want admitted after %v", i, d, want)
		}
	}
	d := th.Allow()
	if d.Allowed || d.Reason != WaitTooLong || d.RetryAfter != 50*time.Millisecond {
		t.Fatalf("fifth request: %+v, want WaitTooLong, retry after 50ms", d)
	}
	c.Advance(50 * time.Millisecond)
	if d := th.Allow(); !d.Allowed || d.Wait != 350*time.Millisecond {
		t.Fatalf("after 50ms: %+v, want admitted after 350ms", d)
	}
	// After a quiet spell the first request goes at once, with no burst.
	c.Advance(10 * time.Second)
	if d := th.Allow(); d.Wait != 0 {
		t.Fatalf("after a quiet spell: %+v", d)
	}
	if d := th.Allow(); d.Wait != 100*time.Millisecond {
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
			r := th.ReserveNAt(now, n)
			if !r.Allowed {
				t.Fatalf("limit %d: refused with an hour of max wait: %+v", tc.limit, r.Decision)
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
	if err := th.Wait(context.Background()); err != nil { // first place: no wait
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- th.Wait(context.Background()) }()
	for c.Sleepers() == 0 {
		runtime.Gosched()
	}
	c.Advance(100 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v", err)
	}

	// A cancelled wait gives its place back: the next request gets it.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- th.Wait(ctx) }()
	for c.Sleepers() == 0 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait = %v", err)
	}
	if d := th.Allow(); !d.Allowed || d.Wait != 100*time.Millisecond {
		t.Fatalf("after the cancelled wait: %+v, want the cancelled place, 100ms away", d)
	}
}

func TestThrottleCancelOnlyGivesBackTheLastPlace(t *testing.T) {
	c := clock.NewManual(0)
	th := mustThrottle(t, 10, time.Second, time.Second, c)
	th.Allow()
	middle := th.ReserveN(1) // 100 ms
	last := th.ReserveN(1)   // 200 ms
	if middle.Cancel() {
		t.Fatal("a place in the middle of the queue was given back")
	}
	if !last.Cancel() || last.Cancel() {
		t.Fatal("the last place must be given back exactly once")
	}
	if d := th.Allow(); d.Wait != 200*time.Millisecond {
		t.Fatalf("next place %v, want 200ms", d.Wait)
	}
	var refused Reservation
	if refused.Cancel() {
		t.Fatal("cancelling a zero Reservation")
	}
	c.Advance(time.Second)
	past := th.ReserveN(1)
	if past.CancelAt(c.Now() + 1) {
		t.Fatal("a place that has come cannot be given back")
	}
}

func TestThrottleWaitRefusals(t *testing.T) {
	c := clock.NewManual(0)
	th := mustThrottle(t, 1, time.Second, 500*time.Millisecond, c)
	th.Allow()
	var re *BlockError
	err := th.Wait(context.Background())
	if !errors.As(err, &re) || re.Reason != WaitTooLong || re.RetryAfter != 500*time.Millisecond {
		t.Fatalf("Wait = %v, want a RefusedError: wait too long, retry after 500ms", err)
	}
	if err.Error() != "flow: refused: wait too long, retry after 500ms" {
		t.Fatalf("message %q", err.Error())
	}
	if err := th.WaitN(context.Background(), 2); !errors.As(err, &re) || re.Reason != ExceedsLimit || re.Error() != "flow: refused: exceeds limit" {
		t.Fatalf("WaitN(2) of 1 = %v", err)
	}
	c.Advance(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	th2 := mustThrottle(t, 1, 2*time.Hour, 3*time.Hour, c)
	th2.Allow()
	if err := th2.Wait(ctx); !errors.As(err, &re) || re.Reason != WaitTooLong || re.RetryAfter != 0 {
		t.Fatalf("a place beyond the context's deadline: %v", err)
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if err := th2.Wait(done); !errors.Is(err, context.Canceled) {
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
				d := th.AllowNAt(now, 1)
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
	}{{0, time.Second, 0, "limit = 0"}, {1, 0, 0, "interval = 0s"}, {1, time.Second, -1, "max wait = -1ns"}} {
		if _, err := NewThrottle(tc.limit, tc.interval, tc.maxWait); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("NewThrottle(%d, %v, %v) = %v, want mention of %q", tc.limit, tc.interval, tc.maxWait, err, tc.mention)
		}
	}
	th := mustThrottle(t, 5, time.Second, 0, clock.NewManual(0))
	if !th.AllowNAt(0, 0).Allowed || th.AllowNAt(0, 6).Reason != ExceedsLimit {
		t.Fatal("n = 0 must be admitted and n above the limit refused")
	}
	if th.Limit() != 5 || th.Interval() != time.Second || th.MaxWait() != 0 {
		t.Fatal("accessors")
	}
	if n := testing.AllocsPerRun(1000, func() { th.Allow(); th.ReserveNAt(0, 1) }); n != 0 {
		t.Fatalf("deciding allocates %.1f times", n)
	}
}
