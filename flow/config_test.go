package flow

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// Settings left out take their defaults: a nil Clock is the system's, and
// a warm-up's cold factor left out is 3.
func TestSettingsLeftOutTakeTheirDefaults(t *testing.T) {
	q, err := NewQPS(QPSSettings{Limit: 10, Interval: time.Second})
	if err != nil || q.clock != clock.System || q.k != flowlimits.DefaultBuckets {
		t.Fatalf("NewQPS: %v; clock %v, %d buckets; want the system clock and %d", err, q.clock, q.k, flowlimits.DefaultBuckets)
	}
	warm, err := NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, WarmUp: 10 * time.Second})
	if err != nil || warm.clock != clock.System || warm.curve.cold != 3 {
		t.Fatalf("NewThrottle with a warm-up: %v; want the system clock and a cold factor of 3", err)
	}
}

// TestNoSettingIsSilentlyIgnored: a setting that would change nothing is
// an error, not a setting the caller believes in force.
func TestNoSettingIsSilentlyIgnored(t *testing.T) {
	for name, tc := range map[string]struct {
		err     error
		mention string
	}{
		"a Throttle without warm-up, Buckets":        {errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, Buckets: 50})), "buckets = 50: a throttle has buckets only to warm up"},
		"a QPS limiter without warm-up, ColdFactor":  {errOf(NewQPS(QPSSettings{Limit: 10, Interval: time.Second, ColdFactor: 3})), "cold_factor = 3: applies only with a warm-up"},
		"a Throttle without warm-up, ColdFactor":     {errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, ColdFactor: 3})), "cold_factor = 3: applies only with a warm-up"},
		"a Throttle per key, WarmUp":                 {errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, WarmUp: time.Minute, PerKey: true})), "warm_up = 1m0s: a throttle per key does not warm up"},
		"a Throttle not per key, Overrides":          {errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, Overrides: map[string]int64{"k": 1}})), "overrides = 1: apply only to a throttle per key"},
		"a Throttle not per key, Keys":               {errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, Keys: 10})), "keys = 10: applies only to a throttle per key"},
		"a Throttle not per key, KeyMemory":          {errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, KeyMemory: &KeyMemory{limit: 5}})), "key_memory = 5: applies only to a throttle per key"},
		"a Throttle not per key, Set's overrides":    {mustThrottle(t, 10, time.Second, 0, nil).Set(5, map[string]int64{}), "overrides = 0: apply only to a throttle per key"},
		"a Concurrency not per key, Overrides":       {errOf(NewConcurrency(ConcurrencySettings{Limit: 10, Overrides: map[string]int64{"k": 1}})), "overrides = 1: apply only to a limiter per key"},
		"a Concurrency not per key, Keys":            {errOf(NewConcurrency(ConcurrencySettings{Limit: 10, Keys: 10})), "keys = 10: applies only to a limiter per key"},
		"a Concurrency not per key, KeyMemory":       {errOf(NewConcurrency(ConcurrencySettings{Limit: 10, KeyMemory: &KeyMemory{}})), "key_memory = 0: applies only to a limiter per key"},
		"a Concurrency not per key, Set's overrides": {mustConcurrency(t, 10).Set(5, map[string]int64{"k": 1}), "overrides = 1: apply only to a limiter per key"},
	} {
		if !errors.Is(tc.err, config.ErrInvalid) || !strings.Contains(tc.err.Error(), tc.mention) {
			t.Errorf("%s = %v, want config.ErrInvalid saying %q", name, tc.err, tc.mention)
		}
	}
	if _, err := NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, Buckets: 50, WarmUp: 10 * time.Second, ColdFactor: 3}); err != nil {
		t.Errorf("a warming Throttle with buckets: %v", err)
	}
}

func errOf[T any](_ T, err error) error { return err }

// TestConfigErrorsNameTheFieldAndItsValue: every bad setting is a
// *configError whose Field and Value say which one and what it was, so
// that a caller (the guard's rule validation) can point at the field.
func TestConfigErrorsNameTheFieldAndItsValue(t *testing.T) {
	q, _ := NewQPS(QPSSettings{Limit: 10, Interval: time.Second})
	warm, _ := NewQPS(QPSSettings{Limit: 10, Interval: time.Second, WarmUp: 10 * time.Second, ColdFactor: 3})
	conc, _ := NewConcurrency(ConcurrencySettings{Limit: 10})
	for _, tc := range []struct {
		name   string
		err    error
		option string
		value  any
	}{
		{"NewQPS(-1, 1s)", errOf(NewQPS(QPSSettings{Limit: -1, Interval: time.Second})), "limit", int64(-1)},
		{"NewQPS(maxLimit+1, 1s)", errOf(NewQPS(QPSSettings{Limit: maxLimit + 1, Interval: time.Second})), "limit", int64(maxLimit + 1)},
		{"NewThrottle(0, 1s, 0)", errOf(NewThrottle(ThrottleSettings{Limit: 0, Interval: time.Second, MaxWait: 0})), "limit", int64(0)},
		{"NewConcurrency(-1)", errOf(NewConcurrency(ConcurrencySettings{Limit: -1})), "limit", int64(-1)},
		{"QPS.SetLimit(-1)", q.SetLimit(-1), "limit", int64(-1)},
		{"QPS.SetLimit with warm-up", warm.SetLimit(20), "limit", int64(20)},
		{"Concurrency.SetLimit(maxLimit+1)", conc.Set(maxLimit+1, nil), "limit", int64(maxLimit + 1)},
		{"NewQPS(10, 0)", errOf(NewQPS(QPSSettings{Limit: 10, Interval: 0})), "interval", time.Duration(0)},
		{"NewQPS(10, 1s, Buckets 3)", errOf(NewQPS(QPSSettings{Limit: 10, Interval: time.Second, Buckets: 3})), "interval", time.Second},
		{"NewQPS(10, 10µs)", errOf(NewQPS(QPSSettings{Limit: 10, Interval: 10 * time.Microsecond})), "interval", 10 * time.Microsecond},
		{"NewThrottle(10, -1s, 0)", errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: -time.Second, MaxWait: 0})), "interval", -time.Second},
		{"NewQPS(10, 1s, Buckets -1)", errOf(NewQPS(QPSSettings{Limit: 10, Interval: time.Second, Buckets: -1})), "buckets", -1},
		{"NewQPS(10, 1h, Buckets 65537)", errOf(NewQPS(QPSSettings{Limit: 10, Interval: time.Hour, Buckets: 1<<16 + 1})), "buckets", 1<<16 + 1},
		{"NewThrottle(10, 1s, 0, Buckets 5)", errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, MaxWait: 0, Buckets: 5})), "buckets", 5},
		{"NewThrottle(10, 1s, 0, Buckets -1, warm-up)", errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, Buckets: -1, WarmUp: 10 * time.Second})), "buckets", -1},
		{"NewThrottle(10, 1s, -1s)", errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, MaxWait: -time.Second})), "max_wait", -time.Second},
		{"WarmUp -1s", errOf(NewQPS(QPSSettings{Limit: 10, Interval: time.Second, WarmUp: -time.Second})), "warm_up", -time.Second},
		{"WarmUp 1s over 1s", errOf(NewThrottle(ThrottleSettings{Limit: 10, Interval: time.Second, MaxWait: 0, WarmUp: time.Second, ColdFactor: 3})), "warm_up", time.Second},
		{"ColdFactor 0.5", errOf(NewQPS(QPSSettings{Limit: 10, Interval: time.Second, WarmUp: 10 * time.Second, ColdFactor: 0.5})), "cold_factor", 0.5},
		{"ColdFactor 11 for 10", errOf(NewQPS(QPSSettings{Limit: 10, Interval: time.Second, WarmUp: 10 * time.Second, ColdFactor: 11})), "cold_factor", 11.0},
		{"ColdFactor without WarmUp", errOf(NewQPS(QPSSettings{Limit: 10, Interval: time.Second, ColdFactor: 3})), "cold_factor", 3.0},
	} {
		var ce *configError
		if !errors.As(tc.err, &ce) || !errors.Is(tc.err, config.ErrInvalid) {
			t.Errorf("%s = %v, want a *configError wrapping config.ErrInvalid", tc.name, tc.err)
			continue
		}
		if ce.Field != tc.option || ce.Value != tc.value || ce.Detail == "" {
			t.Errorf("%s: Field %q, Value %#v, Detail %q; want %q, %#v and a detail", tc.name, ce.Field, ce.Value, ce.Detail, tc.option, tc.value)
		}
		if want := "flow: invalid configuration: " + tc.option + " = "; !strings.HasPrefix(tc.err.Error(), want) {
			t.Errorf("%s: message %q, want it to start %q", tc.name, tc.err, want)
		}
	}
	if warm.limitNow() != 10 || q.limitNow() != 10 || conc.limitNow() != 10 {
		t.Error("a SetLimit that failed changed the limit")
	}
}

func mustConcurrency(t *testing.T, limit int64) *Concurrency {
	t.Helper()
	c, err := NewConcurrency(ConcurrencySettings{Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
