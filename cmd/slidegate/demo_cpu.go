package main

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// A cpuGauge is a reading of the CPU of the process's cgroup:
// cpu.Sampler's.
type cpuGauge interface {
	Usage() float64    // the share of the capacity in use, 0 to 1
	Capacity() float64 // the CPUs the cgroup may use
}

// ownCPUSmoothing is the time constant of ownCPU's moving average, as
// cpu.Sampler's.
const ownCPUSmoothing = 300 * time.Millisecond

// ownCPUInterval is how often ownCPU reads the process's CPU time.
const ownCPUInterval = 250 * time.Millisecond

// An ownCPU is what the demo's shed rules read as the CPU: the share of
// the CPUs its cgroup may use that this process uses.
//
// A service's shed rule reads its cgroup (cpu.Sampler), where the service
// is the work. The demo often runs where other work shares the cgroup: a
// laptop's session, a CI runner, a shared machine. Read there, the CPU
// would make the shed rule shed the demo's traffic for work that is not
// the demo's, from the first second to the last. The process's own CPU
// time leaves that work out: the rule sheds only if the demo itself fills
// the CPUs, as a service would.
type ownCPU struct {
	cgroup  cpuGauge
	cpuTime func() (time.Duration, error) // this process's CPU time
	usage   atomic.Uint64                 // math.Float64bits of the smoothed share

	mu       sync.Mutex // serializes sampleAt; guards what follows
	lastAt   int64
	lastTime time.Duration
	primed   bool // lastAt and lastTime hold a reading
	started  bool // the smoothed share holds a share
	smoothed float64
}

// newOwnCPU returns the share of cgroup's capacity that the process whose
// CPU time cpuTime reads uses, sampled when sampleAt is called.
func newOwnCPU(cgroup cpuGauge, cpuTime func() (time.Duration, error)) *ownCPU {
	return &ownCPU{cgroup: cgroup, cpuTime: cpuTime}
}

// Usage is what the shed rules read: the process's share, smoothed; 0
// until two readings.
func (c *ownCPU) Usage() float64 { return math.Float64frombits(c.usage.Load()) }

// Cgroup is the usage of the process's cgroup, this process's and other
// work's together.
func (c *ownCPU) Cgroup() float64 { return c.cgroup.Usage() }

// sampleAt reads the process's CPU time at now, nanoseconds on any
// monotonic clock.
func (c *ownCPU) sampleAt(now int64) error {
	t, err := c.cpuTime()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	elapsed, used := now-c.lastAt, t-c.lastTime
	if !c.primed || used < 0 {
		c.lastAt, c.lastTime, c.primed = now, t, true
		return nil
	}
	capacity := c.cgroup.Capacity()
	if elapsed <= 0 || !(capacity > 0) {
		return nil
	}
	c.lastAt, c.lastTime = now, t
	share := min(max(float64(used)/(float64(elapsed)*capacity), 0), 1)
	if c.started {
		share = c.smoothed + (1-math.Exp(-float64(elapsed)/float64(ownCPUSmoothing)))*(share-c.smoothed)
	}
	c.smoothed, c.started = share, true
	c.usage.Store(math.Float64bits(share))
	return nil
}

// run samples every ownCPUInterval on clk until ctx ends.
func (c *ownCPU) run(ctx context.Context, clk clock.Clock) {
	for clock.Sleep(ctx, clk, ownCPUInterval) == nil {
		_ = c.sampleAt(clk.Now()) // a failed reading keeps the last share
	}
}
