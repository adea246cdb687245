package window

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

func reduceAll(rw *RollingWindow) []Bucket {
	var out []Bucket
	rw.Reduce(func(b Bucket) { out = append(out, b) })
	return out
}

func TestRollingWindowReducesOldestFirst(t *testing.T) {
	c := clock.NewManual(0)
	rw, err := NewRollingWindow(3, 300*time.Millisecond, WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	rw.Add(1)
	rw.Add(2)
	c.Advance(100 * time.Millisecond)
	rw.Add(5)
	got := reduceAll(rw)
	want := []Bucket{{}, {Sum: 3, Count: 2}, {Sum: 5, Count: 1}}
	if len(got) != len(want) {
		t.Fatalf("Reduce visited %d buckets, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bucket %d = %+v, want %+v (all: %+v)", i, got[i], want[i], got)
		}
	}
	// Three widths later the first two buckets have left the window.
	c.Advance(200 * time.Millisecond)
	rw.Add(7)
	got = reduceAll(rw)
	if got[0] != (Bucket{Sum: 5, Count: 1}) || got[1] != (Bucket{}) || got[2] != (Bucket{Sum: 7, Count: 1}) {
		t.Fatalf("after sliding: %+v", got)
	}
	if rw.interval() != 300*time.Millisecond || rw.width() != 100*time.Millisecond {
		t.Fatalf("Interval %v, Width %v", rw.interval(), rw.width())
	}
}

func TestRollingWindowIgnoreCurrentBucketLeavesOutThePartialBucket(t *testing.T) {
	c := clock.NewManual(0)
	rw, err := NewRollingWindow(4, 40*time.Millisecond, IgnoreCurrentBucket(), WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 4; i++ {
		rw.Add(i) // buckets hold 1, 2, 3, 4
		c.Advance(10 * time.Millisecond)
	}
	c.Advance(-10 * time.Millisecond) // back inside the bucket holding 4
	var sum, n int64
	rw.Reduce(func(b Bucket) { sum += b.Sum; n++ })
	if n != 3 || sum != 1+2+3 {
		t.Fatalf("visited %d buckets summing %d, want 3 buckets summing 6", n, sum)
	}
}

func TestRollingWindowLikeGoZerosBreakerCounts(t *testing.T) {
	// go-zero's breaker adds 1 for a call that succeeded and 0 for one that
	// failed: Sum is the successes, Count the requests.
	c := clock.NewManual(0)
	rw, _ := NewRollingWindow(40, 10*time.Second, WithClock(c))
	for i := 0; i < 1000; i++ { // 10 s of calls, the whole window
		if i%4 == 0 {
			rw.Add(0)
		} else {
			rw.Add(1)
		}
		c.Advance(10 * time.Millisecond)
	}
	c.Advance(-10 * time.Millisecond)
	var succeeded, total int64
	rw.Reduce(func(b Bucket) { succeeded += b.Sum; total += b.Count })
	if succeeded != 750 || total != 1000 {
		t.Fatalf("%d of %d succeeded, want 750 of 1000", succeeded, total)
	}
}
