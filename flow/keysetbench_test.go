package flow

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// BenchmarkKeyedQPSSet reloads a limiter's 10,000 overrides (two sets in
// turn, each with a new limit), while another goroutine decides for keys
// of every shard, and reports how long a decision waited at most
// (max-stall-µs) beside the time of one Set.
//
//	go test -run '^$' -bench KeyedQPSSet -count 6 ./flow/
func BenchmarkKeyedQPSSet(b *testing.B) {
	sets := make([][]KeyWindow, 2)
	for s := range sets {
		o := make(map[string]int64, 10000)
		for i := range 10000 {
			o["o"+strconv.Itoa(s)+"-"+strconv.Itoa(i)] = int64(i % 50)
		}
		sets[s] = []KeyWindow{{Limit: int64(10 + s), Interval: time.Second, Overrides: o}}
	}
	q, _ := NewKeyedQPS(sets[0], WithClock(clock.NewManual(0)))
	for i := range 100_000 { // entries and sketches in every shard
		q.AllowNAt(int64(i), "user-"+strconv.Itoa(i), 6)
	}
	var stop atomic.Bool
	var most atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			start := time.Now()
			q.AllowNAt(int64(i), "user-"+strconv.Itoa(i%100_000), 1)
			if d := int64(time.Since(start)); d > most.Load() {
				most.Store(d)
			}
		}
	}()
	for i := 0; b.Loop(); i++ {
		if err := q.Set(sets[(i+1)%2]); err != nil {
			b.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	b.ReportMetric(float64(most.Load())/1e3, "max-stall-µs")
}
