package flow

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

func TestQPSGiveBackFreesThePlaces(t *testing.T) {
	c := clock.NewManual(0)
	q, _ := NewQPS(QPSSettings{Limit: 3, Interval: time.Second, Clock: c})
	var gs []Grant
	for range 3 {
		d, g := q.GrantNAt(0, 1)
		if !d.Allowed {
			t.Fatal("refused below the limit")
		}
		gs = append(gs, g)
	}
	if d, _ := q.GrantNAt(1, 1); d.Allowed {
		t.Fatal("allowed over the limit")
	}
	q.GiveBack(gs[0])
	q.GiveBack(Grant{}) // holds nothing
	if d, _ := q.GrantNAt(2, 1); !d.Allowed {
		t.Fatal("a place given back was not free again")
	}
	if d, _ := q.GrantNAt(3, 1); d.Allowed {
		t.Fatal("one place given back let two through")
	}
	// A sealed bucket's places, given back, leave the next window's room.
	next := int64(time.Second / flowlimits.DefaultBuckets)
	if d, _ := q.GrantNAt(next, 1); d.Allowed {
		t.Fatal("allowed over the limit in the next bucket")
	}
	q.GiveBack(gs[1])
	if d, _ := q.GrantNAt(2*next, 1); !d.Allowed {
		t.Fatal("a place given back from a sealed bucket was not free in a later one")
	}
}

// Concurrent grants, some given back: what stays counted never exceeds the
// limit in any k+1 buckets, on the stripes too. Callers race on times, so
// the test records the bucket each request was counted in.
func TestQPSGiveBackUnderContentionKeepsTheLimit(t *testing.T) {
	c := clock.NewManual(0)
	const limit = 200
	q, _ := NewQPS(QPSSettings{Limit: limit, Interval: time.Second, Clock: c})
	var mu sync.Mutex
	kept := map[uint64]int64{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 20000 {
				now := int64(i) * int64(200*time.Microsecond)
				d, g := q.GrantNAt(now, 1)
				if !d.Allowed {
					continue
				}
				if r.IntN(3) == 0 {
					q.GiveBack(g)
					continue
				}
				mu.Lock()
				kept[g.bucket]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	worst := int64(0)
	for b := range kept {
		var sum int64
		for x := b; x <= b+q.k; x++ {
			sum += kept[x]
		}
		if sum > limit {
			t.Fatalf("%d kept in the %d buckets from %d, limit %d", sum, q.k+1, b, limit)
		}
		worst = max(worst, sum)
	}
	if worst < limit*9/10 {
		t.Fatalf("at most %d kept in k+1 buckets: given back places were not reused", worst)
	}
}
