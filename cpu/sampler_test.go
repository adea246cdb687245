package cpu

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// newTestSampler returns a Sampler over the tree of "v2 with a limit" (2
// CPUs) on a manual clock, and a function that adds CPU time to the tree.
func newTestSampler(t *testing.T, opts ...Option) (*Sampler, *clock.Manual, func(time.Duration)) {
	t.Helper()
	c := treeCases[0]
	tree := c.build()
	clk := clock.NewManual(int64(time.Hour))
	s, err := NewSampler(append([]Option{withRoot(tree), withHostCPUs(c.hostCPUs), WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var used time.Duration
	return s, clk, func(d time.Duration) { used += d; c.usage(tree, used) }
}

// TestOverloadShowsWithinOneSecond: from idle to every CPU busy, Usage
// passes 0.9 within a second of 250 ms samples, and follows the moving
// average 1 - e^(-t/τ) on the way.
func TestOverloadShowsWithinOneSecond(t *testing.T) {
	s, _, use := newTestSampler(t)
	now := int64(time.Hour)
	step := int64(defaultInterval)
	// Idle for a while.
	for range 8 {
		now += step
		if err := s.sampleAt(now); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Usage(); got != 0 {
		t.Fatalf("Usage() idle = %v, want 0", got)
	}
	// Then both CPUs busy.
	for i := 1; i <= 4; i++ {
		use(2 * defaultInterval)
		now += step
		if err := s.sampleAt(now); err != nil {
			t.Fatal(err)
		}
		elapsed := float64(time.Duration(i) * defaultInterval)
		want := 1 - math.Exp(-elapsed/float64(defaultSmoothing))
		if got := s.Usage(); math.Abs(got-want) > 1e-9 {
			t.Fatalf("Usage() %v after the step = %v, want %v", time.Duration(elapsed), got, want)
		}
	}
	if got := s.Usage(); got < 0.9 {
		t.Fatalf("Usage() one second into full load = %v, want at least 0.9", got)
	}
}

// TestIrregularSamplesWeighByTime: under steady load, one 750 ms sample
// moves the average exactly as far as three 250 ms samples do, because each
// sample's weight is 1 - e^(-elapsed/τ).
func TestIrregularSamplesWeighByTime(t *testing.T) {
	a, _, useA := newTestSampler(t)
	b, _, useB := newTestSampler(t)
	start := int64(time.Hour)
	quarter := int64(250 * time.Millisecond)
	// An idle quarter first, so that both averages start from 0.
	for _, s := range []*Sampler{a, b} {
		if err := s.sampleAt(start + quarter); err != nil {
			t.Fatal(err)
		}
	}
	useA(750 * time.Millisecond) // half of 2 CPUs for 750 ms
	if err := a.sampleAt(start + 4*quarter); err != nil {
		t.Fatal(err)
	}
	for i := int64(2); i <= 4; i++ {
		useB(250 * time.Millisecond)
		if err := b.sampleAt(start + i*quarter); err != nil {
			t.Fatal(err)
		}
	}
	want := 0.5 * (1 - math.Exp(-float64(750*time.Millisecond)/float64(defaultSmoothing)))
	if got := a.Usage(); math.Abs(got-want) > 1e-9 {
		t.Errorf("one 750 ms sample: Usage() = %v, want %v", got, want)
	}
	if got := b.Usage(); math.Abs(got-want) > 1e-9 {
		t.Errorf("three 250 ms samples: Usage() = %v, want %v", got, want)
	}
}

// TestFirstShareSeedsTheAverage: the first measured share is taken whole,
// so a process that starts under load does not report a slow ramp from 0.
func TestFirstShareSeedsTheAverage(t *testing.T) {
	s, _, use := newTestSampler(t)
	use(time.Second)
	if err := s.sampleAt(int64(time.Hour) + int64(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := s.Usage(); math.Abs(got-0.5) > 1e-9 {
		t.Fatalf("Usage() = %v, want 0.5", got)
	}
}

func TestShareIsClampedAndResetsAreSkipped(t *testing.T) {
	s, _, use := newTestSampler(t, WithSmoothing(0))
	now := int64(time.Hour)
	// 3 CPU-seconds in a second on 2 CPUs: skew, reported as 1.
	use(3 * time.Second)
	now += int64(time.Second)
	if err := s.sampleAt(now); err != nil {
		t.Fatal(err)
	}
	if got := s.Usage(); got != 1 {
		t.Fatalf("Usage() over capacity = %v, want 1", got)
	}
	// The cgroup is made again: its CPU time starts from 0.
	use(-3 * time.Second)
	now += int64(time.Second)
	if err := s.sampleAt(now); err != nil {
		t.Fatal(err)
	}
	if got := s.Usage(); got != 1 {
		t.Fatalf("Usage() after a reset = %v, want the last value 1", got)
	}
	use(500 * time.Millisecond)
	now += int64(time.Second)
	if err := s.sampleAt(now); err != nil {
		t.Fatal(err)
	}
	if got := s.Usage(); math.Abs(got-0.25) > 1e-9 {
		t.Fatalf("Usage() a second after the reset = %v, want 0.25", got)
	}
	// A clock that did not move: ignored, not a division by zero.
	if err := s.sampleAt(now); err != nil {
		t.Fatal(err)
	}
	if got := s.Usage(); math.Abs(got-0.25) > 1e-9 {
		t.Fatalf("Usage() after a sample at the same time = %v, want 0.25", got)
	}
}

func TestFailedSampleKeepsTheLastValues(t *testing.T) {
	c := treeCases[0]
	tree := c.build()
	s, err := NewSampler(withRoot(tree), withHostCPUs(8), WithClock(clock.NewManual(1)), WithSmoothing(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c.usage(tree, time.Second)
	if err := s.sampleAt(1 + int64(time.Second)); err != nil {
		t.Fatal(err)
	}
	delete(tree, "sys/fs/cgroup/app.slice/app.service/cpu.stat")
	if err := s.sampleAt(1 + 2*int64(time.Second)); err == nil || s.Err() == nil {
		t.Fatalf("sampleAt without cpu.stat = %v, Err() = %v; want errors", err, s.Err())
	}
	if s.Usage() != 0.5 || s.Capacity() != 2 {
		t.Fatalf("Usage(), Capacity() = %v, %v; want the last 0.5, 2", s.Usage(), s.Capacity())
	}
	c.usage(tree, 2*time.Second)
	if err := s.sampleAt(1 + 3*int64(time.Second)); err != nil || s.Err() != nil {
		t.Fatalf("sampleAt = %v, Err() = %v; want nil once the file is back", err, s.Err())
	}
}

// TestBackgroundSampling drives the Sampler's own goroutine with a manual
// clock over real files.
func TestBackgroundSampling(t *testing.T) {
	dir := t.TempDir()
	c := treeCases[0]
	for name, f := range c.build() {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	clk := clock.NewManual(int64(time.Hour))
	s, err := NewSampler(withRoot(os.DirFS(dir)), withHostCPUs(8), WithClock(clk), WithSmoothing(0))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sampler to sleep", func() bool { return clk.Sleepers() == 1 })
	// Write the new CPU time by renaming, so the sampler never reads half a
	// file.
	stat := filepath.Join(dir, "sys/fs/cgroup/app.slice/app.service/cpu.stat")
	if err := os.WriteFile(stat+".tmp", []byte("usage_usec 375000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(stat+".tmp", stat); err != nil {
		t.Fatal(err)
	}
	clk.Advance(defaultInterval) // 0.375 CPU-seconds in 250 ms on 2 CPUs
	waitFor(t, "a sample", func() bool { return s.Usage() != 0 })
	if got := s.Usage(); math.Abs(got-0.75) > 1e-9 {
		t.Fatalf("Usage() = %v, want 0.75", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := clk.Sleepers(); n != 0 {
		t.Fatalf("%d sleepers after Close, want 0", n)
	}
}

// waitFor polls cond with a deadline wide enough for a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestUsageDoesNotAllocate(t *testing.T) {
	s, _, _ := newTestSampler(t)
	var sink float64
	if n := testing.AllocsPerRun(1000, func() { sink += s.Usage() }); n != 0 {
		t.Fatalf("Usage() allocates %v times, want 0", n)
	}
	_ = sink
}

var benchSink float64

func BenchmarkUsage(b *testing.B) {
	tree := treeCases[0].build()
	s, err := NewSampler(withRoot(tree), withHostCPUs(8), WithClock(clock.NewManual(1)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.Run("Usage", func(b *testing.B) {
		for b.Loop() {
			benchSink += s.Usage()
		}
	})
	b.Run("baseline=time.Now", func(b *testing.B) {
		for b.Loop() {
			benchSink += float64(time.Now().Nanosecond())
		}
	})
}

func BenchmarkSample(b *testing.B) {
	c := treeCases[1] // v2 nested: three quota files and a cpuset walk
	tree := c.build()
	s, err := NewSampler(withRoot(tree), withHostCPUs(c.hostCPUs), WithClock(clock.NewManual(1)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := int64(1)
	b.ReportAllocs()
	for b.Loop() {
		now += int64(defaultInterval)
		if err := s.sampleAt(now); err != nil {
			b.Fatal(err)
		}
	}
}
