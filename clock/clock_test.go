package clock_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

func TestSystemIsMonotonic(t *testing.T) {
	prev := clock.System.Now()
	for i := 0; i < 10000; i++ {
		now := clock.System.Now()
		if now < prev {
			t.Fatalf("System went backwards: %d after %d", now, prev)
		}
		prev = now
	}
}

func TestSystemTracksElapsedTime(t *testing.T) {
	start := clock.System.Now()
	t0 := time.Now()
	for time.Since(t0) < 2*time.Millisecond {
	}
	got := clock.System.Now() - start
	if got < int64(2*time.Millisecond) {
		t.Fatalf("System advanced %dns while 2ms passed", got)
	}
}

func TestManualAdvanceAndSet(t *testing.T) {
	m := clock.NewManual(100)
	if got := m.Now(); got != 100 {
		t.Fatalf("NewManual(100).Now() = %d", got)
	}
	if got := m.Advance(50); got != 150 {
		t.Fatalf("Advance(50) = %d, want 150", got)
	}
	if got := m.Advance(-200); got != -50 {
		t.Fatalf("Advance(-200) = %d, want -50", got)
	}
	m.Set(7)
	if got := m.Now(); got != 7 {
		t.Fatalf("after Set(7), Now() = %d", got)
	}
	var zero clock.Manual
	if got := zero.Now(); got != 0 {
		t.Fatalf("zero Manual reads %d", got)
	}
}

func TestManualConcurrentAdvance(t *testing.T) {
	m := clock.NewManual(0)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				m.Advance(1)
				_ = m.Now()
			}
		}()
	}
	wg.Wait()
	if got := m.Now(); got != 8000 {
		t.Fatalf("8 goroutines advanced 1000 times each: clock reads %d, want 8000", got)
	}
}

func TestManualSleepWakesWhenAdvancedPastTheDeadline(t *testing.T) {
	m := clock.NewManual(0)
	done := make(chan error, 1)
	go func() { done <- m.Sleep(context.Background(), 100*time.Millisecond) }()
	for m.Sleepers() == 0 {
		runtime.Gosched()
	}
	m.Advance(99 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("woke 1ms early: %v", err)
	default:
	}
	m.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v", err)
	}
	if m.Sleepers() != 0 {
		t.Fatal("a woken sleeper is still registered")
	}
}

func TestManualSleepReturnsWhenTheContextIsDone(t *testing.T) {
	m := clock.NewManual(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(ctx, m, time.Hour) }()
	for m.Sleepers() == 0 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if m.Sleepers() != 0 {
		t.Fatal("a cancelled sleeper is still registered")
	}
	if err := m.Sleep(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with a done context = %v", err)
	}
	if err := m.Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
}

func TestSleepOnTheSystemClockUsesATimer(t *testing.T) {
	start := time.Now()
	if err := clock.Sleep(context.Background(), clock.System, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < time.Millisecond {
		t.Fatal("woke early")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := clock.Sleep(ctx, clock.System, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v", err)
	}
}
