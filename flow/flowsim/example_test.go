package flowsim_test

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/flow/flowsim"
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
