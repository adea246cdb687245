package window

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
)

// Each constructor, so that every test of options covers all three.
var constructors = map[string]func(buckets int, interval time.Duration, opts ...Option) error{
	"NewCounter":       func(b int, i time.Duration, o ...Option) error { _, err := NewCounter(b, i, o...); return err },
	"NewHistogram":     func(b int, i time.Duration, o ...Option) error { _, err := NewHistogram(b, i, o...); return err },
	"NewRollingWindow": func(b int, i time.Duration, o ...Option) error { _, err := NewRollingWindow(b, i, o...); return err },
}

func TestWithClockNilIsAnError(t *testing.T) {
	for name, build := range constructors {
		err := build(10, time.Second, WithClock(nil))
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "clock = <nil>: must not be nil") {
			t.Errorf("%s(10, 1s, WithClock(nil)) = %v, want config.ErrInvalid naming the nil clock", name, err)
		}
		// A later WithClock does not hide the bad one.
		err = build(10, time.Second, WithClock(nil), WithClock(clock.NewManual(0)))
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s(10, 1s, WithClock(nil), WithClock(m)) = %v, want config.ErrInvalid", name, err)
		}
		if err := build(10, time.Second, nil, WithClock(clock.NewManual(0))); err != nil {
			t.Errorf("%s with a nil Option and a clock: %v", name, err)
		}
	}
}

func TestAnOptionForAnotherTypeIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		mention string
	}{
		{"NewCounter(Compact())", errOf(NewCounter(10, time.Second, Compact())), "compact = true: applies to a Histogram, not to a Counter"},
		{"NewRollingWindow(Compact())", errOf(NewRollingWindow(10, time.Second, Compact())), "compact = true: applies to a Histogram, not to a RollingWindow"},
		{"NewCounter(IgnoreCurrentBucket())", errOf(NewCounter(10, time.Second, IgnoreCurrentBucket())), "ignore_current_bucket = true: applies to a RollingWindow, not to a Counter"},
		{"NewHistogram(IgnoreCurrentBucket())", errOf(NewHistogram(10, time.Second, IgnoreCurrentBucket())), "ignore_current_bucket = true: applies to a RollingWindow, not to a Histogram"},
	} {
		if !errors.Is(tc.err, config.ErrInvalid) || !strings.Contains(tc.err.Error(), tc.mention) {
			t.Errorf("%s = %v, want config.ErrInvalid saying %q", tc.name, tc.err, tc.mention)
		}
	}
	if _, err := NewHistogram(10, time.Second, Compact()); err != nil {
		t.Errorf("NewHistogram(Compact()): %v", err)
	}
	if _, err := NewRollingWindow(10, time.Second, IgnoreCurrentBucket()); err != nil {
		t.Errorf("NewRollingWindow(IgnoreCurrentBucket()): %v", err)
	}
}

func errOf[T any](_ T, err error) error { return err }

// TestNewRollingWindowTakesTheWholeInterval: NewRollingWindow(4, 400ms) is
// four buckets of 100ms over 400ms, as NewCounter(4, 400ms) is, so a value
// added at 0 has left the window at 400ms.
func TestNewRollingWindowTakesTheWholeInterval(t *testing.T) {
	rw, err := NewRollingWindow(4, 400*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if rw.width() != 100*time.Millisecond {
		t.Fatalf("Width = %v, want 100ms", rw.width())
	}
	rw.AddAt(0, 1)
	var sum, n int64
	rw.ReduceAt(int64(399*time.Millisecond), func(b Bucket) { sum += b.Sum; n++ })
	if sum != 1 || n != 4 {
		t.Fatalf("at 399ms: %d buckets summing %d, want 4 summing 1", n, sum)
	}
	sum, n = 0, 0
	rw.ReduceAt(int64(400*time.Millisecond), func(b Bucket) { sum += b.Sum; n++ })
	if sum != 0 || n != 4 {
		t.Fatalf("at 400ms: %d buckets summing %d, want 4 summing 0", n, sum)
	}
	if err := errOf(NewRollingWindow(3, time.Second+1)); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "does not divide into 3 buckets") {
		t.Fatalf("NewRollingWindow(3, 1s+1ns) = %v, want an error naming the interval", err)
	}
}

// TestConfigErrorsNameTheOptionAndItsValue: every bad argument or Option is
// a *configError whose Option and Value say which one and what it was.
func TestConfigErrorsNameTheOptionAndItsValue(t *testing.T) {
	ctr, _ := NewCounter(10, time.Second)
	hist, _ := NewHistogram(10, time.Second)
	for _, tc := range []struct {
		name   string
		err    error
		option string
		value  any
	}{
		{"NewCounter(0, 1s)", errOf(NewCounter(0, time.Second)), "buckets", 0},
		{"NewHistogram(65537, 1h)", errOf(NewHistogram(maxBuckets+1, time.Hour)), "buckets", maxBuckets + 1},
		{"NewRollingWindow(-1, 1s)", errOf(NewRollingWindow(-1, time.Second)), "buckets", -1},
		{"NewCounter(10, 0)", errOf(NewCounter(10, 0)), "interval", time.Duration(0)},
		{"NewRollingWindow(3, 1s)", errOf(NewRollingWindow(3, time.Second)), "interval", time.Second},
		{"NewHistogram(10, 5µs)", errOf(NewHistogram(10, 5*time.Microsecond)), "interval", 5 * time.Microsecond},
		{"NewCounter(1, 2^62)", errOf(NewCounter(1, 1<<62)), "interval", time.Duration(1 << 62)},
		{"Counter.View(150ms)", errOf(ctr.View(150 * time.Millisecond)), "view", 150 * time.Millisecond},
		{"Histogram.View(2s)", errOf(hist.View(2 * time.Second)), "view", 2 * time.Second},
		{"NewCounter(WithClock(nil))", errOf(NewCounter(10, time.Second, WithClock(nil))), "clock", clock.Clock(nil)},
		{"NewCounter(Compact())", errOf(NewCounter(10, time.Second, Compact())), "compact", true},
		{"NewHistogram(IgnoreCurrentBucket())", errOf(NewHistogram(10, time.Second, IgnoreCurrentBucket())), "ignore_current_bucket", true},
	} {
		var ce *configError
		if !errors.As(tc.err, &ce) || !errors.Is(tc.err, config.ErrInvalid) {
			t.Errorf("%s = %v, want a *configError wrapping config.ErrInvalid", tc.name, tc.err)
			continue
		}
		if ce.Field != tc.option || ce.Value != tc.value || ce.Detail == "" {
			t.Errorf("%s: Option %q, Value %#v, Detail %q; want %q, %#v and a detail", tc.name, ce.Field, ce.Value, ce.Detail, tc.option, tc.value)
		}
		if want := "window: invalid configuration: " + tc.option + " = "; !strings.HasPrefix(tc.err.Error(), want) {
			t.Errorf("%s: message %q, want it to start %q", tc.name, tc.err, want)
		}
	}
}
