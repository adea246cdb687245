package window

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// TestARequestsTwoCountsAreAddAtAndAddPairAt drives enterAt and exitAt, the
// mark of one passed to the other, and a second Counter with AddAt and
// AddPairAt at the same times: exits in the bucket of the entry, in later
// buckets, a whole ring later, before the entry, beyond the clock's range,
// with events not summed or not recorded, and stripes added midway, the
// exit written to another stripe than the entry at times. Every bucket must
// read the same, and every call report the same.
func TestARequestsTwoCountsAreAddAtAndAddPairAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 4))
	// Both Counters write each value to the same stripe: chosen here, not
	// by the processor the test runs on, which may change between them.
	stripeNow, old := 0, hint
	hint = func() int { return stripeNow }
	t.Cleanup(func() { hint = old })
	clk := clock.NewManual(0)
	events := WithEvents(Allowed, Blocked, Succeeded, Failed, RT, MinRT)
	marked, err := NewCounter(10, 10*time.Second, WithClock(clk), events)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := NewCounter(10, 10*time.Second, WithClock(clk), events)
	one, _ := marked.View(time.Second)
	plainOne, _ := plain.View(time.Second)
	width := int64(time.Second)
	now := int64(time.Hour)
	times := func() int64 {
		switch rng.IntN(10) {
		case 0:
			return now + rng.Int64N(3*width) // a later bucket, or the same
		case 1:
			return now - rng.Int64N(2*width) // before the entry
		case 2:
			return now + 11*width // a whole ring later
		case 3:
			return []int64{math.MaxInt64, math.MinInt64, maxTime, -maxTime, maxTime + 1}[rng.IntN(5)]
		}
		return now + rng.Int64N(width/10) // most often: the same bucket
	}
	for i := range 20000 {
		if i == 10000 {
			marked.r.contended()
			plain.r.contended()
		}
		now += rng.Int64N(int64(400 * time.Millisecond))
		if rng.IntN(500) == 0 {
			now += 20 * width // the ring left behind
		}
		e := []Event{Allowed, Allowed, Allowed, MinRT, Slow}[rng.IntN(5)]
		n := rng.Int64N(5) + 1
		if rng.IntN(50) == 0 {
			n = []int64{maxValue, minValue, math.MaxInt64, math.MinInt64}[rng.IntN(4)]
		}
		enter := now
		if rng.IntN(20) == 0 {
			enter = times()
		}
		stripeNow = rng.IntN(64)
		b, s := marked.enterAt(enter, e, n)
		plain.AddAt(enter, e, n)
		exit := times()
		e1 := []Event{Succeeded, Failed, Succeeded, Slow, MinRT}[rng.IntN(5)]
		e2 := []Event{RT, RT, RT, Succeeded, Borrowed}[rng.IntN(5)]
		v1, v2 := n, rng.Int64N(1_000_000)
		if rng.IntN(50) == 0 {
			v2 = []int64{maxValue, minValue, math.MaxInt64, math.MinInt64}[rng.IntN(4)]
		}
		if rng.IntN(4) == 0 {
			stripeNow = rng.IntN(64)
		}
		if got, want := marked.exitAt(b, s, exit, e1, v1, e2, v2), plain.AddPairAt(exit, e1, v1, e2, v2); got != want {
			t.Fatalf("step %d: exitAt reported %v, AddPairAt %v (enter %d, exit %d, %v %v)", i, got, want, enter, exit, e1, e2)
		}
		for _, at := range []int64{enter, exit, now} {
			if got, want := one.SumsAt(at), plainOne.SumsAt(at); got != want {
				t.Fatalf("step %d: the bucket of %d reads %v, with AddAt and AddPairAt %v", i, at, got, want)
			}
		}
		if got, want := marked.SumsAt(now), plain.SumsAt(now); got != want {
			t.Fatalf("step %d: the interval reads %v, with AddAt and AddPairAt %v", i, got, want)
		}
	}
	if marked.r.late.Load() != plain.r.late.Load() {
		t.Fatalf("late: %d with a mark, %d without", marked.r.late.Load(), plain.r.late.Load())
	}
}

// TestAnExitInALaterBucketCountsThere pins the case the mark must not hide:
// a request that began in one bucket and ended in the next counts its
// outcome in the next.
func TestAnExitInALaterBucketCountsThere(t *testing.T) {
	c, _ := newTestCounter(t, 10, 10*time.Second)
	one, _ := c.View(time.Second)
	start := int64(time.Hour) + int64(900*time.Millisecond)
	b, s := c.enterAt(start, Allowed, 1)
	end := start + int64(200*time.Millisecond) // the next bucket
	if !c.exitAt(b, s, end, Succeeded, 1, RT, 200_000) {
		t.Fatal("exitAt reported false")
	}
	if got := one.SumsAt(start); got[Allowed] != 1 || got[Succeeded] != 0 || got[RT] != 0 {
		t.Fatalf("the entry's bucket reads %v, want the request allowed and nothing else", got)
	}
	if got := one.SumsAt(end); got[Allowed] != 0 || got[Succeeded] != 1 || got[RT] != 200_000 {
		t.Fatalf("the exit's bucket reads %v, want its success and response time", got)
	}
}
