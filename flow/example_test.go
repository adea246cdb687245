package flow_test

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// A QPS limiter of 100 per second.
func ExampleQPS() {
	c := clock.NewManual(0)
	limiter, err := flow.NewQPS(flow.QPSSettings{Limit: 100, Interval: time.Second, Clock: c})
	if err != nil {
		panic(err)
	}
	allowed := 0
	for i := 0; i < 150; i++ { // 150 requests in the first 150 ms
		if limiter.Allow().Allowed {
			allowed++
		}
		c.Advance(time.Millisecond)
	}
	d := limiter.Allow()
	fmt.Println("allowed:", allowed)
	fmt.Println("next:", d.Reason, "retry after", d.RetryAfter)
	// Output:
	// allowed: 100
	// next: rate limited retry after 890ms
}

// A Concurrency limiter of 2 in flight.
func ExampleConcurrency() {
	limiter, err := flow.NewConcurrency(flow.ConcurrencySettings{Limit: 2})
	if err != nil {
		panic(err)
	}
	var first, second, third flow.Permit
	fmt.Println(limiter.Acquire(&first, "").Allowed, limiter.Acquire(&second, "").Allowed, limiter.Acquire(&third, "").Reason)
	first.Done(flow.Succeeded)
	first.Done(flow.Succeeded) // a second Done does nothing
	fmt.Println("in flight:", limiter.InFlight(""))
	// Output:
	// true true concurrency limited
	// in flight: 1
}

// A Throttle of 10 per second spaces requests 100 ms apart. ReserveN gives a
// place at most the maximum wait, here 250 ms, away, and says how long to
// wait for it; Allow lets a request through only if its place is now.
func ExampleThrottle() {
	c := clock.NewManual(0)
	throttle, err := flow.NewThrottle(flow.ThrottleSettings{Limit: 10, Interval: time.Second, MaxWait: 250 * time.Millisecond, Clock: c})
	if err != nil {
		panic(err)
	}
	for i := 0; i < 4; i++ {
		r := throttle.ReserveN("", 1)
		fmt.Println(r.Allowed, r.Wait, r.Reason)
	}
	d := throttle.Allow("")
	fmt.Println(d.Allowed, d.Reason, "retry after", d.RetryAfter)
	// Output:
	// true 0s not blocked
	// true 100ms not blocked
	// true 200ms not blocked
	// false 0s wait too long
	// false rate limited retry after 300ms
}

// A QPS limiter that warms up: from cold it allows a third of its limit, and
// it reaches the full limit after ten seconds of full traffic, where, under
// overload, its 25 buckets allow 25/26 of it.
func ExampleQPS_warmUp() {
	limiter, err := flow.NewQPS(flow.QPSSettings{Limit: 100, Interval: time.Second, WarmUp: 10 * time.Second, ColdFactor: 3})
	if err != nil {
		panic(err)
	}
	perSecond := make([]int, 12)
	for now := int64(0); now < int64(12*time.Second); now += int64(2 * time.Millisecond) { // 500/s offered
		if limiter.AllowAt(now).Allowed {
			perSecond[now/int64(time.Second)]++
		}
	}
	fmt.Println(perSecond)
	// Output: [34 36 38 41 44 48 53 60 73 94 96 97]
}

// A prioritized request that finds the window full may borrow a place in the
// next bucket and wait for it, without ever breaking the limit.
func ExampleQPS_AllowPriorityN() {
	c := clock.NewManual(0)
	limiter, _ := flow.NewQPS(flow.QPSSettings{Limit: 10, Interval: time.Second, Buckets: 10, Clock: c})
	limiter.AllowN(10)                    // the window is full until 1.1 s
	c.Set(int64(1050 * time.Millisecond)) // bucket [1000ms, 1100ms)
	fmt.Println(limiter.Allow().Reason)
	d := limiter.AllowPriorityN(1, 100*time.Millisecond)
	fmt.Println(d.Allowed, "after", d.Wait)
	// Output:
	// rate limited
	// true after 50ms
}
