package flow

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// cpuAt is a CPU reading a test sets.
type cpuAt struct{ v atomic.Uint64 }

func (c *cpuAt) set(v float64) { c.v.Store(math.Float64bits(v)) }
func (c *cpuAt) read() float64 { return math.Float64frombits(c.v.Load()) }

func newTestShedder(t *testing.T, s ShedderSettings) (*Shedder, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(0)
	s.Clock = clk
	sh, err := NewShedder(s)
	if err != nil {
		t.Fatal(err)
	}
	return sh, clk
}

// complete admits n requests at now, one after the other, and ends each rt
// later, so that they all complete within the bucket holding now+rt.
func complete(t *testing.T, s *Shedder, now int64, n int, rt time.Duration) {
	t.Helper()
	for i := range n {
		var p Permit
		if d := s.AcquireAt(now, &p, ""); !d.Allowed {
			t.Fatalf("request %d of %d at %v: %v", i, n, time.Duration(now), d.Reason)
		}
		p.DoneAt(now+int64(rt), Succeeded)
	}
}

// The bound is Little's law over the best bucket: completions per bucket ×
// the least average response time / the bucket's width, with response
// times to the microsecond. A 250 µs handler completing 4,000 requests per
// 100 ms bucket keeps 10 in flight; rounding its response time up to 1 ms,
// as go-zero does, would allow 40.
func TestShedderBoundIsBestRateTimesLeastResponseTime(t *testing.T) {
	cpu := new(cpuAt)
	s, _ := newTestShedder(t, ShedderSettings{CPU: cpu.read})
	const width = int64(100 * time.Millisecond)
	if got := s.maxInFlight(0); got != math.MaxInt64 {
		t.Fatalf("bound before any completion = %d, want none", got)
	}
	complete(t, s, 0, 4000, 250*time.Microsecond)     // bucket 0: 4,000 at 250 µs
	complete(t, s, width, 2000, 400*time.Microsecond) // bucket 1: fewer, slower
	complete(t, s, 2*width, 1000, 2*time.Millisecond) // bucket 2: slower still
	if got := s.maxInFlight(2*width + 1); got != 10 { // buckets 0 and 1 are full
		t.Fatalf("bound = %d, want 4000 × 250µs / 100ms = 10", got)
	}
	// 3 in flight already, CPU above the threshold: 7 more, then shed.
	held := make([]Permit, 3)
	for i := range held {
		s.AcquireAt(3*width, &held[i], "")
	}
	cpu.set(0.95)
	allowed := 0
	for range 20 {
		var p Permit
		if d := s.AcquireAt(3*width, &p, ""); d.Allowed {
			allowed++
		} else if d.Reason != Overloaded {
			t.Fatalf("shed with %v, want Overloaded", d.Reason)
		}
	}
	if allowed != 7 || s.inFlight() != 10 {
		t.Fatalf("allowed %d more (in flight %d) at the bound of 10 with 3 in flight, want 7", allowed, s.inFlight())
	}
}

func TestShedderAdmitsTwiceItsBoundBelowTheCPUThresholdAndSheddsAbove(t *testing.T) {
	cpu := new(cpuAt)
	s, _ := newTestShedder(t, ShedderSettings{CPU: cpu.read, CPUThreshold: 0.8, CoolOff: time.Second})
	const width = int64(100 * time.Millisecond)
	complete(t, s, 0, 100, 10*time.Millisecond) // bound: 100 × 10 ms / 100 ms = 10
	now := 2 * width
	cpu.set(0.79)
	held := make([]Permit, 20)
	for i := range held {
		if d := s.AcquireAt(now, &held[i], ""); !d.Allowed {
			t.Fatalf("request %d shed with the CPU below its threshold and under twice the bound", i)
		}
	}
	var p Permit
	if d := s.AcquireAt(now, &p, ""); d.Allowed || d.Reason != Overloaded {
		t.Fatalf("below the threshold with twice the bound in flight: %+v, want shed", d)
	}
	if s.sheddingAt(now) {
		t.Fatal("a request refused below the threshold started a cool-off")
	}
	held[19].Done(Ignored)
	cpu.set(0.8)
	if d := s.AcquireAt(now, &p, ""); d.Allowed || d.Reason != Overloaded {
		t.Fatalf("at the threshold with 19 in flight and a bound of 10: %+v, want shed", d)
	}
	if !s.sheddingAt(now) {
		t.Fatal("not shedding after shedding")
	}
	// The CPU falls at once; the cool-off keeps shedding for a second after
	// the last request shed.
	cpu.set(0.1)
	last := now + int64(999*time.Millisecond)
	if d := s.AcquireAt(last, &p, ""); d.Allowed {
		t.Fatal("999ms after shedding, CPU low: allowed within the cool-off")
	}
	if d := s.AcquireAt(last+int64(time.Second), &p, ""); !d.Allowed {
		t.Fatalf("a second after the last shed, CPU low: %v", d.Reason)
	}
	p.Done(Ignored)
	for i := range held {
		held[i].Done(Ignored)
		held[i].Done(Ignored) // a second end counts nothing
	}
	if got := s.inFlight(); got != 0 {
		t.Fatalf("in flight after every request ended: %d", got)
	}
}

// Without a CPU signal the bound holds all the time.
// Without a CPU signal the shedder is never overloaded: it holds twice the
// bound all the time, and its refusals start no cool-off.
func TestShedderWithoutCPUHoldsTwiceTheBound(t *testing.T) {
	s, _ := newTestShedder(t, ShedderSettings{})
	complete(t, s, 0, 20, 10*time.Millisecond) // bound 2
	now := int64(200 * time.Millisecond)
	held := make([]Permit, 5)
	for i := range held {
		if got, want := s.AcquireAt(now, &held[i], "").Allowed, i < 4; got != want {
			t.Fatalf("request %d with a bound of 2 and no CPU: allowed %v, want %v", i, got, want)
		}
	}
	if s.sheddingAt(now) {
		t.Fatal("shedding without a CPU signal")
	}
	// A request that never ran is no sample: the bound stays.
	for i := range held {
		held[i].Done(Ignored)
	}
	if got := s.maxInFlight(now + int64(100*time.Millisecond)); got != 2 {
		t.Fatalf("bound %d, want 2", got)
	}
}

// A window in which nothing completed keeps the bound learnt last: a
// service that stalls is overloaded, not idle.
func TestShedderKeepsItsBoundWhileNothingCompletes(t *testing.T) {
	cpu := new(cpuAt)
	cpu.set(1)
	s, _ := newTestShedder(t, ShedderSettings{CPU: cpu.read, Interval: time.Second, Buckets: 10})
	complete(t, s, 0, 100, 10*time.Millisecond) // bound 10
	for _, at := range []time.Duration{500 * time.Millisecond, 1100 * time.Millisecond, time.Hour} {
		if got := s.maxInFlight(int64(at)); got != 10 {
			t.Fatalf("bound %v on, nothing completed since: %d, want the 10 learnt", at, got)
		}
	}
	admitted := 0
	for range 1000 {
		var p Permit
		if s.AcquireAt(int64(time.Hour), &p, "").Allowed {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("a stalled service at CPU 1: %d admitted, want 10", admitted)
	}
}

// Requests shed in the cool-off, the CPU cool again, do not renew it: a
// moment of hot CPU must not pin the shedder at its bound while traffic
// stays above it.
func TestShedderCoolOffIsNotRenewedByItsOwnSheds(t *testing.T) {
	cpu := new(cpuAt)
	s, _ := newTestShedder(t, ShedderSettings{CPU: cpu.read, CoolOff: time.Second})
	complete(t, s, 0, 100, 10*time.Millisecond) // bound 10
	now := int64(200 * time.Millisecond)
	held := make([]Permit, 12)
	cpu.set(0.95)
	for i := range held {
		s.AcquireAt(now, &held[i], "") // 10 admitted, 2 shed hot
	}
	cpu.set(0.3)
	for t0 := now; t0 < now+int64(900*time.Millisecond); t0 += int64(10 * time.Millisecond) {
		var p Permit
		s.AcquireAt(t0, &p, "") // shed in the cool-off while 10 are in flight
	}
	after := now + int64(time.Second) + int64(100*time.Millisecond)
	if s.sheddingAt(after) {
		t.Fatal("still shedding over a second after the CPU cooled")
	}
	var p Permit
	if !s.AcquireAt(after, &p, "").Allowed {
		t.Fatal("after the cool-off, with 10 in flight and a bound of 10: not admitted up to twice the bound")
	}
}

// A handler of 400 ns is not one of 0: response times are counted to the
// tenth of a microsecond.
func TestShedderBoundHoldsForSubMicrosecondHandlers(t *testing.T) {
	s, _ := newTestShedder(t, ShedderSettings{})
	// 8 at a time, 400 ns each, back to back for 100 ms.
	const width = int64(100 * time.Millisecond)
	for now := int64(0); now < width; now += 400 {
		var ps [8]Permit
		for i := range ps {
			s.AcquireAt(now, &ps[i], "")
		}
		for i := range ps {
			ps[i].DoneAt(now+400, Succeeded)
		}
	}
	if got := s.maxInFlight(width); got != 8 {
		t.Fatalf("bound of 8 at a time, 400 ns each: %d, want 8", got)
	}
}

func TestShedderSettingsErrorsNameTheSetting(t *testing.T) {
	for _, c := range []struct {
		s      ShedderSettings
		option string
	}{
		{ShedderSettings{CPUThreshold: 1.5}, "cpu_threshold"},
		{ShedderSettings{CPUThreshold: -0.1}, "cpu_threshold"},
		{ShedderSettings{CPUThreshold: math.NaN()}, "cpu_threshold"},
		{ShedderSettings{Buckets: 1}, "buckets"},
		{ShedderSettings{Buckets: -3}, "buckets"},
		{ShedderSettings{Interval: time.Microsecond, Buckets: 10}, "interval"},
	} {
		_, err := NewShedder(c.s)
		var ce *configError
		if !errors.As(err, &ce) || ce.Field != c.option {
			t.Errorf("NewShedder(%+v): %v, want a *configError naming %s", c.s, err, c.option)
		}
	}
}

func TestShedderUnderRaceKeepsItsCount(t *testing.T) {
	cpu := new(cpuAt)
	cpu.set(1)
	s, clk := newTestShedder(t, ShedderSettings{CPU: cpu.read})
	complete(t, s, 0, 100, 10*time.Millisecond) // bound 10
	clk.Set(int64(200 * time.Millisecond))
	var inside, peak atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				var p Permit
				if !s.Acquire(&p, "").Allowed {
					continue
				}
				storeMax(&peak, inside.Add(1))
				inside.Add(-1)
				p.Done(Ignored)
			}
		}()
	}
	wg.Wait()
	if peak.Load() > 10 || s.inFlight() != 0 {
		t.Fatalf("peak %d in flight under a bound of 10; %d left in flight", peak.Load(), s.inFlight())
	}
}

func TestShedderDoesNotAllocate(t *testing.T) {
	cpu := new(cpuAt)
	s, _ := newTestShedder(t, ShedderSettings{CPU: cpu.read})
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		var p Permit
		s.AcquireAt(now, &p, "")
		now += int64(time.Millisecond)
		p.DoneAt(now, Succeeded)
	}); n != 0 {
		t.Fatalf("AcquireAt and DoneAt allocate %.1f times", n)
	}
}

// Below half its threshold the shedder caps nothing: requests that wait on
// their clients (slow uploads) hold places without using the CPU, and a
// cap would let them refuse everyone.
func TestShedderBelowHalfItsThresholdCapsNothing(t *testing.T) {
	cpu := new(cpuAt)
	s, _ := newTestShedder(t, ShedderSettings{CPU: cpu.read, CPUThreshold: 0.9})
	complete(t, s, 0, 100, 10*time.Millisecond) // bound: 10
	now := int64(200 * time.Millisecond)
	cpu.set(0.05)
	held := make([]Permit, 1000)
	for i := range held {
		if d := s.AcquireAt(now, &held[i], "slow"); !d.Allowed {
			t.Fatalf("request %d of a slow client refused with the CPU at 5%% and a bound of 10", i+1)
		}
	}
	for _, key := range []string{"", "a", "slow"} {
		var p Permit
		if d := s.AcquireAt(now, &p, key); !d.Allowed {
			t.Fatalf("key %q refused with the CPU at 5%% and 1,000 slow requests in flight", key)
		}
		p.Done(Ignored)
	}
	// Warm (half the threshold or more): twice the bound, shared.
	cpu.set(0.5)
	var p Permit
	if d := s.AcquireAt(now, &p, "slow"); d.Allowed {
		t.Fatal("the slow key admitted over twice the bound with the CPU warm")
	}
	for i := range held {
		held[i].DoneAt(now+int64(time.Millisecond), Succeeded)
	}
}

// At the bound, the places are shared among keys: a key that filled the
// bound alone is refused, the others get their shares.
func TestShedderSharesItsBoundAmongKeys(t *testing.T) {
	cpu := new(cpuAt)
	s, _ := newTestShedder(t, ShedderSettings{CPU: cpu.read})
	complete(t, s, 0, 200, 10*time.Millisecond) // bound: 20
	now := int64(200 * time.Millisecond)
	cpu.set(0.95)
	held := make([]Permit, 20)
	for i := range held {
		if !s.AcquireAt(now, &held[i], "slow").Allowed {
			t.Fatalf("request %d of a key alone refused under the bound", i+1)
		}
	}
	var p Permit
	if d := s.AcquireAt(now, &p, "slow"); d.Allowed || d.Reason != Overloaded {
		t.Fatalf("a key alone over the bound: %+v, want shed", d)
	}
	for _, key := range apart(s.fair, 3, "slow") {
		for i := range 4 { // 4 busy keys in at most 8 lanes: a share of at least ⌈20/8⌉ = 3 in each of a key's two lanes
			now += recount // a millisecond apart: the busy lanes counted afresh
			var p Permit
			if d := s.AcquireAt(now, &p, key); !d.Allowed {
				t.Fatalf("key %s refused its request %d: below its share at the bound", key, i+1)
			}
		}
	}
	if s.inFlight() > 40 {
		t.Fatalf("%d in flight, over twice the bound", s.inFlight())
	}
}
