package flow

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

func newTestAdaptive(t *testing.T, s AdaptiveSettings) (*Adaptive, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(0)
	s.Clock = clk
	a, err := NewAdaptive(s)
	if err != nil {
		t.Fatal(err)
	}
	return a, clk
}

// batch admits n requests together at now and ends them all at now+rt,
// overloaded or not; it fails the test if one is not admitted.
func batch(t *testing.T, a *Adaptive, now int64, n int, rt time.Duration, overloaded bool) {
	t.Helper()
	ps := make([]Permit, n)
	for i := range ps {
		if d := a.AcquireAt(now, &ps[i], ""); !d.Allowed {
			t.Fatalf("request %d of %d at %v blocked (%v) under a limit of %d", i, n, time.Duration(now), d.Reason, a.limitNow())
		}
	}
	o := Succeeded
	if overloaded {
		o = FailedOverloaded
	}
	for i := range ps {
		ps[i].DoneAt(now+int64(rt), o)
	}
}

const ms = int64(time.Millisecond)

// near reports whether a response time the limiter reports is want, within
// the error of the bins it counts them in (4.43%).
func near(got, want time.Duration) bool {
	return math.Abs(float64(got-want)) <= 0.0443*float64(want)
}

// closeAt closes the limiter's window at now, as the first request to end
// after the window's end does.
func closeAt(a *Adaptive, now int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closeWindow(now)
}

func TestAdaptiveGradientFollowsTheQueue(t *testing.T) {
	a, _ := newTestAdaptive(t, AdaptiveSettings{DrainInterval: -1})
	// Window 1 (ends at 100 ms): the whole limit in use, 10 ms each: the
	// baseline, no queue: slow start doubles.
	batch(t, a, 80*ms, 20, 10*time.Millisecond, false)
	closeAt(a, 100*ms)
	if got := a.limitNow(); got != 40 || !near(a.baselineNow(), 10*time.Millisecond) {
		t.Fatalf("after a window without queueing: limit %d, baseline %v; want 40, 10ms", got, a.baselineNow())
	}
	// Window 2: 40 in flight take 30 ms: 1.25 × 10 / 30, at least 0.5.
	batch(t, a, 160*ms, 40, 30*time.Millisecond, false)
	closeAt(a, 200*ms)
	if got := a.limitNow(); got != 20 {
		t.Fatalf("after requests took 3 × the baseline: limit %d, want 20", got)
	}
	// Window 3: no queue again, out of slow start: grows by its root.
	batch(t, a, 280*ms, 20, 10*time.Millisecond, false)
	closeAt(a, 300*ms)
	if got, want := a.limitNow(), int64(math.Round(20+math.Sqrt(20))); got != want {
		t.Fatalf("after the queue went: limit %d, want %d", got, want)
	}
	// Window 4: 1.2 × the baseline is within the tolerance, but only 10
	// of 24 were in flight: no growth.
	batch(t, a, 380*ms, 10, 12*time.Millisecond, false)
	closeAt(a, 400*ms)
	if got, want := a.limitNow(), int64(math.Round(20+math.Sqrt(20))); got != want {
		t.Fatalf("after a window using under half the limit: limit %d, want %d", got, want)
	}
}

func TestAdaptiveBacksOffWhenRequestsAreOverloaded(t *testing.T) {
	for _, alg := range []string{"gradient", "aimd"} {
		a, _ := newTestAdaptive(t, AdaptiveSettings{Algorithm: alg, InitialLimit: 100, DrainInterval: -1})
		// Fast, but timed out: the response times say nothing of them.
		batch(t, a, 90*ms, 10, time.Millisecond, true)
		closeAt(a, 100*ms)
		if got := a.limitNow(); got != 80 {
			t.Errorf("%v: after overloaded requests: limit %d, want 80", alg, got)
		}
	}
}

func TestAdaptiveAIMDCutsWhenRequestsQueue(t *testing.T) {
	a, _ := newTestAdaptive(t, AdaptiveSettings{Algorithm: "aimd", DrainInterval: -1})
	batch(t, a, 80*ms, 20, 10*time.Millisecond, false) // baseline 10 ms; slow start: 40
	closeAt(a, 100*ms)
	batch(t, a, 180*ms, 40, 16*time.Millisecond, false)
	closeAt(a, 200*ms)
	if got := a.limitNow(); got != 32 {
		t.Fatalf("AIMD after requests took 1.6 × the baseline: limit %d, want 40 × 0.8 = 32", got)
	}
}

func TestAdaptiveNeverLeavesItsBounds(t *testing.T) {
	a, _ := newTestAdaptive(t, AdaptiveSettings{MinLimit: 8, MaxLimit: 30, DrainInterval: -1})
	now := 90 * ms
	for range 5 { // no queue, whole limit in use: would double each time
		batch(t, a, now, int(a.limitNow()), time.Millisecond, false)
		now += 200 * ms
		closeAt(a, now)
	}
	if got := a.limitNow(); got != 30 {
		t.Fatalf("limit %d, want the max limit 30", got)
	}
	for range 20 {
		batch(t, a, now, 8, time.Millisecond, true)
		now += 200 * ms
		closeAt(a, now)
	}
	if got := a.limitNow(); got != 8 {
		t.Fatalf("limit %d, want the min limit 8", got)
	}
}

// Every DrainInterval the limit drops to what lets the queue drain, never
// below MinLimit, and comes back; the baseline is then the least response
// time of the requests admitted once the queue had drained, even if that
// is more than before (the service became slower), and the requests
// admitted before do not count.
func TestAdaptiveDrainRemeasuresTheBaseline(t *testing.T) {
	a, _ := newTestAdaptive(t, AdaptiveSettings{InitialLimit: 60, DrainInterval: time.Second})
	batch(t, a, 80*ms, 60, 10*time.Millisecond, false)
	closeAt(a, 100*ms)
	if !near(a.baselineNow(), 10*time.Millisecond) {
		t.Fatalf("baseline %v, want 10ms", a.baselineNow())
	}
	before := a.limitNow() // 120: slow start
	// Past the drain time (1 s ± 25%), the whole limit in flight.
	old := make([]Permit, before)
	for i := range old {
		if !a.AcquireAt(1300*ms, &old[i], "").Allowed {
			t.Fatalf("request %d of %d blocked", i, before)
		}
	}
	// Eleven end: the eleventh closes the window of ten, and the drain
	// starts.
	for i := range 11 {
		old[i].DoneAt(1330*ms, Succeeded)
	}
	drain := a.limitNow()
	if want := int64(math.Round(0.8 * float64(before) / flowlimits.DefaultAdaptiveTolerance)); drain != want {
		t.Fatalf("draining: limit %d, want 0.8 × %d / the tolerance = %d", drain, before, want)
	}
	// The queue drains as the old requests end, 45 ms after they began:
	// they do not measure the baseline.
	for i := 11; i < int(before)-int(drain)+11; i++ {
		old[i].DoneAt(1345*ms, Succeeded)
	}
	// The service now takes 50 ms: the next ten requests admitted measure
	// it, and the one after them ends the drain.
	batch(t, a, 1350*ms, 10, 50*time.Millisecond, false)
	if a.limitNow() != drain {
		t.Fatalf("limit %d before the drain's tenth measure ended, want %d still", a.limitNow(), drain)
	}
	old[before-1].DoneAt(1400*ms, Succeeded)
	if got := a.baselineNow(); !near(got, 50*time.Millisecond) {
		t.Fatalf("baseline after the drain %v, want 50ms", got)
	}
	if got := a.limitNow(); got != before {
		t.Fatalf("limit after the drain %d, want %d back", got, before)
	}
}

func TestAdaptiveDrainStopsAtTheMinLimit(t *testing.T) {
	a, _ := newTestAdaptive(t, AdaptiveSettings{InitialLimit: 9, MinLimit: 6, DrainInterval: time.Second})
	batch(t, a, 80*ms, 9, 10*time.Millisecond, false)
	closeAt(a, 100*ms)
	batch(t, a, 1300*ms, int(a.limitNow()), 10*time.Millisecond, false)
	closeAt(a, 1400*ms)
	if got := a.limitNow(); got != 6 {
		t.Fatalf("draining: limit %d, want the min limit 6", got)
	}
}

func TestAdaptiveNeverAdmitsOverItsLimitUnderRace(t *testing.T) {
	a, clk := newTestAdaptive(t, AdaptiveSettings{InitialLimit: 5, MinLimit: 5, MaxLimit: 5})
	var inside, peak atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				var p Permit
				if !a.Acquire(&p, "").Allowed {
					continue
				}
				storeMax(&peak, inside.Add(1))
				inside.Add(-1)
				clk.Advance(time.Millisecond)
				if i%7 == 0 {
					p.Done(FailedOverloaded)
				} else {
					p.Done(Succeeded)
				}
			}
		}()
	}
	wg.Wait()
	if peak.Load() > 5 || a.inFlight() != 0 {
		t.Fatalf("peak %d in flight under a limit of 5; %d left", peak.Load(), a.inFlight())
	}
}

func TestAdaptiveSettingsErrorsNameTheSetting(t *testing.T) {
	for _, c := range []struct {
		s      AdaptiveSettings
		option string
	}{
		{AdaptiveSettings{Algorithm: "vegas"}, "algorithm"},
		{AdaptiveSettings{MinLimit: -1}, "min_limit"},
		{AdaptiveSettings{MinLimit: 10, MaxLimit: 5}, "max_limit"},
		{AdaptiveSettings{InitialLimit: 3, MinLimit: 4}, "initial_limit"},
		{AdaptiveSettings{InitialLimit: 50, MaxLimit: 40}, "initial_limit"},
		{AdaptiveSettings{Tolerance: 0.5}, "tolerance"},
		{AdaptiveSettings{Tolerance: math.NaN()}, "tolerance"},
		{AdaptiveSettings{Window: time.Microsecond}, "window"},
		{AdaptiveSettings{MinSamples: -1}, "min_samples"},
		{AdaptiveSettings{DrainInterval: 500 * time.Millisecond}, "drain_interval"},
		{AdaptiveSettings{Backoff: 1}, "backoff"},
		{AdaptiveSettings{Backoff: 0.2}, "backoff"},
	} {
		_, err := NewAdaptive(c.s)
		var ce *configError
		if !errors.As(err, &ce) || ce.Field != c.option {
			t.Errorf("NewAdaptive(%+v): %v, want a *configError naming %s", c.s, err, c.option)
		}
	}
	// A default initial limit outside bounds set around it moves in.
	a, err := NewAdaptive(AdaptiveSettings{MinLimit: 50, MaxLimit: 100})
	if err != nil || a.limitNow() != 50 {
		t.Fatalf("NewAdaptive with bounds above the default start: %v, limit %d; want 50", err, a.limitNow())
	}
}

func TestAdaptiveDoesNotAllocate(t *testing.T) {
	a, _ := newTestAdaptive(t, AdaptiveSettings{})
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		var p Permit
		a.AcquireAt(now, &p, "")
		now += 5 * ms
		p.DoneAt(now, Succeeded)
	}); n != 0 {
		t.Fatalf("AcquireAt and DoneAt allocate %.1f times", n)
	}
}

// A few fast answers among slow ones (cache hits, quick errors) do not
// make the baseline fast, so the windows of ordinary requests do not look
// queued.
func TestAdaptiveFewFastAnswersDoNotLowerTheBaseline(t *testing.T) {
	a, _ := newTestAdaptive(t, AdaptiveSettings{InitialLimit: 40, DrainInterval: time.Second})
	now := int64(0)
	for i := range 3000 { // 30 s, 20 at a time every 10 ms
		ps := make([]Permit, 20)
		for j := range ps {
			if !a.AcquireAt(now, &ps[j], "").Allowed {
				t.Fatalf("after %v: request %d of 20 blocked under a limit of %d (baseline %v)", time.Duration(now), j, a.limitNow(), a.baselineNow())
			}
		}
		for j := range ps {
			rt := 10 * ms
			if (i*20+j)%50 == 0 { // 2% answer in 20 µs
				rt = 20 * int64(time.Microsecond)
			}
			ps[j].DoneAt(now+rt, Succeeded)
		}
		now += 10 * ms
	}
	if b := a.baselineNow(); b < 9*time.Millisecond {
		t.Fatalf("baseline %v, want about the 9.8 ms average", b)
	}
}

// A request that ends before it began (a clock that went back) is no
// sample.
func TestAdaptiveIgnoresASampleFromAClockThatWentBack(t *testing.T) {
	a, _ := newTestAdaptive(t, AdaptiveSettings{InitialLimit: 100, MinSamples: 1, DrainInterval: -1})
	batch(t, a, 80*ms, 10, 10*time.Millisecond, false)
	closeAt(a, 100*ms)
	var p Permit
	a.AcquireAt(150*ms, &p, "")
	p.DoneAt(140*ms, Succeeded)
	closeAt(a, 300*ms)
	if b := a.baselineNow(); !near(b, 10*time.Millisecond) {
		t.Fatalf("baseline %v after a request that ended before it began, want 10ms", b)
	}
	if a.inFlight() != 0 {
		t.Fatalf("%d in flight", a.inFlight())
	}
}

// Overloaded requests are never lost to a drain: none starts in a window
// that has them, and those that end in one cut the limit it comes back to.
func TestAdaptiveDrainKeepsTheOverloadSignal(t *testing.T) {
	a, _ := newTestAdaptive(t, AdaptiveSettings{InitialLimit: 60, DrainInterval: time.Second})
	batch(t, a, 80*ms, 60, 10*time.Millisecond, false)
	closeAt(a, 100*ms) // 120: slow start; the next window ends at 200 ms
	// A window of 100 requests and 10 overloaded, the drain due when it
	// closes: it cuts the limit instead of draining.
	batch(t, a, 110*ms, 100, 40*time.Millisecond, false)
	batch(t, a, 110*ms, 10, 50*time.Millisecond, true)
	var p Permit
	a.AcquireAt(1290*ms, &p, "")
	p.DoneAt(1300*ms, Succeeded) // closes the window, past the drain time
	if got, want := a.limitNow(), int64(math.Round(120*flowlimits.DefaultAdaptiveBackoff)); got != want {
		t.Fatalf("limit %d after a window with overloaded requests past the drain time, want %d: a drain started instead", got, want)
	}
	before := a.limitNow()
	// The next window drains; requests overloaded during it cut what it
	// comes back to.
	batch(t, a, 1500*ms, int(before), 10*time.Millisecond, false)
	if a.limitNow() >= before {
		t.Fatalf("limit %d: no drain from %d", a.limitNow(), before)
	}
	batch(t, a, 1560*ms, 10, 10*time.Millisecond, true)  // ending in the drain
	batch(t, a, 1600*ms, 10, 20*time.Millisecond, false) // the first ends the drain, at 1.61 s
	if got, want := a.limitNow(), int64(math.Round(float64(before)*flowlimits.DefaultAdaptiveBackoff)); got != want {
		t.Fatalf("limit %d after a drain with overloaded requests, want %d", got, want)
	}
}

// At the limit, the places are shared among keys: one key holding the limit
// with stalled requests does not keep the others out.
func TestAdaptiveSharesItsLimitAmongKeys(t *testing.T) {
	a, _ := newTestAdaptive(t, AdaptiveSettings{InitialLimit: 16, MinLimit: 16, MaxLimit: 16, DrainInterval: -1})
	held := make([]Permit, 16)
	for i := range held {
		if !a.AcquireAt(0, &held[i], "stalled").Allowed {
			t.Fatalf("request %d of a key alone refused under the limit", i+1)
		}
	}
	var p Permit
	if d := a.AcquireAt(0, &p, "stalled"); d.Allowed || d.Reason != Overloaded {
		t.Fatalf("a key alone at the limit: %+v, want Overloaded", d)
	}
	now := int64(0)
	for _, key := range apart(a.fair, 2, "stalled") {
		for i := range 4 { // 3 busy keys in at most 6 lanes: a share of at least ⌈16/6⌉ = 3 in each of a key's two lanes
			now += recount // a millisecond apart: the busy lanes counted afresh
			var p Permit
			if d := a.AcquireAt(now, &p, key); !d.Allowed {
				t.Fatalf("key %s refused its request %d: below its share at the limit", key, i+1)
			}
		}
	}
}
