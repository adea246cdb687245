package flow_test

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// A client counts each request it sends and asks the budget before each
// retry. Here every attempt fails: of three retries per request, the budget
// lets through at most 20% of the requests plus 10 per second (100 in the
// 10 seconds).
func ExampleRetryBudget() {
	clk := clock.NewManual(0)
	budget, err := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10, Interval: 10 * time.Second, Clock: clk})
	if err != nil {
		panic(err)
	}
	requests, attempts := 0, 0
	for range 1000 { // 100 requests per second for 10 seconds
		clk.Advance(10 * time.Millisecond)
		budget.Request()
		requests++
		attempts++ // it fails
		for range 3 {
			if _, ok := budget.Retry(flow.AttemptFailed); !ok {
				break
			}
			attempts++ // it fails too
		}
	}
	fmt.Printf("%d requests, %d attempts\n", requests, attempts)
	// A half-open breaker's probe is never retried.
	_, ok := budget.Retry(flow.AttemptProbe)
	fmt.Println(ok)
	// Output:
	// 1000 requests, 1299 attempts
	// false
}
