package flow

import (
	"math"
	"testing"
	"time"
)

func TestBackoffDoublesUpToItsMax(t *testing.T) {
	for _, c := range []struct {
		retry     int
		base, max time.Duration
		bound     time.Duration
	}{
		{0, 25 * time.Millisecond, time.Second, 25 * time.Millisecond},
		{3, 25 * time.Millisecond, time.Second, 200 * time.Millisecond},
		{10, 25 * time.Millisecond, time.Second, time.Second},
		{100, 25 * time.Millisecond, time.Second, time.Second},
		{-1, 25 * time.Millisecond, time.Second, 25 * time.Millisecond},
		{5, math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{70, time.Millisecond, math.MaxInt64, math.MaxInt64},
		{2, -time.Second, time.Second, 0},
	} {
		var most time.Duration
		for range 2000 {
			d := Backoff(c.retry, c.base, c.max)
			if d < 0 || d > c.bound {
				t.Fatalf("Backoff(%d, %v, %v) = %v, want within [0, %v]", c.retry, c.base, c.max, d, c.bound)
			}
			most = max(most, d)
		}
		if c.bound >= time.Millisecond && c.bound < math.MaxInt64/2 && most < c.bound/2 {
			t.Errorf("Backoff(%d, %v, %v): at most %v in 2000 draws, want up to %v", c.retry, c.base, c.max, most, c.bound)
		}
	}
}

func TestBackoffDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(1000, func() { Backoff(3, time.Millisecond, time.Second) }); n != 0 {
		t.Fatalf("Backoff allocates %.1f times", n)
	}
}
