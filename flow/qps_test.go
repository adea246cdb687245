package flow

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowsim"
)

func mustQPS(t testing.TB, s QPSSettings) *QPS {
	t.Helper()
	q, err := NewQPS(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestQPSNeverExceedsLimitInAnyInterval(t *testing.T) {
	shapes := []struct {
		limit    int64
		interval time.Duration
		buckets  int
		start    int64
	}{
		{100, time.Second, flowlimits.DefaultBuckets, 0},
		{100, time.Second, flowlimits.DefaultBuckets, 123456789},
		{1000, time.Second, flowlimits.DefaultBuckets, -7},
		{10, 100 * time.Millisecond, 1, 0},
		{10, 100 * time.Millisecond, 2, 5},
		{7, time.Second, 5, 999999999},
		{50, time.Minute, 60, 0},
		{1, time.Second, 10, 0},
	}
	for _, sh := range shapes {
		for _, p := range flowsim.Patterns() {
			q := mustQPS(t, QPSSettings{Limit: sh.limit, Interval: sh.interval, Buckets: sh.buckets})
			allow := func(now, n int64) bool { return q.AllowNAt(now, n).Allowed }
			r := flowsim.Run(allow, p, sh.limit, sh.interval, 40*sh.interval, sh.start, 1)
			if r.MaxInInterval > sh.limit {
				t.Errorf("limit %d per %v in %d buckets, %s: %d allowed in one interval",
					sh.limit, sh.interval, sh.buckets, p.Name, r.MaxInInterval)
			}
			if r.Allowed == 0 {
				t.Errorf("limit %d per %v, %s: nothing allowed", sh.limit, sh.interval, p.Name)
			}
		}
	}
}

func TestQPSAdmitsNearTheLimitUnderSteadyOverload(t *testing.T) {
	for _, k := range []int{flowlimits.DefaultBuckets, 50, 100} {
		q := mustQPS(t, QPSSettings{Limit: 100, Interval: time.Second, Buckets: k})
		steady := flowsim.Patterns()[0]
		r := flowsim.Run(func(now, n int64) bool { return q.AllowNAt(now, n).Allowed }, steady, 100, time.Second, 100*time.Second, 0, 1)
		want := 100 * float64(k) / float64(k+1)
		if r.PerInterval < want-1 || r.PerInterval < 95 {
			t.Errorf("%d buckets: %.2f allowed per interval under steady overload, want about %.2f and at least 95", k, r.PerInterval, want)
		}
	}
}

func TestQPSRetryAfterIsExactlyWhenARetrySucceeds(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 10, Interval: time.Second, Buckets: 10, Clock: c})
	// 4 in the first bucket, 6 in the fourth: full.
	q.AllowN(4)
	c.Advance(350 * time.Millisecond)
	q.AllowN(6)
	c.Advance(100 * time.Millisecond) // at 450 ms, bucket [400, 500)
	d := q.AllowN(3)
	if d.Allowed || d.Reason != RateLimited {
		t.Fatalf("full window: %+v, want blocked for the rate", d)
	}
	// The 4 of bucket [0, 100) leave the window when bucket [1100, 1200) opens.
	if want := 650 * time.Millisecond; d.RetryAfter != want {
		t.Fatalf("RetryAfter = %v, want %v", d.RetryAfter, want)
	}
	c.Advance(d.RetryAfter - 1)
	if q.AllowN(3).Allowed {
		t.Fatal("allowed 1ns before RetryAfter")
	}
	c.Advance(1)
	if !q.AllowN(3).Allowed {
		t.Fatal("blocked at RetryAfter")
	}
	// Needing more than the oldest bucket frees waits for the next one too.
	c.Set(int64(450 * time.Millisecond))
	q2 := mustQPS(t, QPSSettings{Limit: 10, Interval: time.Second, Buckets: 10, Clock: c})
	c.Set(0)
	q2.AllowN(4)
	c.Set(int64(350 * time.Millisecond))
	q2.AllowN(6)
	c.Set(int64(450 * time.Millisecond))
	// The 4 leave at 1100 ms, the 6 of bucket [300, 400) at 1400 ms.
	if d := q2.AllowN(9); d.Allowed || d.RetryAfter != 950*time.Millisecond {
		t.Fatalf("needing 9: %+v, want RetryAfter 950ms", d)
	}
}

func TestQPSEdgeCases(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 5, Interval: time.Second, Clock: c})
	if d := q.AllowN(0); !d.Allowed {
		t.Fatalf("AllowN(0) = %+v, want allowed", d)
	}
	if d := q.AllowN(-3); !d.Allowed {
		t.Fatalf("AllowN(-3) = %+v, want allowed", d)
	}
	if d := q.AllowN(6); d.Allowed || d.Reason != ExceedsLimit || d.RetryAfter != 0 {
		t.Fatalf("AllowN(6) over a limit of 5 = %+v, want ExceedsLimit", d)
	}
	if !q.AllowN(5).Allowed || q.Allow().Allowed {
		t.Fatal("a limit of 5 must allow 5 at once and then block")
	}
	zero := mustQPS(t, QPSSettings{Limit: 0, Interval: time.Second, Clock: c})
	if d := zero.Allow(); d.Allowed || d.Reason != ExceedsLimit {
		t.Fatalf("limit 0: %+v, want blocked", d)
	}
	if q.limitNow() != 5 {
		t.Fatalf("Limit %d", q.limitNow())
	}
	// A caller with an older time than the open bucket is counted in it.
	c.Set(int64(10 * time.Second))
	q3 := mustQPS(t, QPSSettings{Limit: 2, Interval: time.Second, Clock: c})
	q3.AllowAt(int64(10 * time.Second))
	if !q3.AllowAt(int64(5 * time.Second)).Allowed {
		t.Fatal("a late caller with room in the open bucket was blocked")
	}
	if q3.AllowAt(int64(10 * time.Second)).Allowed {
		t.Fatal("the late caller was not counted in the open bucket")
	}
	if Reason(99).String() != "unknown reason" || RateLimited.String() != "rate limited" {
		t.Fatal("Reason.String")
	}
}

func TestQPSBadConfigurationIsAnErrorNamingTheField(t *testing.T) {
	cases := []struct {
		s       QPSSettings
		mention string
	}{
		{QPSSettings{Limit: -1, Interval: time.Second}, "limit = -1"},
		{QPSSettings{Limit: maxLimit + 1, Interval: time.Second}, "limit = 4294967296"},
		{QPSSettings{Limit: 10}, "interval = 0s"},
		{QPSSettings{Limit: 10, Interval: -time.Second}, "interval = -1s"},
		{QPSSettings{Limit: 10, Interval: time.Second, Buckets: -1}, "buckets = -1"},
		{QPSSettings{Limit: 10, Interval: time.Second, Buckets: 3}, "interval = 1s: does not divide into 3 buckets"},
		{QPSSettings{Limit: 10, Interval: 10 * time.Microsecond}, "interval = 10µs: 25 buckets of 400ns are narrower than 1µs"},
		{QPSSettings{Limit: 10, Interval: time.Second, ColdFactor: 3}, "cold_factor = 3: applies only with a warm-up"},
		{QPSSettings{Limit: 10, Interval: time.Second, WarmUp: -time.Second}, "warm_up = -1s"},
	}
	for _, tc := range cases {
		_, err := NewQPS(tc.s)
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("NewQPS(%+v): err = %v, want config.ErrInvalid mentioning %q", tc.s, err, tc.mention)
		}
	}
}

// TestQPSConcurrentCallersNeverOverAdmit has goroutines race for the same
// bucket at every step of a manual clock: deciding and counting are one
// atomic step, so the requests allowed in each bucket, and of every interval, stay
// within the limit.
func TestQPSConcurrentCallersNeverOverAdmit(t *testing.T) {
	const goroutines, steps, limit = 8, 120, 50
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: limit, Interval: 100 * time.Millisecond, Buckets: 4, Clock: c})
	var perStep [steps]atomic.Int64
	for step := 0; step < steps; step++ {
		var wg sync.WaitGroup
		now := c.Now()
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					if q.AllowNAt(now, 1+int64(i%3)).Allowed {
						perStep[step].Add(1 + int64(i%3))
					}
				}
			}()
		}
		wg.Wait()
		c.Advance(25 * time.Millisecond) // one bucket
	}
	var arr []flowsim.Arrival
	var total int64
	for step := range perStep {
		n := perStep[step].Load()
		total += n
		arr = append(arr, flowsim.Arrival{At: int64(step) * int64(25*time.Millisecond), N: n})
	}
	if got := flowsim.MaxInAnyInterval(arr, 100*time.Millisecond); got > limit {
		t.Fatalf("%d allowed in one interval, limit %d", got, limit)
	}
	if total < steps/5*limit*4/5 {
		t.Fatalf("only %d allowed over %d intervals", total, steps/4)
	}
}

// TestQPSOnAFreeRunningClock races callers against a goroutine that moves the
// clock, for the race detector, and checks the total against the limit: over
// a span S, at most limit × (S/interval + 1) can be allowed.
func TestQPSOnAFreeRunningClock(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 100, Interval: 10 * time.Millisecond, Buckets: 5, Clock: c})
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5000; i++ {
				if q.Allow().Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for i := 0; ; i++ {
		select {
		case <-done:
			span := c.Now()
			if got, most := allowed.Load(), 100*(span/int64(10*time.Millisecond)+1); got > most {
				t.Fatalf("%d allowed over %v, at most %d possible", got, time.Duration(span), most)
			}
			return
		default:
		}
		c.Advance(100 * time.Microsecond)
		if i%50 == 0 {
			c.Advance(20 * time.Millisecond) // a jump over whole intervals
		}
		runtime.Gosched()
	}
}

func TestQPSDecisionsDoNotAllocate(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 1000, Interval: time.Second, Clock: c})
	if n := testing.AllocsPerRun(1000, func() {
		c.Advance(time.Millisecond)
		q.Allow()
		q.AllowN(3)
	}); n != 0 {
		t.Fatalf("Allow allocates %.1f times per call", n)
	}
}
