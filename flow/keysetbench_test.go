package flow

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// BenchmarkKeyedQPSSet reloads a limiter's 10,000 overrides (two sets in
// turn, each with a new limit), while another goroutine decides for keys
// of every shard, and reports beside the time of one Set how long a
// decision took at most (max-stall-µs: waiting for a shard's mutex, or for
// the processor on a busy machine), and how long Set held a shard's mutex
// (from one shard's turn to the next's): the median (hold-p50-µs), the
// 99th percentile (hold-p99-µs) and the most (hold-max-µs), which on a
// busy machine is as much the scheduler's as Set's.
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
	q, _ := NewKeyedQPS(KeyedQPSSettings{Windows: sets[0], Clock: clock.NewManual(0)})
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
	var last time.Time
	var holds []time.Duration
	reshaped = func(shard int) {
		now := time.Now()
		if shard > 0 {
			holds = append(holds, now.Sub(last))
		}
		last = now
	}
	defer func() { reshaped = nil }()
	for i := 0; b.Loop(); i++ {
		if err := q.Set(sets[(i+1)%2]); err != nil {
			b.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	b.ReportMetric(float64(most.Load())/1e3, "max-stall-µs")
	slices.Sort(holds)
	b.ReportMetric(float64(holds[len(holds)/2])/1e3, "hold-p50-µs")
	b.ReportMetric(float64(holds[len(holds)*99/100])/1e3, "hold-p99-µs")
	b.ReportMetric(float64(holds[len(holds)-1])/1e3, "hold-max-µs")
}
