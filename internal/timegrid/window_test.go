package timegrid

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestCheckWindowNamesTheWrongArgument(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		buckets  int
		arg      string // "" when valid
		message  string
	}{
		{time.Second, 25, "", ""},
		{time.Second, 1, "", ""},
		{time.Duration(MaxBuckets) * MinWidth, MaxBuckets, "", ""},
		{MaxTime, 1, "", ""},
		{MaxTime / 2, 2, "", ""},
		{0, 25, "interval", "interval = 0s: must be positive"},
		{-time.Second, 25, "interval", "interval = -1s: must be positive"},
		{math.MinInt64, 1, "interval", "must be positive"},
		{time.Second, 0, "buckets", "buckets = 0: must be between 1 and 65536"},
		{time.Second, -3, "buckets", "buckets = -3: must be between 1 and 65536"},
		{time.Hour, MaxBuckets + 1, "buckets", "buckets = 65537: must be between 1 and 65536"},
		{time.Second, 3, "interval", "interval = 1s: does not divide into 3 buckets of whole nanoseconds"},
		{time.Second + 1, 25, "interval", "does not divide into 25 buckets"},
		{25 * (MinWidth - 1), 25, "interval", "interval = 24.975µs: 25 buckets of 999ns are narrower than 1µs"},
		{MaxTime + 1, 1, "interval", "must be at most"},
		{math.MaxInt64, 1, "interval", "must be at most"},
		{MaxTime + 2, 2, "interval", "must be at most"},
	} {
		we := CheckWindow(tc.interval, tc.buckets)
		if tc.arg == "" {
			if we != nil {
				t.Errorf("CheckWindow(%v, %d) = %v, want nil", tc.interval, tc.buckets, we)
			}
			continue
		}
		if we == nil || we.Arg != tc.arg {
			t.Errorf("CheckWindow(%v, %d) = %v, want an error about %s", tc.interval, tc.buckets, we, tc.arg)
			continue
		}
		if !strings.Contains(we.Error(), tc.message) {
			t.Errorf("CheckWindow(%v, %d) = %q, want it to say %q", tc.interval, tc.buckets, we, tc.message)
		}
		switch v := we.Value.(type) {
		case time.Duration:
			if tc.arg != "interval" || v != tc.interval {
				t.Errorf("CheckWindow(%v, %d): value %v", tc.interval, tc.buckets, v)
			}
		case int:
			if tc.arg != "buckets" || v != tc.buckets {
				t.Errorf("CheckWindow(%v, %d): value %v", tc.interval, tc.buckets, v)
			}
		default:
			t.Errorf("CheckWindow(%v, %d): value of type %T", tc.interval, tc.buckets, we.Value)
		}
	}
}

// TestCheckedWindowsMakeGridsThatDoNotOverflow builds the grid of every
// extreme window CheckWindow accepts and checks that the extreme times map
// to ordered indexes greater than the bucket count.
func TestCheckedWindowsMakeGridsThatDoNotOverflow(t *testing.T) {
	for _, w := range []struct {
		interval time.Duration
		buckets  int
	}{{MaxTime, 1}, {MaxTime / MaxBuckets * MaxBuckets, MaxBuckets}, {MaxBuckets * MinWidth, MaxBuckets}, {MinWidth, 1}} {
		if we := CheckWindow(w.interval, w.buckets); we != nil {
			t.Fatal(we)
		}
		g := New(w.interval/time.Duration(w.buckets), int64(w.buckets))
		lo, hi := g.Index(math.MinInt64), g.Index(math.MaxInt64)
		if lo <= uint64(w.buckets) || hi < lo || g.Index(0) < lo || g.Index(0) > hi {
			t.Errorf("window %v in %d: indexes %d, %d, %d", w.interval, w.buckets, lo, g.Index(0), hi)
		}
	}
}
