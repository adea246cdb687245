package clock_test

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// A Manual clock drives time-dependent code in tests without sleeping.
func ExampleManual() {
	c := clock.NewManual(0)
	start := c.Now()
	c.Advance(1500 * time.Millisecond)
	fmt.Println(time.Duration(c.Now() - start))
	// Output: 1.5s
}

// System is the clock to use in production: monotonic nanoseconds.
func ExampleSystem() {
	start := clock.System.Now()
	elapsed := time.Duration(clock.System.Now() - start)
	fmt.Println(elapsed >= 0)
	// Output: true
}
