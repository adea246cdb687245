package clock

import (
	"sync/atomic"
	"time"
)

// A Clock reports monotonic time in nanoseconds. The origin is arbitrary and
// fixed for the life of the Clock; only differences between readings mean
// anything. Implementations must be safe for concurrent use and must never
// return a smaller value than an earlier call returned on the same goroutine.
type Clock interface {
	Now() int64
}

// base is the origin of System. It is a plain value computed once when the
// package is initialised; nothing is started.
var base = time.Now()

// systemClock reads the process's monotonic clock.
type systemClock struct{}

// Now returns the nanoseconds elapsed since the package was initialised.
// Because base carries a monotonic reading, time.Since reads only the
// monotonic clock, not the wall clock.
func (systemClock) Now() int64 { return int64(time.Since(base)) }

// System is the real monotonic clock. Its readings start near zero when the
// process starts and grow by one per nanosecond; they are unaffected by steps
// of the wall clock.
var System Clock = systemClock{}

// Manual is a Clock that moves only when told to. It is meant for tests and
// simulations. The zero value reads 0. A Manual is safe for concurrent use:
// one goroutine may advance it while others read it.
type Manual struct {
	now atomic.Int64
}

// NewManual returns a Manual clock that reads start.
func NewManual(start int64) *Manual {
	m := &Manual{}
	m.now.Store(start)
	return m
}

// Now returns the clock's current reading.
func (m *Manual) Now() int64 { return m.now.Load() }

// Advance moves the clock forward by d and returns the new reading. A negative
// d moves it backwards, which a real clock never does; tests use it to check
// that callers passing an older time are handled.
func (m *Manual) Advance(d time.Duration) int64 { return m.now.Add(int64(d)) }

// Set sets the clock to t.
func (m *Manual) Set(t int64) { m.now.Store(t) }
