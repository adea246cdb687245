package flow

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow/flowsim"
)

// perSecond offers requests every step from start for seconds seconds, and
// returns how many each second admitted and the admission times.
func perSecond(q *QPS, start int64, seconds int, step time.Duration) ([]int64, []flowsim.Arrival) {
	counts := make([]int64, seconds)
	var admitted []flowsim.Arrival
	for t := int64(0); t < int64(seconds)*int64(time.Second); t += int64(step) {
		if q.AllowAt(start + t).Allowed {
			counts[t/int64(time.Second)]++
			admitted = append(admitted, flowsim.Arrival{At: start + t, N: 1})
		}
	}
	return counts, admitted
}

func TestQPSWarmUpRampsFromAThirdToTheLimitInThePeriod(t *testing.T) {
	q := mustQPS(t, 100, time.Second, WithWarmUp(10*time.Second, 3))
	counts, admitted := perSecond(q, 0, 20, 2*time.Millisecond) // 500/s offered
	if counts[0] < 30 || counts[0] > 40 {
		t.Fatalf("first second from cold admitted %d, want about 100/3", counts[0])
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
	if got := flowsim.MaxInAnyInterval(admitted, time.Second); got > 100 {
		t.Fatalf("%d admitted in one second while warming up", got)
	}
}

func TestQPSWarmUpCoolsWhenTrafficStops(t *testing.T) {
	q := mustQPS(t, 100, time.Second, WithWarmUp(5*time.Second, 3))
	counts, _ := perSecond(q, 0, 15, 2*time.Millisecond)
	if counts[14] < 95 {
		t.Fatalf("not warm after 15 s: %v", counts)
	}
	// Ten idle seconds, twice the period: cold again.
	counts, _ = perSecond(q, int64(25*time.Second), 1, 2*time.Millisecond)
	if counts[0] > 40 {
		t.Fatalf("after idling twice the warm-up period, the first second admitted %d, want about 33", counts[0])
	}
}

func TestQPSWarmUpLetsLightTrafficThroughAndOnlyIdlenessCools(t *testing.T) {
	q := mustQPS(t, 90, time.Second, WithWarmUp(5*time.Second, 3))
	counts, _ := perSecond(q, 0, 20, 40*time.Millisecond) // 25/s, below the cold limit of 30
	for i, n := range counts {
		if n != 25 {
			t.Fatalf("second %d admitted %d of 25 light requests", i, n)
		}
	}
	// An idle limiter, cold from the start, meets a burst with its cold limit.
	idle := mustQPS(t, 90, time.Second, WithWarmUp(5*time.Second, 3))
	burst := 0
	for i := 0; i < 100; i++ {
		if idle.AllowAt(int64(20*time.Second) + int64(i)).Allowed {
			burst++
		}
	}
	if burst != 30 {
		t.Fatalf("a cold limiter admitted a burst of %d, want its cold limit 30", burst)
	}
}

func TestWarmUpCurve(t *testing.T) {
	w, err := newWarmUp(100, time.Second, 10*time.Second, 3, 25)
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
	tiny, _ := newWarmUp(2, time.Second, time.Second, 10, 1)
	if got := tiny.limitAt(tiny.max); got != 1 {
		t.Fatalf("cold limit of 2/10 = %d, want at least 1", got)
	}
}

func TestWarmUpRejectsBadSettings(t *testing.T) {
	for _, tc := range []struct {
		period  time.Duration
		factor  float64
		mention string
	}{{0, 3, "warm-up period = 0s"}, {time.Second, 1, "cold factor = 1"}, {time.Second, math.NaN(), "cold factor = NaN"}, {time.Second, math.Inf(1), "cold factor = +Inf"}} {
		_, err := NewQPS(10, time.Second, WithWarmUp(tc.period, tc.factor))
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("WithWarmUp(%v, %v): %v, want mention of %q", tc.period, tc.factor, err, tc.mention)
		}
	}
	if q, err := NewQPS(0, time.Second, WithWarmUp(time.Second, 3)); err != nil || q.Allow().Allowed {
		t.Fatal("a warm-up limiter with limit 0 must refuse everything")
	}
}

func TestThrottleWarmUpPacesSlowlyFromCold(t *testing.T) {
	th, err := NewThrottle(100, time.Second, 0, WithWarmUp(10*time.Second, 3))
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, 15)
	var last int64 = -1
	minGap := int64(math.MaxInt64)
	for now := int64(0); now < int64(15*time.Second); now += int64(time.Millisecond) {
		if d := th.AllowNAt(now, 1); d.Allowed {
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
	if _, err := NewThrottle(10, time.Second, 0, WithWarmUp(0, 3)); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a throttle with a bad warm-up: %v", err)
	}
}
