package window

import (
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// go-zero's RollingWindow, by its own tests' expectations (core/collection
// in go-zero v1.10.3), replayed on the manual clock: buckets of width w,
// the clock starting on a bucket's edge, as go-zero's buckets start when
// the window is made.

const goZeroWidth = 50 * time.Millisecond

func newGoZeroLike(t *testing.T, buckets int, width time.Duration, opts ...Option) (*RollingWindow, *clock.Manual) {
	t.Helper()
	c := clock.NewManual(0)
	rw, err := NewRollingWindow(buckets, time.Duration(buckets)*width, append(opts, WithClock(c))...)
	if err != nil {
		t.Fatal(err)
	}
	return rw, c
}

func sums(rw *RollingWindow) string {
	var out []int64
	rw.Reduce(func(b Bucket) { out = append(out, b.Sum) })
	return fmt.Sprint(out)
}

func TestRollingWindowAddsAsGoZeros(t *testing.T) {
	rw, c := newGoZeroLike(t, 3, goZeroWidth)
	step := func(want string, adds ...int64) {
		t.Helper()
		for _, v := range adds {
			rw.Add(v)
		}
		if got := sums(rw); got != want {
			t.Fatalf("buckets %s, want go-zero's %s", got, want)
		}
	}
	step("[0 0 0]")
	step("[0 0 1]", 1)
	c.Advance(goZeroWidth)
	step("[0 1 5]", 2, 3)
	c.Advance(goZeroWidth)
	step("[1 5 15]", 4, 5, 6)
	c.Advance(goZeroWidth)
	step("[5 15 7]", 7)
}

func TestRollingWindowReducesAsGoZeros(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want int64
	}{{nil, 10}, {[]Option{IgnoreCurrentBucket()}, 4}} {
		rw, c := newGoZeroLike(t, 4, goZeroWidth, tc.opts...)
		for x := int64(0); x < 4; x++ {
			for i := int64(0); i <= x; i++ {
				rw.Add(i)
			}
			if x < 3 {
				c.Advance(goZeroWidth)
			}
		}
		var sum int64
		rw.Reduce(func(b Bucket) { sum += b.Sum })
		if sum != tc.want {
			t.Errorf("IgnoreCurrentBucket %v: sum %d, want go-zero's %d", len(tc.opts) > 0, sum, tc.want)
		}
	}
}

func TestRollingWindowCrossesBucketEdgesAsGoZeros(t *testing.T) {
	const width = 30 * time.Millisecond
	rw, c := newGoZeroLike(t, 3, width)
	if got := sums(rw); got != "[0 0 0]" {
		t.Fatalf("new: %s", got)
	}
	rw.Add(1)
	c.Advance(45 * time.Millisecond) // into the second bucket
	rw.Add(2)
	rw.Add(3)
	if got := sums(rw); got != "[0 1 5]" {
		t.Fatalf("at 45 ms: %s, want [0 1 5]", got)
	}
	c.Advance(20 * time.Millisecond) // less than a width, but into the third
	rw.Add(4)
	rw.Add(5)
	rw.Add(6)
	if got := sums(rw); got != "[1 5 15]" {
		t.Fatalf("at 65 ms: %s, want [1 5 15]", got)
	}
	c.Advance(100 * time.Millisecond) // more than the interval
	rw.Add(7)
	rw.Add(8)
	rw.Add(9)
	if got := sums(rw); got != "[0 0 24]" {
		t.Fatalf("at 165 ms: %s, want [0 0 24]", got)
	}
}

// Where go-zero differs: after whole bucket widths with nothing added, its
// Reduce passes only the buckets up to the last one written, and none once
// that one has left the window. Ours passes every bucket of the window,
// those nothing was added to as zero Buckets.
func TestRollingWindowPassesIdleBucketsAsZeroWhereGoZeroLeavesThemOut(t *testing.T) {
	rw, c := newGoZeroLike(t, 3, goZeroWidth, IgnoreCurrentBucket())
	rw.Add(1)
	for _, step := range []struct {
		advance      time.Duration
		ours, goZero string
	}{
		{goZeroWidth, "[0 1]", "[0 1]"},
		{goZeroWidth, "[1 0]", "[1]"},
		{goZeroWidth, "[0 0]", "[]"},
		{10 * goZeroWidth, "[0 0]", "[]"},
	} {
		c.Advance(step.advance)
		if got := sums(rw); got != step.ours {
			t.Fatalf("at %v: %s, want %s (go-zero passes %s)", time.Duration(c.Now()), got, step.ours, step.goZero)
		}
	}
}
