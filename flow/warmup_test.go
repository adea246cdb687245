package flow

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
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

// perSecond offers requests every step from start for seconds seconds, and
// returns how many each second allowed and the times they were allowed at.
func perSecond(q *QPS, start int64, seconds int, step time.Duration) ([]int64, []flowsim.Arrival) {
	counts := make([]int64, seconds)
	var allowed []flowsim.Arrival
	for t := int64(0); t < int64(seconds)*int64(time.Second); t += int64(step) {
		if q.AllowAt(start + t).Allowed {
			counts[t/int64(time.Second)]++
			allowed = append(allowed, flowsim.Arrival{At: start + t, N: 1})
		}
	}
	return counts, allowed
}

func TestQPSWarmUpRampsFromAThirdToTheLimitInThePeriod(t *testing.T) {
	q := mustQPS(t, QPSSettings{Limit: 100, Interval: time.Second, WarmUp: 10 * time.Second, ColdFactor: 3})
	counts, allowed := perSecond(q, 0, 20, 2*time.Millisecond) // 500/s offered
	if counts[0] < 30 || counts[0] > 40 {
		t.Fatalf("first second from cold allowed %d, want about 100/3", counts[0])
	}
	for i := 1; i < 10; i++ {
		if counts[i] < counts[i-1]-2 {
			t.Fatalf("warming went backwards: %v", counts)
		}
	}
	warmAt := -1
	for i, n := range counts {
		if n >= 95 {
			warmAt = i
			break
		}
	}
	if warmAt < 7 || warmAt > 12 {
		t.Fatalf("reached 95%% of the limit in second %d, want about 10 (the period): %v", warmAt, counts)
	}
	if got := flowsim.MaxInAnyInterval(allowed, time.Second); got > 100 {
		t.Fatalf("%d allowed in one second while warming up", got)
	}
}

func TestQPSWarmUpCoolsWhenTrafficStops(t *testing.T) {
	q := mustQPS(t, QPSSettings{Limit: 100, Interval: time.Second, WarmUp: 5 * time.Second, ColdFactor: 3})
	counts, _ := perSecond(q, 0, 15, 2*time.Millisecond)
	if counts[14] < 95 {
		t.Fatalf("not warm after 15 s: %v", counts)
	}
	// Ten idle seconds, twice the period: cold again.
	counts, _ = perSecond(q, int64(25*time.Second), 1, 2*time.Millisecond)
	if counts[0] > 40 {
		t.Fatalf("after idling twice the warm-up period, the first second allowed %d, want about 33", counts[0])
	}
}

func TestQPSWarmUpLetsLightTrafficThroughAndOnlyIdlenessCools(t *testing.T) {
	q := mustQPS(t, QPSSettings{Limit: 90, Interval: time.Second, WarmUp: 5 * time.Second, ColdFactor: 3})
	counts, _ := perSecond(q, 0, 20, 40*time.Millisecond) // 25/s, below the cold limit of 30
	for i, n := range counts {
		if n != 25 {
			t.Fatalf("second %d allowed %d of 25 light requests", i, n)
		}
	}
	// An idle limiter, cold from the start, meets a burst with its cold limit.
	idle := mustQPS(t, QPSSettings{Limit: 90, Interval: time.Second, WarmUp: 5 * time.Second, ColdFactor: 3})
	burst := 0
	for i := 0; i < 100; i++ {
		if idle.AllowAt(int64(20*time.Second) + int64(i)).Allowed {
			burst++
		}
	}
	if burst != 30 {
		t.Fatalf("a cold limiter allowed a burst of %d, want its cold limit 30", burst)
	}
}

func TestWarmUpCurve(t *testing.T) {
	w, err := newWarmUp(100, time.Second, 10*time.Second, 3, 25, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.limitAt(w.max); got != 33 {
		t.Fatalf("cold limit %d, want 33", got)
	}
	if got := w.limitAt(w.threshold); got != 100 {
		t.Fatalf("limit at the threshold %d, want 100", got)
	}
	if got := w.limitAt(0); got != 100 {
		t.Fatalf("warm limit %d", got)
	}
	// Warming from max to threshold at the curve's own rate takes the period.
	var elapsed float64
	const step = 0.01
	for s := w.max; s > w.threshold; s -= step {
		elapsed += step * float64(time.Second) / (w.limit / (1 + (w.cold-1)*(s-w.threshold)/(w.max-w.threshold)))
	}
	if math.Abs(elapsed-float64(10*time.Second)) > float64(10*time.Millisecond) {
		t.Fatalf("warming at the curve's rate takes %v, want 10s", time.Duration(elapsed))
	}
	tiny, _ := newWarmUp(2, time.Second, 10*time.Second, 2, 1, false)
	if got := tiny.limitAt(tiny.max); got != 1 {
		t.Fatalf("cold limit of 2/10 = %d, want at least 1", got)
	}
}

func TestWarmUpBadSettingsAreErrors(t *testing.T) {
	for _, tc := range []struct {
		period  time.Duration
		factor  float64
		mention string
	}{{0, 3, "cold_factor = 3: applies only with a warm-up"}, {-time.Second, 3, "warm_up = -1s"}, {time.Second, 1, "cold_factor = 1"}, {time.Second, math.NaN(), "cold_factor = NaN"}, {time.Second, math.Inf(1), "cold_factor = +Inf"}} {
		_, err := NewQPS(QPSSettings{Limit: 10, Interval: time.Second, WarmUp: tc.period, ColdFactor: tc.factor})
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("WarmUp %v, ColdFactor %v: %v, want mention of %q", tc.period, tc.factor, err, tc.mention)
		}
	}
	if q, err := NewQPS(QPSSettings{Limit: 0, Interval: time.Second, WarmUp: 2 * time.Second, ColdFactor: 3}); err != nil || q.Allow().Allowed {
		t.Fatal("a warm-up limiter with limit 0 must block everything")
	}
}

func TestThrottleWarmUpPacesSlowlyFromCold(t *testing.T) {
	th, err := NewThrottle(ThrottleSettings{Limit: 100, Interval: time.Second, MaxWait: 0, WarmUp: 10 * time.Second, ColdFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, 15)
	var last int64 = -1
	minGap := int64(math.MaxInt64)
	for now := int64(0); now < int64(15*time.Second); now += int64(time.Millisecond) {
		if d := th.AllowNAt(now, "", 1); d.Allowed {
			counts[now/int64(time.Second)]++
			if last >= 0 {
				minGap = min(minGap, now-last)
			}
			last = now
		}
	}
	if counts[0] < 30 || counts[0] > 40 {
		t.Fatalf("first second from cold paced %d, want about 100/3: %v", counts[0], counts)
	}
	if counts[14] < 95 {
		t.Fatalf("after 14 s of full traffic the pace is %d/s, want about 100: %v", counts[14], counts)
	}
	if minGap < int64(10*time.Millisecond) {
		t.Fatalf("two places %v apart, faster than the limit's 10ms", time.Duration(minGap))
	}
	if _, err := NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, MaxWait: 0, WarmUp: 0, ColdFactor: 3}); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("a throttle with a bad warm-up: %v", err)
	}
}

// TestWarmUpIsAnErrorWhereItCannotHonor checks the bounds QPSSettings.WarmUp states: a
// cold factor up to the limit, a period of at least two intervals and ten
// buckets. Each error names the field and its value, and both limiters
// return it alike.
func TestWarmUpIsAnErrorWhereItCannotHonor(t *testing.T) {
	for _, tc := range []struct {
		limit   int64
		buckets int
		period  time.Duration
		factor  float64
		mention string // empty: no error
	}{
		{100, flowlimits.DefaultBuckets, 10 * time.Second, 1e6, "cold_factor = 1e+06: must be at most the limit, 100"},
		{100, flowlimits.DefaultBuckets, 10 * time.Second, 100.5, "cold_factor = 100.5"},
		{100, flowlimits.DefaultBuckets, 10 * time.Second, 100, ""},
		{100, flowlimits.DefaultBuckets, time.Second, 3, "warm_up = 1s: must be at least 2 intervals of 1s"},
		{100, flowlimits.DefaultBuckets, 2*time.Second - 1, 3, "warm_up = 1.999999999s"},
		{100, flowlimits.DefaultBuckets, 2 * time.Second, 3, ""},
		{100, 1, 5 * time.Second, 3, "warm_up = 5s: must be at least 10 buckets of 1s"},
		{100, 1, 10 * time.Second, 3, ""},
		{100, 4, 2 * time.Second, 3, "warm_up = 2s: must be at least 10 buckets of 250ms"},
		{100, 5, 2 * time.Second, 3, ""},
		{1, flowlimits.DefaultBuckets, 10 * time.Second, 1.5, "cold_factor = 1.5: must be at most the limit, 1"},
	} {
		for _, throttle := range []bool{false, true} {
			var err error
			if throttle {
				_, err = NewThrottle(ThrottleSettings{Limit: tc.limit, Interval: time.Second, Buckets: tc.buckets, WarmUp: tc.period, ColdFactor: tc.factor})
			} else {
				_, err = NewQPS(QPSSettings{Limit: tc.limit, Interval: time.Second, Buckets: tc.buckets, WarmUp: tc.period, ColdFactor: tc.factor})
			}
			switch {
			case tc.mention == "" && err != nil:
				t.Errorf("limit %d, %d buckets, WarmUp %v, ColdFactor %v, throttle %v: %v, want no error", tc.limit, tc.buckets, tc.period, tc.factor, throttle, err)
			case tc.mention != "" && (!errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.mention)):
				t.Errorf("limit %d, %d buckets, WarmUp %v, ColdFactor %v, throttle %v: %v, want an error mentioning %q", tc.limit, tc.buckets, tc.period, tc.factor, throttle, err, tc.mention)
			}
		}
	}
	// A period too short is an error even with nothing to warm (limit 0).
	if _, err := NewQPS(QPSSettings{Limit: 0, Interval: time.Second, WarmUp: time.Second, ColdFactor: 3}); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("limit 0 with a 1s warm-up over 1s: %v, want an error", err)
	}
}

// TestQPSWarmUpNeverExceedsEachBucketsLimit checks the promise a warming
// limiter keeps: no interval ending in a bucket holds more than that bucket's
// limit, which warming and cooling change from bucket to bucket, with
// prioritized requests borrowing places from the next bucket too.
func TestQPSWarmUpNeverExceedsEachBucketsLimit(t *testing.T) {
	const limit = 100
	for _, k := range []int{1, 5, flowlimits.DefaultBuckets} {
		for _, p := range flowsim.Patterns() {
			q := mustQPS(t, QPSSettings{Limit: limit, Interval: time.Second, Buckets: k, WarmUp: 10 * time.Second, ColdFactor: 4})
			rng := rand.New(rand.NewPCG(7, uint64(k)))
			allowed := map[uint64]int64{}     // by bucket index
			bucketLimit := map[uint64]int64{} // of each bucket that opened
			for _, a := range p.Arrivals(rng, limit, time.Second, 40*time.Second) {
				var d Decision
				if rng.IntN(3) == 0 {
					d = q.AllowPriorityNAt(a.At, a.N, 500*time.Millisecond)
				} else {
					d = q.AllowNAt(a.At, a.N)
				}
				if d.Allowed {
					allowed[q.grid.Index(a.At+int64(d.Wait))] += a.N
				}
				if o := q.open.Load() >> 1; bucketLimit[o] == 0 {
					bucketLimit[o] = q.warm.bucketLimit.Load()
				}
			}
			checked := 0
			for b, lim := range bucketLimit {
				var window int64
				for i := b - uint64(k); i <= b; i++ {
					window += allowed[i]
				}
				if window > lim {
					t.Errorf("%d buckets, %s: bucket %d's window holds %d, above its limit %d", k, p.Name, b, window, lim)
				}
				checked++
			}
			if checked < 10 {
				t.Errorf("%d buckets, %s: only %d buckets opened", k, p.Name, checked)
			}
		}
	}
}

// TestWarmUpConcurrentCallersKeepTheLimitAndThePace runs many callers on
// warming limiters while the clock moves a bucket at a time: buckets open
// and the coldness changes under them, and still no interval holds more than
// the limit, and no two of a throttle's places are closer than its pace.
func TestWarmUpConcurrentCallersKeepTheLimitAndThePace(t *testing.T) {
	const goroutines, steps, limit = 8, 120, 50
	const width = 25 * time.Millisecond
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: limit, Interval: 4 * width, Buckets: 4, Clock: c, WarmUp: 20 * width, ColdFactor: 5})
	th, err := NewThrottle(ThrottleSettings{Limit: limit, Interval: 4 * width, MaxWait: time.Second, Buckets: 4, Clock: c, WarmUp: 20 * width, ColdFactor: 5})
	if err != nil {
		t.Fatal(err)
	}
	var perStep [steps]atomic.Int64
	var mu sync.Mutex
	var places []int64
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
					if i%4 == 0 {
						if d := th.ReserveNAt(now, "", 1); d.Allowed {
							mu.Lock()
							places = append(places, now+int64(d.Wait))
							mu.Unlock()
						}
					}
				}
			}()
		}
		wg.Wait()
		c.Advance(width)
	}
	var arr []flowsim.Arrival
	var total int64
	for step := range perStep {
		n := perStep[step].Load()
		total += n
		arr = append(arr, flowsim.Arrival{At: int64(step) * int64(width), N: n})
	}
	if got := flowsim.MaxInAnyInterval(arr, 4*width); got > limit {
		t.Fatalf("%d allowed in one interval, limit %d", got, limit)
	}
	// Warm after 20 of the 120 buckets, the limiter allows 4/5 of its
	// limit per interval from then on.
	if total < (steps-20)/4*limit*4/5 {
		t.Fatalf("only %d allowed over %d intervals", total, steps/4)
	}
	slices.Sort(places)
	for i := 1; i < len(places); i++ {
		if places[i]-places[i-1] < int64(4*width)/limit {
			t.Fatalf("places %d and %d are %v apart, closer than the pace", i-1, i, time.Duration(places[i]-places[i-1]))
		}
	}
	if len(places) < steps/4*limit/2 {
		t.Fatalf("the throttle gave only %d places in %d intervals", len(places), steps/4)
	}
}

// TestThrottleWarmUpCoolsWhenIdleNotWhileItsQueueLasts: time that no place
// covers cools a throttle, and an idle throttle is cold again after the
// period; places reserved ahead cover the time they take, so a queue keeps
// it warm, however long after the reservations it lasts.
func TestThrottleWarmUpCoolsWhenIdleNotWhileItsQueueLasts(t *testing.T) {
	newWarm := func(maxWait time.Duration) *Throttle {
		th, err := NewThrottle(ThrottleSettings{Limit: 100, Interval: time.Second, MaxWait: maxWait, WarmUp: 5 * time.Second, ColdFactor: 3})
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	// places counts the places given to requests offered every ms in
	// [from, to) that would not wait, by the second they fall in.
	places := func(th *Throttle, from, to time.Duration) []int {
		counts := make([]int, (to-from+time.Second-1)/time.Second)
		for now := int64(from); now < int64(to); now += int64(time.Millisecond) {
			if d, _, _, _ := th.reserve(now, 1, 0); d.Allowed {
				counts[(now-int64(from))/int64(time.Second)]++
			}
		}
		return counts
	}
	th := newWarm(0)
	if warm := places(th, 0, 10*time.Second); warm[9] < 95 {
		t.Fatalf("not warm after 10 s of overload: %v", warm)
	}
	// Ten idle seconds, twice the period: cold again.
	if cold := places(th, 20*time.Second, 21*time.Second); cold[0] > 40 {
		t.Fatalf("after idling twice the period, the first second gave %d places, want about 33", cold[0])
	}

	// A warm throttle with a long maximum wait takes a queue of 300
	// places, 3 s of them at its pace, all at once; nothing comes while they
	// are served, and they keep it warm: the next second is still at the
	// pace of the limit.
	th = newWarm(time.Hour)
	places(th, 0, 10*time.Second)
	var last int64
	for range 300 {
		d := th.ReserveNAt(int64(10*time.Second), "", 1)
		if !d.Allowed {
			t.Fatal("a place blocked with an hour to wait")
		}
		last = int64(10*time.Second) + int64(d.Wait)
	}
	if last > int64(13*time.Second)+int64(50*time.Millisecond) {
		t.Fatalf("300 queued places end at %v, want about 13s at the limit's pace", time.Duration(last))
	}
	// Once the queue has been served, the next second is still warm.
	if after := places(th, 13*time.Second, 14*time.Second); after[0] < 90 {
		t.Fatalf("the second after a 3 s queue gave %d places, want about 100: serving a queue is not idleness", after[0])
	}
}

// TestWarmUpDecisionsDoNotAllocate: warming limiters decide without
// allocating, buckets opening and skipped buckets cooling included.
func TestWarmUpDecisionsDoNotAllocate(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 1000, Interval: time.Second, Clock: c, WarmUp: 10 * time.Second, ColdFactor: 3})
	th, err := NewThrottle(ThrottleSettings{Limit: 1000, Interval: time.Second, MaxWait: time.Second, Clock: c, WarmUp: 10 * time.Second, ColdFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		i++
		step := time.Millisecond
		if i%100 == 0 {
			step = 3 * time.Second // skipped buckets
		}
		c.Advance(step)
		q.Allow()
		q.AllowN(3)
		q.AllowPriorityN(1, time.Second)
		th.Allow("")
		th.ReserveN("", 3)
	}); n != 0 {
		t.Fatalf("deciding with warm-up allocates %.1f times per call", n)
	}
}
