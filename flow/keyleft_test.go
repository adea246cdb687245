package flow

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// leftAt must say exactly what the next decision allows: left requests
// fit, left+1 do not. Keys in hot entries and keys in the sketch (a budget
// of 0 keeps most keys there) are both checked, over two windows.
func TestKeyedLeftIsWhatTheNextDecisionAllows(t *testing.T) {
	for _, budget := range []int64{0, 64 << 20} {
		mem, err := NewKeyMemory(budget)
		if err != nil {
			t.Fatal(err)
		}
		c := clock.NewManual(0)
		q, err := NewKeyedQPS(KeyedQPSSettings{
			Windows: []KeyWindow{
				{Limit: 7, Interval: time.Second},
				{Limit: 20, Interval: 10 * time.Second, Overrides: map[string]int64{"vip": 40}},
			},
			KeyMemory: mem,
			Clock:     c,
		})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, uint64(budget)))
		checked := 0
		for i := range 40000 {
			now := int64(i) * int64(time.Millisecond) / 4
			key := "vip"
			if r.IntN(8) > 0 {
				key = "k" + strconv.Itoa(r.IntN(3000))
			}
			left := q.leftAt(now, key)
			if d, _ := q.AllowNAt(now, key, left+1); d.Allowed {
				t.Fatalf("budget %d, key %s at %d: leftAt said %d, yet %d were allowed", budget, key, now, left, left+1)
			}
			if left > 0 {
				n := 1 + r.Int64N(left)
				if d, j := q.AllowNAt(now, key, n); !d.Allowed {
					t.Fatalf("budget %d, key %s at %d: leftAt said %d, yet %d were refused by window %d", budget, key, now, left, n, j)
				}
				checked++
			}
		}
		if checked < 1000 {
			t.Fatalf("budget %d: only %d allowed decisions checked", budget, checked)
		}
	}
}
