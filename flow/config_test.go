package flow

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

func TestWithClockNilIsAnError(t *testing.T) {
	for name, err := range map[string]error{
		"NewQPS":                 errOf(NewQPS(10, time.Second, WithClock(nil))),
		"NewThrottle":            errOf(NewThrottle(10, time.Second, 0, WithClock(nil))),
		"NewQPS, then a clock":   errOf(NewQPS(10, time.Second, WithClock(nil), WithClock(clock.NewManual(0)))),
		"NewThrottle, warming":   errOf(NewThrottle(10, time.Second, 0, WithClock(nil), WithWarmUp(10*time.Second, 3))),
		"NewQPS, warming, later": errOf(NewQPS(10, time.Second, WithWarmUp(10*time.Second, 3), WithClock(nil))),
	} {
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "clock = <nil>: must not be nil") {
			t.Errorf("%s with WithClock(nil) = %v, want ErrInvalidConfig naming the nil clock", name, err)
		}
	}
	if _, err := NewQPS(10, time.Second, nil, WithClock(clock.NewManual(0))); err != nil {
		t.Errorf("a nil Option: %v", err)
	}
}

// TestNoOptionIsSilentlyIgnored: an option that would change nothing is an
// error, not a setting the caller believes in force.
func TestNoOptionIsSilentlyIgnored(t *testing.T) {
	for name, tc := range map[string]struct {
		err     error
		mention string
	}{
		"a Throttle without warm-up, WithBuckets": {errOf(NewThrottle(10, time.Second, 0, WithBuckets(50))), "buckets = 50: a Throttle has buckets only with warm-up"},
		"WithWarmUp(0, 0) on a QPS limiter":       {errOf(NewQPS(10, time.Second, WithWarmUp(0, 0))), "warm_up = 0s: must be positive"},
		"WithWarmUp(0, 0) on a Throttle":          {errOf(NewThrottle(10, time.Second, 0, WithWarmUp(0, 0))), "warm_up = 0s: must be positive"},
	} {
		if !errors.Is(tc.err, ErrInvalidConfig) || !strings.Contains(tc.err.Error(), tc.mention) {
			t.Errorf("%s = %v, want ErrInvalidConfig saying %q", name, tc.err, tc.mention)
		}
	}
	if _, err := NewThrottle(10, time.Second, 0, WithBuckets(50), WithWarmUp(10*time.Second, 3)); err != nil {
		t.Errorf("a warming Throttle with buckets: %v", err)
	}
}

func errOf[T any](_ T, err error) error { return err }

// TestConfigErrorsNameTheOptionAndItsValue: every bad argument or Option is
// a *ConfigError whose Option and Value say which one and what it was, so
// that a caller (the guard's rule validation) can point at the field.
func TestConfigErrorsNameTheOptionAndItsValue(t *testing.T) {
	q, _ := NewQPS(10, time.Second)
	warm, _ := NewQPS(10, time.Second, WithWarmUp(10*time.Second, 3))
	conc, _ := NewConcurrency(10)
	for _, tc := range []struct {
		name   string
		err    error
		option string
		value  any
	}{
		{"NewQPS(-1, 1s)", errOf(NewQPS(-1, time.Second)), "limit", int64(-1)},
		{"NewQPS(MaxLimit+1, 1s)", errOf(NewQPS(MaxLimit+1, time.Second)), "limit", int64(MaxLimit + 1)},
		{"NewThrottle(0, 1s, 0)", errOf(NewThrottle(0, time.Second, 0)), "limit", int64(0)},
		{"NewConcurrency(-1)", errOf(NewConcurrency(-1)), "limit", int64(-1)},
		{"QPS.SetLimit(-1)", q.SetLimit(-1), "limit", int64(-1)},
		{"QPS.SetLimit with warm-up", warm.SetLimit(20), "limit", int64(20)},
		{"Concurrency.SetLimit(MaxLimit+1)", conc.SetLimit(MaxLimit + 1), "limit", int64(MaxLimit + 1)},
		{"NewQPS(10, 0)", errOf(NewQPS(10, 0)), "interval", time.Duration(0)},
		{"NewQPS(10, 1s, WithBuckets(3))", errOf(NewQPS(10, time.Second, WithBuckets(3))), "interval", time.Second},
		{"NewQPS(10, 10µs)", errOf(NewQPS(10, 10*time.Microsecond)), "interval", 10 * time.Microsecond},
		{"NewThrottle(10, -1s, 0)", errOf(NewThrottle(10, -time.Second, 0)), "interval", -time.Second},
		{"NewQPS(10, 1s, WithBuckets(0))", errOf(NewQPS(10, time.Second, WithBuckets(0))), "buckets", 0},
		{"NewQPS(10, 1h, WithBuckets(65537))", errOf(NewQPS(10, time.Hour, WithBuckets(1<<16+1))), "buckets", 1<<16 + 1},
		{"NewThrottle(10, 1s, 0, WithBuckets(5))", errOf(NewThrottle(10, time.Second, 0, WithBuckets(5))), "buckets", 5},
		{"NewThrottle(10, 1s, 0, WithBuckets(0), WithWarmUp)", errOf(NewThrottle(10, time.Second, 0, WithBuckets(0), WithWarmUp(10*time.Second, 3))), "buckets", 0},
		{"NewThrottle(10, 1s, -1s)", errOf(NewThrottle(10, time.Second, -time.Second)), "max_wait", -time.Second},
		{"WithWarmUp(-1s, 3)", errOf(NewQPS(10, time.Second, WithWarmUp(-time.Second, 3))), "warm_up", -time.Second},
		{"WithWarmUp(1s, 3) over 1s", errOf(NewThrottle(10, time.Second, 0, WithWarmUp(time.Second, 3))), "warm_up", time.Second},
		{"WithWarmUp(10s, 0.5)", errOf(NewQPS(10, time.Second, WithWarmUp(10*time.Second, 0.5))), "cold_factor", 0.5},
		{"WithWarmUp(10s, 11) for 10", errOf(NewQPS(10, time.Second, WithWarmUp(10*time.Second, 11))), "cold_factor", 11.0},
		{"WithClock(nil)", errOf(NewQPS(10, time.Second, WithClock(nil))), "clock", clock.Clock(nil)},
	} {
		var ce *ConfigError
		if !errors.As(tc.err, &ce) || !errors.Is(tc.err, ErrInvalidConfig) {
			t.Errorf("%s = %v, want a *ConfigError wrapping ErrInvalidConfig", tc.name, tc.err)
			continue
		}
		if ce.Option != tc.option || ce.Value != tc.value || ce.Detail == "" {
			t.Errorf("%s: Option %q, Value %#v, Detail %q; want %q, %#v and a detail", tc.name, ce.Option, ce.Value, ce.Detail, tc.option, tc.value)
		}
		if want := "flow: invalid configuration: " + tc.option + " = "; !strings.HasPrefix(tc.err.Error(), want) {
			t.Errorf("%s: message %q, want it to start %q", tc.name, tc.err, want)
		}
	}
	if warm.Limit() != 10 || q.Limit() != 10 || conc.Limit() != 10 {
		t.Error("a SetLimit that failed changed the limit")
	}
}
