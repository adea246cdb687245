package window

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestOutcomesAfterIsTheBucketsAfterATime holds outcomesAfter to a sum of the
// values added, by bucket, on random times that go forward.
func TestOutcomesAfterIsTheBucketsAfterATime(t *testing.T) {
	const w = int64(time.Second)
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		c, err := NewCounter(10, 10*time.Second, WithEvents(Succeeded, Failed))
		if err != nil {
			t.Fatal(err)
		}
		type add struct {
			at, v int64
			e     Event
		}
		var adds []add
		now := r.Int64N(100 * w)
		for range 200 {
			now += r.Int64N(w / 2)
			v := 1 + r.Int64N(5)
			e := Succeeded
			if r.IntN(3) == 0 {
				e, v = Failed, -v // a failure, and a negative value: a breaker takes values away
			}
			c.AddAt(now, e, v)
			adds = append(adds, add{at: now, v: v, e: e})
			after := now - r.Int64N(14*w)
			var want [numEvents]int64
			for _, a := range adds {
				// In the interval at now, and in a bucket after the one holding after.
				if b := bucket(a.at, w); b > bucket(now, w)-10 && b > bucket(after, w) {
					want[a.e] += a.v
				}
			}
			if succ, fail := c.outcomesAfter(now, after); succ != want[Succeeded] || fail != want[Failed] {
				t.Fatalf("round %d: outcomes after %d at %d = %d and %d, want %d and %d", round, after, now, succ, fail, want[Succeeded], want[Failed])
			}
		}
	}
}

// bucket returns the bucket of width w holding time t: buckets start at
// multiples of w, before the clock's origin too.
func bucket(t, w int64) int64 {
	if t < 0 {
		return -((-t + w - 1) / w)
	}
	return t / w
}
