package cpu

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// Defaults of a Sampler, stated in the docs of its options.
const (
	// defaultInterval is how often a Sampler reads the CPU time.
	defaultInterval = 250 * time.Millisecond
	// defaultSmoothing is the time constant of a Sampler's moving average.
	// A step in load shows as 1 - e^(-t/300ms) of the step after t. After
	// one second of 250 ms samples, 96% of it shows.
	defaultSmoothing = 300 * time.Millisecond
)

// An Option configures a [Sampler].
type Option func(*options)

type options struct {
	root      fs.FS
	hostCPUs  int
	interval  time.Duration
	smoothing time.Duration
	clock     clock.Clock
}

// withRoot reads procfs and cgroupfs under root instead of the real "/",
// for the tests. root holds proc/self/cgroup, proc/self/mountinfo and the
// cgroup mounts they name. Each is at its path without the leading slash.
// It works on every platform.
func withRoot(root fs.FS) Option { return func(o *options) { o.root = root } }

// withHostCPUs sets the CPUs available without any cgroup limit, for the
// tests. The default is runtime.NumCPU, the CPUs in the process's
// scheduler affinity.
func withHostCPUs(n int) Option { return func(o *options) { o.hostCPUs = n } }

// WithInterval sets how often the CPU time is read. The default is 250 ms.
// It must be positive and at most a minute.
func WithInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithSmoothing sets the time constant of the moving average. The default
// is 300 ms: a step in load shows as 1 - e^(-t/300ms) of the step after t,
// 96% of it after a second. 0 makes [Sampler.Usage] the share over the
// last interval alone. It must not be negative.
func WithSmoothing(d time.Duration) Option { return func(o *options) { o.smoothing = d } }

// WithClock sets the clock the Sampler measures and sleeps on. The default
// is [clock.System]. With a [clock.Manual], samples are taken when a test
// or a simulation advances it.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// A Sampler measures the share of its CPU capacity that the process's
// cgroup uses. It samples in the background, so that a decision reads one
// atomic.
//
// Every interval it reads the cgroup's CPU time and capacity. The share
// over the interval is
//
//	share = ΔCPU time / (Δwall time × capacity)
//
// 0 is idle, and 1 is every CPU the cgroup may use busy. The share is
// clamped to [0, 1]. It exceeds 1 before clamping only by measurement skew
// (a quota period straddling two samples), never in sustained load.
// [Sampler.Usage] is an exponential moving average of the shares, with
// time constant smoothing. It is weighted by elapsed time, so that
// irregular sampling does not bias it.
//
// A Sampler is safe for concurrent use. [Sampler.Close] stops its
// goroutine.
type Sampler struct {
	usage    atomic.Uint64 // math.Float64bits of the smoothed share
	capacity atomic.Uint64 // math.Float64bits of the capacity in CPUs
	lastErr  atomic.Pointer[error]

	reader    *reader
	clock     clock.Clock
	interval  time.Duration
	smoothing time.Duration

	mu       sync.Mutex // serializes sampleAt; guards the fields below
	lastAt   int64
	lastCPU  time.Duration
	smoothed float64
	primed   bool // lastAt and lastCPU hold a reading
	started  bool // smoothed holds a share

	cancel context.CancelFunc
	done   chan struct{}
}

// NewSampler locates the process's cgroup and takes a first reading. It
// starts a goroutine that samples every interval until [Sampler.Close].
// [Sampler.Usage] reads 0 until the second reading, one interval later.
//
// Outside Linux, NewSampler returns [ErrUnavailable]. When a file it needs is missing or malformed, the error names the
// file. A bad option is an error naming the option and its value.
func NewSampler(opts ...Option) (*Sampler, error) {
	o := options{
		hostCPUs:  runtime.NumCPU(),
		interval:  defaultInterval,
		smoothing: defaultSmoothing,
		clock:     clock.System,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.interval <= 0 || o.interval > time.Minute {
		return nil, fmt.Errorf("cpu sampler interval %v: want more than 0 and at most 1m", o.interval)
	}
	if o.smoothing < 0 {
		return nil, fmt.Errorf("cpu sampler smoothing %v: want 0 or more", o.smoothing)
	}
	if o.clock == nil {
		return nil, fmt.Errorf("cpu sampler clock: nil")
	}
	if o.root == nil {
		root, err := defaultRoot()
		if err != nil {
			return nil, err
		}
		o.root = root
	}
	r, err := newReader(o.root, o.hostCPUs)
	if err != nil {
		return nil, err
	}
	s := &Sampler{reader: r, clock: o.clock, interval: o.interval, smoothing: o.smoothing}
	if err := s.sampleAt(o.clock.Now()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go s.run(ctx)
	return s, nil
}

// run samples every interval until ctx is done.
func (s *Sampler) run(ctx context.Context) {
	defer close(s.done)
	for clock.Sleep(ctx, s.clock, s.interval) == nil {
		// A failed sample keeps the last usage; Err reports why.
		_ = s.sampleAt(s.clock.Now())
	}
}

// Usage returns the smoothed share of the capacity in use, in [0, 1]. It
// reads one atomic and allocates nothing.
func (s *Sampler) Usage() float64 { return math.Float64frombits(s.usage.Load()) }

// Capacity returns the CPUs the cgroup may use, as of the last sample. It
// is fractional when the quota is, such as 1.25.
func (s *Sampler) Capacity() float64 { return math.Float64frombits(s.capacity.Load()) }

// Source says where the numbers come from: "cgroup v2 at
// /sys/fs/cgroup/x", "cgroup v1 at …", or "process (no cgroup file system
// mounted)".
func (s *Sampler) Source() string { return s.reader.Source() }

// Err returns the error of the last sample, or nil if it succeeded. After
// a failed sample, [Sampler.Usage] and [Sampler.Capacity] keep their last
// values.
func (s *Sampler) Err() error {
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// sampleAt takes a sample at now, a reading of the Sampler's clock. The
// background goroutine calls it every interval. A now not after the previous sample's is ignored. So
// is a CPU time that went backwards, when the cgroup was made again; the
// next sample measures from there.
func (s *Sampler) sampleAt(now int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.sample(now)
	if err != nil {
		s.lastErr.Store(&err)
	} else {
		s.lastErr.Store(nil)
	}
	return err
}

func (s *Sampler) sample(now int64) error {
	capacity, err := s.reader.Capacity()
	if err != nil {
		return err
	}
	cpu, err := s.reader.CPUTime()
	if err != nil {
		return err
	}
	s.capacity.Store(math.Float64bits(capacity))
	first := !s.primed
	s.primed = true
	elapsed := now - s.lastAt
	used := cpu - s.lastCPU
	if first || used < 0 {
		s.lastAt, s.lastCPU = now, cpu
		return nil
	}
	if elapsed <= 0 {
		return nil
	}
	s.lastAt, s.lastCPU = now, cpu
	share := min(max(float64(used)/(float64(elapsed)*capacity), 0), 1)
	switch {
	case !s.started || s.smoothing == 0:
		s.smoothed = share
	default:
		alpha := 1 - math.Exp(-float64(elapsed)/float64(s.smoothing))
		s.smoothed += alpha * (share - s.smoothed)
	}
	s.started = true
	s.usage.Store(math.Float64bits(s.smoothed))
	return nil
}

// Close stops the background goroutine and waits for it.
// [Sampler.Usage] and [Sampler.Capacity] keep their last values. Close may
// be called more than once.
func (s *Sampler) Close() error {
	s.cancel()
	<-s.done
	return nil
}
