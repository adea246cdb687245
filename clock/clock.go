package clock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A Clock reports monotonic time in nanoseconds. The origin is arbitrary
// and fixed for the life of the Clock. Only differences between readings
// mean anything. Implementations must be safe for concurrent use. On one
// goroutine, a reading must never be smaller than an earlier one.
//
// Readings must stay within ±2^60 ns (about 36 years) of the origin. The
// packages that take a Clock clamp times to that range, so that no bucket
// index or time difference overflows. A clock counting from the Unix epoch
// would stand still: time.Now().UnixNano() is beyond 2^60 since 2006. Count
// from a fixed base instead, as [System] does.
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

// System is the real monotonic clock. Its readings start near zero when
// the process starts and grow by one per nanosecond. Steps of the wall
// clock do not change them.
var System Clock = systemClock{}

// A Sleeper is a [Clock] that can also wait. Code that waits, such as a
// throttled request, sleeps on its clock when the clock is a Sleeper, so
// that a [Manual] clock drives it in tests. Otherwise it sleeps on a real
// timer.
type Sleeper interface {
	Clock
	// Sleep returns nil once d has passed on the clock. It returns
	// ctx.Err() as soon as ctx is done, if that comes first.
	Sleep(ctx context.Context, d time.Duration) error
}

// Sleep waits d on clock c. It sleeps on c itself if c is a [Sleeper],
// else on a real timer. It returns ctx.Err() as soon as ctx is done.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if s, ok := c.(Sleeper); ok {
		return s.Sleep(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Manual is a [Clock] that moves only when told to. It is meant for tests
// and simulations. The zero value reads 0. A Manual is safe for concurrent
// use. One goroutine may advance it while others read it or sleep on it.
type Manual struct {
	now atomic.Int64

	mu       sync.Mutex
	sleepers map[chan struct{}]int64 // woken when the clock reaches the time
}

// NewManual returns a Manual clock that reads start.
func NewManual(start int64) *Manual {
	m := &Manual{}
	m.now.Store(start)
	return m
}

// Now returns the clock's current reading.
func (m *Manual) Now() int64 { return m.now.Load() }

// Advance moves the clock forward by d and returns the new reading.
// Sleepers whose time has come are woken. A negative d moves the clock
// backwards, which a real clock never does. Tests use it to check how
// callers handle an older time.
func (m *Manual) Advance(d time.Duration) int64 {
	now := m.now.Add(int64(d))
	m.wake(now)
	return now
}

// Set sets the clock to t, waking the sleepers whose time has come.
func (m *Manual) Set(t int64) {
	m.now.Store(t)
	m.wake(t)
}

// Sleep returns nil once the clock has been advanced by d from now. It
// returns ctx.Err() as soon as ctx is done. It implements [Sleeper].
func (m *Manual) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	ch := make(chan struct{})
	m.mu.Lock()
	until := m.now.Load() + int64(d)
	if m.sleepers == nil {
		m.sleepers = make(map[chan struct{}]int64)
	}
	m.sleepers[ch] = until
	m.mu.Unlock()
	m.wake(m.now.Load()) // the clock may have moved before we registered
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		m.mu.Lock()
		_, waiting := m.sleepers[ch]
		delete(m.sleepers, ch)
		m.mu.Unlock()
		if !waiting { // woken at the same moment: the sleep completed
			return nil
		}
		return ctx.Err()
	}
}

// Sleepers returns how many goroutines are sleeping on the clock. A test
// can wait for them to be asleep before advancing it.
func (m *Manual) Sleepers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sleepers)
}

func (m *Manual) wake(now int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ch, until := range m.sleepers {
		if until <= now {
			close(ch)
			delete(m.sleepers, ch)
		}
	}
}
