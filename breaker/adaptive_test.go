package breaker

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// fixedRandom is a random source that always returns the same value.
type fixedRandom struct{ x float64 }

func (f *fixedRandom) next() float64 { return f.x }

func newAdaptive(t *testing.T, opts ...Option) (*Adaptive, *clock.Manual, *fixedRandom) {
	t.Helper()
	clk := clock.NewManual(0)
	r := &fixedRandom{x: 0.999999}
	a, err := NewAdaptive(append([]Option{WithClock(clk), WithRandom(r.next)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return a, clk, r
}

// outcomes settles s successes and f failures at the clock's time.
func outcomes(t *testing.T, a *Adaptive, s, f int) {
	t.Helper()
	for i := 0; i < s+f; i++ {
		p, err := a.Allow()
		if err != nil {
			t.Fatalf("request blocked: %v", err)
		}
		if i < s {
			p.Succeed()
		} else {
			p.Fail()
		}
	}
}

func TestAdaptiveBlockRatioFollowsTheSREFormula(t *testing.T) {
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
		{"K 1.5", []Option{WithK(1.5)}, 30, 70, 0, (100 - 5 - 45.0) / 101},
		{"no protection", []Option{WithProtection(0)}, 0, 1, 0, 0.5},
		{"protection spares a few", []Option{WithProtection(10)}, 0, 10, 0, 0},
		{"below the minimum volume", []Option{WithMinRequests(101)}, 0, 100, 0, 0},
		{"at the minimum volume", []Option{WithMinRequests(100)}, 0, 100, 0, 95.0 / 101},
		{"blocks counted while failing", nil, 0, 10, 40, (50 - 5.0) / 51},
		{"blocks not counted once nothing fails", nil, 20, 0, 40, 0},
		{"CountBlocks counts them always", []Option{WithBlockPolicy(CountBlocks)}, 20, 0, 40, (60 - 5 - 40.0) / 61},
		{"IgnoreBlocks never", []Option{WithBlockPolicy(IgnoreBlocks)}, 0, 10, 40, (10 - 5.0) / 11},
		{"blocks do not count toward the volume", []Option{WithMinRequests(11)}, 0, 10, 40, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _, r := newAdaptive(t, tc.opts...)
			outcomes(t, a, tc.s, tc.f)
			now := a.clock.Now()
			for i := 0; i < tc.blocks; i++ {
				a.block(now) // as Allow blocks
			}
			got := a.BlockRatio()
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

func TestAdaptiveHealthyWindowDrawsNothing(t *testing.T) {
	clk := clock.NewManual(0)
	a, err := NewAdaptive(WithClock(clk), WithProtection(0), WithRandom(func() float64 {
		t.Fatal("the random source was drawn from while nothing failed")
		return 0
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if err := a.Do(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Millisecond)
	}
}

func TestAdaptiveFailuresLeaveTheWindow(t *testing.T) {
	// 1 s window in 4 buckets of 250 ms: failures at t = 0 leave at 1 s.
	a, clk, _ := newAdaptive(t, WithWindow(4, time.Second), WithProtection(0))
	outcomes(t, a, 0, 10)
	clk.Set(999 * ms)
	if r := a.BlockRatio(); r != 10.0/11 {
		t.Fatalf("block ratio at 999 ms = %v, want 10/11", r)
	}
	clk.Set(1000 * ms)
	if r := a.BlockRatio(); r != 0 {
		t.Fatalf("block ratio at 1 s = %v, want 0", r)
	}
	if s := a.State(); s != Closed {
		t.Fatalf("state = %v, want closed", s)
	}
}

func TestAdaptiveCountsTheCurrentBucketAtOnce(t *testing.T) {
	a, clk, _ := newAdaptive(t, WithWindow(4, time.Second), WithProtection(0))
	clk.Set(300 * ms)
	outcomes(t, a, 0, 1)
	if r := a.BlockRatio(); r != 0.5 {
		t.Fatalf("block ratio = %v, want 0.5", r)
	}
	clk.Set(600 * ms) // the failure's bucket is now in the base
	outcomes(t, a, 1, 1)
	if r := a.BlockRatio(); r != (3-2.0)/4 {
		t.Fatalf("block ratio = %v, want 1/4", r)
	}
}

func TestAdaptiveDoCountsOutcomes(t *testing.T) {
	a, _, _ := newAdaptive(t, WithIsExcluded(func(err error) bool { return errors.Is(err, errExcluded) }))
	boom := errors.New("boom")
	_ = a.Do(func() error { return nil })
	_ = a.Do(func() error { return boom })
	_ = a.Do(func() error { return errExcluded })
	_ = a.DoWithAcceptable(func() error { return boom }, func(err error) bool { return errors.Is(err, boom) })
	_ = a.DoWithFallbackAcceptable(func() error { return nil }, nil, func(err error) bool { return false })
	if s := a.Stats(); s.Successes != 2 || s.Failures != 2 {
		t.Fatalf("stats = %+v, want 2 successes and 2 failures", s)
	}
}

// StateAt and StatsAt read the window at the time given, not at the clock's.
func TestAdaptiveStateAtReadsTheGivenTime(t *testing.T) {
	a, clk, _ := newAdaptive(t, WithWindow(4, time.Second), WithProtection(0))
	outcomes(t, a, 0, 10) // at 0
	for _, tc := range []struct {
		at   int64
		want State
	}{{0, Open}, {999 * ms, Open}, {1000 * ms, Closed}, {5000 * ms, Closed}, {500 * ms, Open}} {
		if got := a.StateAt(tc.at); got != tc.want {
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
	if a.State() != Closed {
		t.Fatalf("State() at 1 s = %v, want closed", a.State())
	}
}
