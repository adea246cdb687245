package breaker

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

const ms = int64(time.Millisecond)

func newCircuit(t *testing.T, s Strategy, opts ...Option) (*Circuit, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(0)
	c, err := NewCircuit(s, append([]Option{WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.closeListener)
	return c, clk
}

// settle allows one request at the clock's time and settles it with o,
// failing the test if the circuit blocks it.
func settle(t *testing.T, c *Circuit, o Outcome) {
	t.Helper()
	p, err := c.Allow()
	if err != nil {
		t.Fatalf("request blocked in state %v: %v", c.current(), err)
	}
	p.recordAt(c.clock.Now(), o)
}

func mustState(t *testing.T, c *Circuit, want State) {
	t.Helper()
	if got := c.current(); got != want {
		t.Fatalf("state = %v, want %v", got, want)
	}
}

// trip opens a closed circuit with an error ratio strategy and minimum volume
// 1 by failing one request.
func trip(t *testing.T, c *Circuit) {
	t.Helper()
	settle(t, c, Failure)
	mustState(t, c, Open)
}

func TestCircuitOpensExactlyAtTheErrorRatio(t *testing.T) {
	for _, tc := range []struct {
		name              string
		successes, errors int
		want              State
	}{
		{"below the ratio", 6, 4, Closed}, // 0.4 of 10
		{"at the ratio", 7, 3, Open},      // 0.3 of 10
		{"above the ratio", 5, 5, Open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newCircuit(t, ErrorRatio(0.3), WithMinRequests(10))
			if tc.want == Closed {
				c, _ = newCircuit(t, ErrorRatio(0.41), WithMinRequests(10))
			}
			for i := 0; i < tc.successes; i++ {
				settle(t, c, Success)
			}
			for i := 0; i < tc.errors; i++ {
				mustState(t, c, Closed)
				settle(t, c, Failure)
			}
			mustState(t, c, tc.want)
		})
	}
}

func TestCircuitNeedsTheMinimumVolume(t *testing.T) {
	c, _ := newCircuit(t, ErrorRatio(0.5), WithMinRequests(5))
	for i := 0; i < 4; i++ { // 4 failures of 4 requests: ratio 1, volume 4
		settle(t, c, Failure)
		mustState(t, c, Closed)
	}
	settle(t, c, Failure) // the fifth reaches the volume
	mustState(t, c, Open)
}

func TestCircuitOpensOnAFailureNotOnASuccess(t *testing.T) {
	// 4 failures below a volume of 5; a fifth request that succeeds makes
	// the window meet the strategy (4 of 5 ≥ 0.5), but the strategy is
	// checked when a failure ends, so the circuit opens on the next failure.
	c, _ := newCircuit(t, ErrorRatio(0.5), WithMinRequests(5))
	for i := 0; i < 4; i++ {
		settle(t, c, Failure)
	}
	settle(t, c, Success)
	mustState(t, c, Closed)
	settle(t, c, Failure)
	mustState(t, c, Open)
	if s := c.Stats(); s.Requests != 6 || s.Failures != 5 {
		t.Fatalf("stats = %+v, want 6 requests, 5 failures", s)
	}
}

func TestCircuitOpensAtTheErrorCount(t *testing.T) {
	c, _ := newCircuit(t, ErrorCount(3), WithMinRequests(1))
	for i := 0; i < 100; i++ {
		settle(t, c, Success)
	}
	settle(t, c, Failure)
	settle(t, c, Failure)
	mustState(t, c, Closed)
	settle(t, c, Failure)
	mustState(t, c, Open)
}

func TestCircuitSlowRatioCountsOnlyRequestsSlowerThanMaxRT(t *testing.T) {
	c, clk := newCircuit(t, SlowRatio(100*time.Millisecond, 0.5), WithMinRequests(4))
	run := func(rt time.Duration, o Outcome) {
		t.Helper()
		p, err := c.Allow()
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(rt)
		p.recordAt(clk.Now(), o)
	}
	run(100*time.Millisecond, Success) // exactly maxRT: not slow
	run(100*time.Millisecond, Failure) // errors do not count against SlowRatio
	run(101*time.Millisecond, Success) // slow: 1 of 3, below the volume
	mustState(t, c, Closed)
	run(time.Millisecond, Success) // volume 4, still 1 slow
	run(150*time.Millisecond, Success)
	// 2 slow of 5 = 0.4 < 0.5
	mustState(t, c, Closed)
	run(150*time.Millisecond, Failure) // 3 of 6 = 0.5
	mustState(t, c, Open)
	if s := c.Stats(); s.Slow != 3 || s.Requests != 6 || s.Failures != 2 {
		t.Fatalf("stats = %+v, want 3 slow of 6 requests, 2 failures", s)
	}
}

func TestCircuitWindowSlides(t *testing.T) {
	// A 1 s window in 10 buckets: failures leave it bucket by bucket.
	c, clk := newCircuit(t, ErrorCount(3), WithWindow(10, time.Second), WithMinRequests(1))
	settle(t, c, Failure) // t = 0
	clk.Advance(500 * time.Millisecond)
	settle(t, c, Failure) // t = 500 ms
	clk.Set(999 * ms)
	if s := c.Stats(); s.Failures != 2 {
		t.Fatalf("failures at 999 ms = %d, want 2", s.Failures)
	}
	clk.Set(1000 * ms) // the first bucket has left the window
	if s := c.Stats(); s.Failures != 1 {
		t.Fatalf("failures at 1 s = %d, want 1", s.Failures)
	}
	settle(t, c, Failure)
	mustState(t, c, Closed) // 2 in the window
	settle(t, c, Failure)
	mustState(t, c, Open)
}

func TestCircuitStaysOpenUntilExactlyTheTimeout(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithOpenTimeout(time.Second, 0))
	clk.Set(10 * ms)
	trip(t, c)
	clk.Set(10*ms + 999*ms + 999_999)
	if _, err := c.Allow(); !errors.Is(err, ErrBlocked) || errors.Is(err, errProbesBusy) {
		t.Fatalf("1 ns before the timeout: err = %v, want ErrBlocked", err)
	}
	if s := c.Stats(); s.RetryAfter != 1 || s.Blocked != 1 || s.BlockRatio != 1 {
		t.Fatalf("stats 1 ns before the timeout = %+v, want RetryAfter 1ns, 1 blocked, block ratio 1", s)
	}
	clk.Set(10*ms + 1000*ms)
	p, err := c.Allow()
	if err != nil {
		t.Fatalf("at the timeout: %v, want a probe", err)
	}
	mustState(t, c, HalfOpen)
	p.settle(Success)
	mustState(t, c, Closed)
}

// Regression tests from a review of the package.

// A Circuit that trips at a negative clock reading half-opens on time.
func TestCircuitTrippedAtANegativeTimeHalfOpensOnTime(t *testing.T) {
	clk := clock.NewManual(-int64(time.Hour))
	c, err := NewCircuit(ErrorRatio(0.5), WithClock(clk), WithMinRequests(1), WithOpenTimeout(time.Second, 0))
	if err != nil {
		t.Fatal(err)
	}
	trip(t, c)
	if s := c.Stats(); s.RetryAfter != time.Second {
		t.Fatalf("RetryAfter = %v, want 1s", s.RetryAfter)
	}
	clk.Advance(time.Second)
	if _, err := c.Allow(); err != nil {
		t.Fatalf("at the open timeout: %v, want a probe", err)
	}
}

func TestCircuitBacksOffExponentially(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1),
		WithOpenTimeout(time.Second, 5*time.Second))
	trip(t, c)
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		opened := clk.Now()
		if s := c.Stats(); s.RetryAfter != want {
			t.Fatalf("open for %v, want %v", s.RetryAfter, want)
		}
		clk.Set(opened + int64(want) - 1)
		if _, err := c.Allow(); !errors.Is(err, ErrBlocked) {
			t.Fatalf("before %v: %v, want ErrBlocked", want, err)
		}
		clk.Set(opened + int64(want))
		settle(t, c, Failure) // the probe fails: open again, for longer
		mustState(t, c, Open)
	}
	// A success closes the circuit and resets the timeout.
	clk.Advance(5 * time.Second)
	settle(t, c, Success)
	mustState(t, c, Closed)
	trip(t, c)
	if s := c.Stats(); s.RetryAfter != time.Second {
		t.Fatalf("after closing, open for %v, want 1s", s.RetryAfter)
	}
}

func TestCircuitBackoffDoesNotOverflow(t *testing.T) {
	c, _ := newCircuit(t, ErrorRatio(0.5), WithOpenTimeout(time.Second, time.Duration(1<<62)))
	for _, n := range []uint32{0, 1, 61, 62, 63, 64, 1000} {
		d := c.th.Load().openTimeoutAfter(n)
		if d < time.Second || d > time.Duration(1<<62) {
			t.Fatalf("open timeout after %d failures = %v, out of [1s, max]", n, d)
		}
	}
	if d := c.th.Load().openTimeoutAfter(1000); d != time.Duration(1<<62) {
		t.Fatalf("open timeout after 1000 failures = %v, want the maximum", d)
	}
}

func TestCircuitIgnoresResultsFromEarlierGenerations(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1))
	old, _ := c.Allow() // allowed while closed, generation 0
	trip(t, c)
	old.settle(Failure) // must not count in the open window
	if s := c.Stats(); s.Failures != 1 {
		t.Fatalf("failures = %d, want 1", s.Failures)
	}
	clk.Advance(c.Stats().RetryAfter)
	probe, _ := c.Allow()
	old.settle(Success) // must not close the half-open circuit
	mustState(t, c, HalfOpen)
	probe.settle(Success)
	mustState(t, c, Closed)
	old.settle(Failure) // must not count in the new window
	if s := c.Stats(); s.Requests != 0 {
		t.Fatalf("stats = %+v, want an empty window", s)
	}
}

func TestCircuitCountsBlockedRequests(t *testing.T) {
	c, _ := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1))
	trip(t, c)
	for i := 0; i < 5; i++ {
		if _, err := c.Allow(); !errors.Is(err, ErrBlocked) {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Blocked != 5 || s.State != Open || s.Generation != 1 {
		t.Fatalf("stats = %+v, want 5 blocked, open, generation 1", s)
	}
}

func TestCircuitHugeOpenTimeoutStaysOpen(t *testing.T) {
	c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1), WithOpenTimeout(time.Duration(math.MaxInt64), 0))
	clk.Advance(time.Second)
	trip(t, c)
	if _, err := c.Allow(); !errors.Is(err, ErrBlocked) {
		t.Fatalf("an open timeout of MaxInt64 allowed a probe: %v", err)
	}
}

// After an outage of any length, a Circuit closes at most one (backed-off)
// open timeout after the dependency recovers, plus the time its probes take.
func TestCircuitRecoversWithinTheLongestOpenTimeout(t *testing.T) {
	const maxOpen = 8 * time.Second
	for _, outage := range []time.Duration{time.Second, 7 * time.Second, 30 * time.Second, 5 * time.Minute} {
		c, clk := newCircuit(t, ErrorRatio(0.5), WithMinRequests(10),
			WithOpenTimeout(time.Second, maxOpen), WithProbes(3, time.Second))
		start, recovered := 10*time.Second, 10*time.Second+outage
		step := 10 * time.Millisecond // 100 requests per second, each taking 5 ms
		closedAt := time.Duration(-1)
		for now := time.Duration(0); now < recovered+maxOpen+time.Minute; now += step {
			clk.Set(int64(now))
			p, err := c.Allow()
			if err != nil {
				continue
			}
			clk.Advance(5 * time.Millisecond)
			if now >= start && now < recovered {
				p.settle(Failure)
			} else {
				p.settle(Success)
			}
			if now >= recovered && closedAt < 0 && c.current() == Closed {
				closedAt = now - recovered
			}
		}
		if closedAt < 0 || closedAt > maxOpen+3*step {
			t.Errorf("outage of %v: closed %v after the dependency recovered, want at most %v", outage, closedAt, maxOpen+3*step)
		}
		if c.current() != Closed {
			t.Errorf("outage of %v: %v at the end", outage, c.current())
		}
	}
}

func TestWithWindowKeepsTheDefaultOfWhatIsZero(t *testing.T) {
	clk := clock.NewManual(0)
	// 1 s in the Circuit's default 10 buckets of 100 ms: a failure at
	// 50 ms has left the window at 1.1 s.
	c, err := NewCircuit(ErrorCount(100), WithClock(clk), WithWindow(0, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(50 * time.Millisecond)
	p, _ := c.Allow()
	p.settle(Failure)
	if s := c.Stats(); s.Failures != 1 {
		t.Fatalf("stats = %+v, want the failure", s)
	}
	clk.Advance(1050 * time.Millisecond)
	if s := c.Stats(); s.Failures != 0 {
		t.Fatalf("stats at 1.1 s = %+v, want the window of 1 s", s)
	}
	// 10 s (the default) in 5 buckets of 2 s.
	c, err = NewCircuit(ErrorCount(100), WithClock(clk), WithWindow(5, 0))
	if err != nil {
		t.Fatal(err)
	}
	p, _ = c.Allow()
	p.settle(Failure)
	clk.Advance(8 * time.Second) // the window [0 s, 10 s) holds 1.15 s
	if s := c.Stats(); s.Failures != 1 {
		t.Fatalf("stats 8 s later = %+v, want the failure still in a window of 10 s", s)
	}
}

// The zero Circuit is not usable, but misusing it does not panic far from the
// mistake: it allows requests, and settling them counts nothing and changes
// nothing.
func TestZeroCircuitAllowsAndCountsNothing(t *testing.T) {
	var c Circuit
	p, err := c.Allow()
	if err != nil {
		t.Fatalf("Allow: %v", err)
	}
	p.settle(Success)
	p.settle(Failure)
	p.Done(errors.New("x"))
	p.recordAt(0, Failure)
	if c.state.Load() != 0 || c.stats.Load() != nil || c.current() != Closed {
		t.Fatalf("the zero Circuit changed: state word %d, window %v", c.state.Load(), c.stats.Load())
	}
}
