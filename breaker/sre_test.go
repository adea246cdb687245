package breaker

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// fixedRandom is a random source that always returns the same value.
type fixedRandom struct{ x float64 }

func (f *fixedRandom) next() float64 { return f.x }

func newSRE(t *testing.T, opts ...Option) (*SRE, *clock.Manual, *fixedRandom) {
	t.Helper()
	clk := clock.NewManual(0)
	r := &fixedRandom{x: 0.999999}
	a, err := NewSRE(append([]Option{WithClock(clk), withRandom(r.next)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return a, clk, r
}

// outcomes settles s successes and f failures at the clock's time.
func outcomes(t *testing.T, a *SRE, s, f int) {
	t.Helper()
	for i := 0; i < s+f; i++ {
		p, err := a.Allow()
		if err != nil {
			t.Fatalf("request blocked: %v", err)
		}
		if i < s {
			p.settle(Success)
		} else {
			p.settle(Failure)
		}
	}
}

func TestSREBlockRatioFollowsTheSREFormula(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         []Option
		s, f, blocks int
		want         float64
	}{
		{"healthy", nil, 100, 0, 0, 0},
		{"within K", nil, 50, 50, 0, 0},                            // 100 - 5 - 2·50 < 0
		{"all failing", nil, 0, 100, 0, 95.0 / 101},                // (100 - 5) / 101
		{"some succeeded", nil, 10, 90, 0, (100 - 5 - 20.0) / 101}, // K·successes taken off
		{"K 1.5", []Option{withK(1.5)}, 30, 70, 0, (100 - 5 - 45.0) / 101},
		{"no protection", []Option{withProtection(0)}, 0, 1, 0, 0.5},
		{"protection spares a few", []Option{withProtection(10)}, 0, 10, 0, 0},
		{"below the minimum volume", []Option{WithMinRequests(101)}, 0, 100, 0, 0},
		{"at the minimum volume", []Option{WithMinRequests(100)}, 0, 100, 0, 95.0 / 101},
		{"blocks counted while failing", nil, 0, 10, 40, (50 - 5.0) / 51},
		{"blocks not counted once nothing fails", nil, 20, 0, 40, 0},
		{"CountBlocks counts them always", []Option{WithBlockPolicy(CountBlocks)}, 20, 0, 40, (60 - 5 - 40.0) / 61},
		{"IgnoreBlocks never", []Option{WithBlockPolicy(IgnoreBlocks)}, 0, 10, 40, (10 - 5.0) / 11},
		{"blocks do not count toward the volume", []Option{WithMinRequests(11)}, 0, 10, 40, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _, r := newSRE(t, tc.opts...)
			outcomes(t, a, tc.s, tc.f)
			now := a.clock.Now()
			for i := 0; i < tc.blocks; i++ {
				a.block(now) // as Allow blocks
			}
			got := a.Stats().BlockRatio
			if math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("block ratio = %v, want %v", got, tc.want)
			}
			if s := a.Stats(); s.BlockRatio != got || s.Successes != int64(tc.s) || s.Failures != int64(tc.f) ||
				s.Requests != int64(tc.s+tc.f) || s.Blocked != int64(tc.blocks) || (s.State == Open) != (got > 0) {
				t.Fatalf("stats = %+v", s)
			}
			// A request is blocked exactly when the random draw is below the
			// ratio.
			r.x = got
			if _, err := a.Allow(); err != nil {
				t.Fatalf("draw equal to the ratio blocked the request: %v", err)
			}
			if got > 0 {
				r.x = math.Nextafter(got, 0)
				if _, err := a.Allow(); !errors.Is(err, ErrBlocked) {
					t.Fatalf("draw below the ratio: %v, want ErrBlocked", err)
				}
				if s := a.Stats(); s.Blocked != int64(tc.blocks)+1 {
					t.Fatalf("a blocked request was not counted: %+v", s)
				}
			}
		})
	}
}

func TestSREHealthyWindowDrawsNothing(t *testing.T) {
	clk := clock.NewManual(0)
	a, err := NewSRE(WithClock(clk), withProtection(0), withRandom(func() float64 {
		t.Fatal("the random source was drawn from while nothing failed")
		return 0
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if err := a.Do(bg, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Millisecond)
	}
}

func TestSREFailuresLeaveTheWindow(t *testing.T) {
	// 1 s window in 4 buckets of 250 ms: failures at t = 0 leave at 1 s.
	a, clk, _ := newSRE(t, WithWindow(4, time.Second), withProtection(0))
	outcomes(t, a, 0, 10)
	clk.Set(999 * ms)
	if r := a.Stats().BlockRatio; r != 10.0/11 {
		t.Fatalf("block ratio at 999 ms = %v, want 10/11", r)
	}
	clk.Set(1000 * ms)
	if r := a.Stats().BlockRatio; r != 0 {
		t.Fatalf("block ratio at 1 s = %v, want 0", r)
	}
	if s := a.current(); s != Closed {
		t.Fatalf("state = %v, want closed", s)
	}
}

func TestSRECountsTheCurrentBucketAtOnce(t *testing.T) {
	a, clk, _ := newSRE(t, WithWindow(4, time.Second), withProtection(0))
	clk.Set(300 * ms)
	outcomes(t, a, 0, 1)
	if r := a.Stats().BlockRatio; r != 0.5 {
		t.Fatalf("block ratio = %v, want 0.5", r)
	}
	clk.Set(600 * ms) // the failure's bucket is now in the base
	outcomes(t, a, 1, 1)
	if r := a.Stats().BlockRatio; r != (3-2.0)/4 {
		t.Fatalf("block ratio = %v, want 1/4", r)
	}
}

func TestSREDoCountsOutcomes(t *testing.T) {
	a, _, _ := newSRE(t, WithOutcomeOf(excluding(func(err error) bool { return errors.Is(err, errExcluded) })))
	boom := errors.New("boom")
	_ = a.Do(bg, func() error { return nil })
	_ = a.Do(bg, func() error { return boom })
	_ = a.Do(bg, func() error { return errExcluded })
	if s := a.Stats(); s.Successes != 1 || s.Failures != 1 {
		t.Fatalf("stats = %+v, want 1 success and 1 failure", s)
	}
}

// StateAt and StatsAt read the window at the time given, not at the clock's.
func TestSREStateAtReadsTheGivenTime(t *testing.T) {
	a, clk, _ := newSRE(t, WithWindow(4, time.Second), withProtection(0))
	outcomes(t, a, 0, 10) // at 0
	for _, tc := range []struct {
		at   int64
		want State
	}{{0, Open}, {999 * ms, Open}, {1000 * ms, Closed}, {5000 * ms, Closed}, {500 * ms, Open}} {
		if got := a.StatsAt(tc.at).State; got != tc.want {
			t.Errorf("StateAt(%v) = %v, want %v", time.Duration(tc.at), got, tc.want)
		}
		if got := a.StatsAt(tc.at).State; got != tc.want {
			t.Errorf("StatsAt(%v).State = %v, want %v", time.Duration(tc.at), got, tc.want)
		}
	}
	if clk.Now() != 0 {
		t.Fatal("the clock moved")
	}
	clk.Set(1000 * ms)
	if a.current() != Closed {
		t.Fatalf("State() at 1 s = %v, want closed", a.current())
	}
}

// Once a request has succeeded after the latest failure, and nothing failed
// for a tenth of the window, the block ratio falls in step with the time
// since that failure: a bucket ahead, to 0 a bucket before the failure
// leaves the window. The breaker lets the load back over one window. A new
// failure stops the ramp. The other policies, the formula as it stands, do
// not ramp.
func TestSREBlockRatioRampsDownOnceTheDependencyIsBack(t *testing.T) {
	const s = int64(time.Second)
	for _, tc := range []struct {
		policy BlockPolicy
		ramps  bool
	}{{CountBlocksWhileFailing, true}, {IgnoreBlocks, false}, {CountBlocks, false}} {
		t.Run(policyNames[tc.policy], func(t *testing.T) {
			a, clk, _ := newSRE(t, withProtection(0), WithBlockPolicy(tc.policy))
			outcomes(t, a, 0, 10) // at 0: the window's ratio is 10/11
			clk.Set(500 * ms)
			if r := a.Stats().BlockRatio; r != 10.0/11 {
				t.Fatalf("before any success: block ratio %v, want 10/11", r)
			}
			outcomes(t, a, 1, 0) // at 0.5 s: the window's ratio is (11 - 2)/12
			window := 9.0 / 12
			for _, at := range []int64{500 * ms, 999 * ms, 1 * s, 2500 * ms, 5 * s, 9 * s, 9749 * ms, 9750 * ms, 9999 * ms} {
				want := window
				if tc.ramps && at >= 1*s { // nothing failed for 1 s: the ramp
					want *= float64(max(9750*ms-at, 0)) / float64(10*s)
				}
				if r := a.StatsAt(at).BlockRatio; math.Abs(r-want) > 1e-12 {
					t.Errorf("block ratio at %v = %v, want %v", time.Duration(at), r, want)
				}
				if r := a.StatsAt(at).BlockRatio; math.Abs(r-want) > 1e-12 {
					t.Errorf("Stats at %v: block ratio %v, want %v", time.Duration(at), r, want)
				}
			}
			if r := a.StatsAt(10 * s).BlockRatio; r != 0 {
				t.Errorf("block ratio once the failures left the window = %v, want 0", r)
			}
			clk.Set(5 * s)
			outcomes(t, a, 0, 1) // a failure at 5 s stops the ramp
			if r, want := a.Stats().BlockRatio, (12-2.0)/13; math.Abs(r-want) > 1e-12 {
				t.Errorf("after a new failure: block ratio %v, want the window's %v", r, want)
			}
			clk.Set(5*s + 999*ms)
			outcomes(t, a, 1, 0) // a success, but the failure is not 1 s old
			if r, want := a.Stats().BlockRatio, (13-4.0)/14; math.Abs(r-want) > 1e-12 {
				t.Errorf("a success 999 ms after a failure: block ratio %v, want the window's %v", r, want)
			}
		})
	}
}

// While an SRE breaker blocks every request it draws for, it still lets
// one through when none went through for a tenth of its window (a second by
// default), so that it learns when the dependency is back.
func TestSRELetsAProbeThroughWhenNoneWentThroughForATenthOfItsWindow(t *testing.T) {
	a, clk, r := newSRE(t, withProtection(0))
	outcomes(t, a, 0, 1) // at 0: a block ratio of 1/2
	r.x = 0              // every draw blocks
	var passed []int64
	for now := int64(0); now < 5500*ms; now += 10 * ms {
		clk.Set(now)
		if p, err := a.Allow(); err == nil {
			passed = append(passed, now)
			p.settle(Failure)
		}
	}
	want := []int64{1000 * ms, 2000 * ms, 3000 * ms, 4000 * ms, 5000 * ms}
	if fmt.Sprint(passed) != fmt.Sprint(want) {
		t.Fatalf("requests let through at %v, want one a second: %v", passed, want)
	}
	// A probe is due 1 s after the last request let through, whoever asks.
	if _, err := a.AllowAt(5999 * ms); !errors.Is(err, ErrBlocked) {
		t.Fatalf("at 5.999 s: %v, want ErrBlocked", err)
	}
	if _, err := a.AllowAt(6000 * ms); err != nil {
		t.Fatalf("at 6 s: %v, want a probe", err)
	}
}
