package flow

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

func TestQPSSetLimitKeepsCounts(t *testing.T) {
	clk := clock.NewManual(0)
	q, err := NewQPS(QPSSettings{Limit: 10, Interval: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	allow := func(want int64) {
		t.Helper()
		var n int64
		for q.Allow().Allowed {
			n++
		}
		if n != want {
			t.Fatalf("allowed %d, want %d", n, want)
		}
	}
	for range 5 {
		q.Allow()
	}
	if err := q.SetLimit(6); err != nil {
		t.Fatal(err)
	}
	allow(1) // the 5 allowed count against the new limit, in the open bucket too
	clk.Advance(100 * time.Millisecond)
	allow(0)
	if err := q.SetLimit(20); err != nil {
		t.Fatal(err)
	}
	allow(14)
	if q.limitNow() != 20 {
		t.Fatalf("Limit() = %d", q.limitNow())
	}
	clk.Advance(time.Second + time.Second/flowlimits.DefaultBuckets)
	allow(20)

	for _, bad := range []int64{-1, maxLimit + 1} {
		if err := q.SetLimit(bad); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "limit = ") {
			t.Errorf("SetLimit(%d) = %v, want config.ErrInvalid naming the limit", bad, err)
		}
	}
	if q.limitNow() != 20 {
		t.Errorf("a SetLimit that failed changed the limit to %d", q.limitNow())
	}
	w, err := NewQPS(QPSSettings{Limit: 10, Interval: time.Second, WarmUp: 2 * time.Second, ColdFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.SetLimit(5); !errors.Is(err, config.ErrInvalid) || w.limitNow() != 10 {
		t.Errorf("SetLimit on a warming limiter = %v, limit %d; want an error, 10", err, w.limitNow())
	}
}

func TestConcurrencySetLimitKeepsInFlight(t *testing.T) {
	c, err := NewConcurrency(ConcurrencySettings{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	var ps [3]Permit
	for i := range ps {
		if !c.Acquire(&ps[i], "").Allowed {
			t.Fatal("blocked under the limit")
		}
	}
	if err := c.Set(2, nil); err != nil {
		t.Fatal(err)
	}
	var p Permit
	if c.Acquire(&p, "").Allowed {
		t.Fatal("allowed with 3 in flight and a limit of 2")
	}
	ps[0].Done(Succeeded)
	if c.Acquire(&p, "").Allowed {
		t.Fatal("allowed with 2 in flight and a limit of 2")
	}
	ps[1].Done(Succeeded)
	if !c.Acquire(&p, "").Allowed {
		t.Fatal("blocked with 1 in flight and a limit of 2")
	}
	if err := c.Set(-1, nil); !errors.Is(err, config.ErrInvalid) || c.limitNow() != 2 {
		t.Errorf("SetLimit(-1) = %v, limit %d", err, c.limitNow())
	}
}

// Under -race: changing the limit while requests are decided. Afterwards a
// fresh window allows exactly the last limit set.
func TestQPSSetLimitConcurrent(t *testing.T) {
	q, err := NewQPS(QPSSettings{Limit: 50, Interval: time.Second, Clock: clock.NewManual(0), Buckets: 10})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var allowed atomic.Int64
	var last atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				if q.AllowAt(int64(i) * int64(time.Millisecond)).Allowed {
					allowed.Add(1)
				}
				if w == 0 && i%7 == 0 {
					l := int64(30 + 20*(i/7%2))
					_ = q.SetLimit(l)
					last.Store(l)
				}
			}
		}()
	}
	wg.Wait()
	// 3 s of requests: at most the larger limit in each of 3 seconds and the
	// bucket the run ends in.
	if n := allowed.Load(); n > 50*4 {
		t.Fatalf("%d allowed in 3 s", n)
	}
	if q.limitNow() != last.Load() {
		t.Fatalf("Limit() = %d, last set %d", q.limitNow(), last.Load())
	}
	var n int64
	for q.AllowAt(int64(time.Hour)).Allowed {
		n++
	}
	if n != last.Load() {
		t.Fatalf("a fresh window allowed %d, want the last limit %d", n, last.Load())
	}
}
