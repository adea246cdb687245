package flowsim_test

import (
	"fmt"
	"os"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowsim"
)

// Measure a limiter: offer it every standard pattern on simulated time and
// read the most it allowed in any second, wherever the second starts.
func ExampleRun() {
	for _, p := range flowsim.Patterns() {
		q, err := flow.NewQPS(flow.QPSSettings{Limit: 100, Interval: time.Second})
		if err != nil {
			panic(err)
		}
		allow := func(now, n int64) bool { return q.AllowNAt(now, n).Allowed }
		r := flowsim.Run(allow, p, 100, time.Second, 20*time.Second, int64(time.Hour), 1)
		fmt.Printf("%s: at most %d in any second\n", r.Pattern, r.MaxInInterval)
	}
	// Output:
	// steady 2x: at most 100 in any second
	// edge bursts: at most 100 in any second
	// idle then burst: at most 100 in any second
	// poisson 3x: at most 100 in any second
	// random batches: at most 100 in any second
}

// The accuracy simulation: for each traffic pattern, the most allowed in any
// one-second interval, wherever it starts, and the long-run rate, as
// multiples of the limit.
func ExampleWriteTable() {
	const limit = 100
	var results []flowsim.Result
	for _, p := range flowsim.Patterns() {
		q, _ := flow.NewQPS(flow.QPSSettings{Limit: limit, Interval: time.Second})
		allow := func(now, n int64) bool { return q.AllowNAt(now, n).Allowed }
		results = append(results, flowsim.Run(allow, p, limit, time.Second, 60*time.Second, 0, 1))
	}
	flowsim.WriteTable(os.Stdout, "flow.QPS", limit, results)
	// Output:
	// | limiter | pattern | offered | allowed | max in any interval | × limit | allowed per interval | × limit |
	// |---|---|--:|--:|--:|--:|--:|--:|
	// | flow.QPS | steady 2x | 12000 | 5800 | 100 | 1.00 | 96.7 | 0.967 |
	// | flow.QPS | edge bursts | 126000 | 5500 | 100 | 1.00 | 91.7 | 0.917 |
	// | flow.QPS | idle then burst | 4000 | 2000 | 100 | 1.00 | 33.3 | 0.333 |
	// | flow.QPS | poisson 3x | 18176 | 5800 | 100 | 1.00 | 96.7 | 0.967 |
	// | flow.QPS | random batches | 12010 | 5625 | 100 | 1.00 | 93.8 | 0.938 |
}
