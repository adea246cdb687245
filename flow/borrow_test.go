package flow

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowsim"
)

func TestQPSPriorityBorrowsWhatTheLeavingBucketFrees(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 10, Interval: time.Second, Buckets: 10, Clock: c})
	q.AllowN(4) // bucket [0, 100ms)
	c.Set(int64(350 * time.Millisecond))
	q.AllowN(6) // bucket [300, 400ms): the window is full until 1.1 s
	c.Set(int64(1050 * time.Millisecond))
	if q.Allow().Allowed {
		t.Fatal("a full window allowed a normal request")
	}
	if d := q.AllowPriorityN(1, 10*time.Millisecond); d.Allowed {
		t.Fatalf("borrowing with a max wait shorter than the wait for the next bucket: %+v", d)
	}
	// Bucket [1100, 1200ms) opens as bucket [0, 100ms), holding 4, leaves.
	for i := 0; i < 4; i++ {
		if d := q.AllowPriorityN(1, 100*time.Millisecond); !d.Allowed || d.Wait != 50*time.Millisecond {
			t.Fatalf("borrow %d: %+v, want allowed after 50ms", i, d)
		}
	}
	if d := q.AllowPriorityN(1, time.Second); d.Allowed || d.Reason != RateLimited {
		t.Fatalf("a fifth borrow: %+v, want blocked: the leaving bucket frees only 4", d)
	}
	c.Set(int64(1100 * time.Millisecond))
	if q.Allow().Allowed {
		t.Fatal("the borrowed places were not counted in the bucket they came from")
	}
	// With room, a prioritized request is a normal one.
	c.Set(int64(1400 * time.Millisecond)) // the 6 of [300, 400ms) have left
	if d := q.AllowPriorityN(1, time.Second); !d.Allowed || d.Wait != 0 {
		t.Fatalf("with room: %+v, want allowed at once", d)
	}
}

func TestQPSBorrowedPlacesCountEvenWhenTheirBucketIsSkipped(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 10, Interval: time.Second, Buckets: 10, Clock: c})
	q.AllowN(4)
	c.Set(int64(350 * time.Millisecond))
	q.AllowN(6)
	c.Set(int64(1050 * time.Millisecond))
	for i := 0; i < 4; i++ {
		q.AllowPriorityN(1, time.Second) // 4 borrowed into [1100, 1200ms)
	}
	// The next request comes at 1.45 s: bucket [1100, 1200ms) never opened,
	// but its 4 stay in every window that contains it, until 2.2 s.
	c.Set(int64(1350 * time.Millisecond))
	if q.Allow().Allowed { // [300,400) is still in: 6 + 4 borrowed
		t.Fatal("the borrowed 4 were not counted")
	}
	c.Set(int64(1450 * time.Millisecond))
	if !q.AllowN(6).Allowed { // [300,400) has left: 4 borrowed + 6 = 10
		t.Fatal("room for 6 was blocked")
	}
	c.Set(int64(1550 * time.Millisecond))
	if q.Allow().Allowed {
		t.Fatal("the borrowed 4 were forgotten when their bucket was skipped")
	}
	c.Set(int64(2250 * time.Millisecond)) // the borrowed 4 have left, the 6 of 1.45 s remain
	if !q.AllowN(4).Allowed || q.Allow().Allowed {
		t.Fatal("at 2.25 s exactly 4 places must be free")
	}
}

// TestQPSWithBorrowingNeverExceedsLimitInAnyInterval mixes prioritized
// requests, a third of them, into every traffic pattern and checks the
// guarantee at the times requests actually proceed: borrowed ones at the
// start of the bucket they borrowed from.
func TestQPSWithBorrowingNeverExceedsLimitInAnyInterval(t *testing.T) {
	const limit = 100
	for _, k := range []int{1, 4, flowlimits.DefaultBuckets} {
		for _, p := range flowsim.Patterns() {
			q := mustQPS(t, QPSSettings{Limit: limit, Interval: time.Second, Buckets: k})
			rng := rand.New(rand.NewPCG(5, uint64(k)))
			var allowed []flowsim.Arrival
			borrowed := 0
			for _, a := range p.Arrivals(rng, limit, time.Second, 30*time.Second) {
				var d Decision
				if rng.IntN(3) == 0 {
					d = q.AllowPriorityNAt(a.At, a.N, 500*time.Millisecond)
				} else {
					d = q.AllowNAt(a.At, a.N)
				}
				if d.Allowed {
					if d.Wait > 0 {
						borrowed++
					}
					allowed = append(allowed, flowsim.Arrival{At: a.At + int64(d.Wait), N: a.N})
				}
			}
			slices.SortFunc(allowed, func(x, y flowsim.Arrival) int { return int(x.At - y.At) })
			if got := flowsim.MaxInAnyInterval(allowed, time.Second); got > limit {
				t.Errorf("%d buckets, %s: %d allowed in one interval with borrowing", k, p.Name, got)
			}
			if p.Name == "steady 2x" && borrowed == 0 {
				t.Errorf("%d buckets, %s: nothing was ever borrowed", k, p.Name)
			}
		}
	}
}

// TestQPSAllowPriorityVariantsAgree: AllowPriorityN and AllowPriorityAt
// borrow as AllowPriorityNAt does, at the clock's time or the one given.
func TestQPSAllowPriorityVariantsAgree(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, QPSSettings{Limit: 10, Interval: time.Second, Buckets: 10, Clock: c})
	q.AllowN(4) // bucket [0, 100ms)
	c.Set(int64(350 * time.Millisecond))
	q.AllowN(6) // the window is full until 1.1 s
	at := int64(1050 * time.Millisecond)
	if d := q.AllowPriorityNAt(at, 1, 10*time.Millisecond); d.Allowed {
		t.Fatalf("AllowPriorityAt with too short a max wait: %+v", d)
	}
	if d := q.AllowPriorityNAt(at, 1, 100*time.Millisecond); !d.Allowed || d.Wait != 50*time.Millisecond {
		t.Fatalf("AllowPriorityAt: %+v, want allowed after 50ms", d)
	}
	c.Set(at + int64(20*time.Millisecond))
	if d := q.AllowPriorityN(3, 100*time.Millisecond); !d.Allowed || d.Wait != 30*time.Millisecond {
		t.Fatalf("AllowPriorityN(3): %+v, want allowed after 30ms", d)
	}
	if d := q.AllowPriorityN(1, time.Second); d.Allowed || d.Reason != RateLimited {
		t.Fatalf("a fifth borrowed place: %+v, want blocked", d)
	}
}
