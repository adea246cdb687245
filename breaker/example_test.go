package breaker_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
)

var errDown = errors.New("dependency down")

// An Adaptive breaker guarding calls with go-zero's API: while the dependency
// fails, the breaker drops a growing share of the calls.
func ExampleAdaptive() {
	clk := clock.NewManual(0)
	b, err := breaker.NewAdaptive(breaker.WithClock(clk))
	if err != nil {
		panic(err)
	}
	call := func() error { return errDown } // the dependency is down
	var dropped int
	for i := 0; i < 1000; i++ {
		if err := b.Do(call); errors.Is(err, breaker.ErrBlocked) {
			dropped++
		}
		clk.Advance(time.Millisecond)
	}
	s := b.Stats()
	fmt.Println("state:", s.State)
	fmt.Println("most calls dropped:", dropped > 900)
	fmt.Println("calls that reached the dependency:", s.Requests == int64(1000-dropped))
	// Output:
	// state: open
	// most calls dropped: true
	// calls that reached the dependency: true
}

// Allow and a Promise, for code that learns the outcome elsewhere: settle
// the Promise once with Accept, Reject, Done or Ignore.
func ExampleAdaptive_Allow() {
	b, err := breaker.NewAdaptive()
	if err != nil {
		panic(err)
	}
	p, err := b.Allow()
	if err != nil {
		fmt.Println("dropped:", err)
		return
	}
	// ... call the dependency ...
	p.Succeed()
	fmt.Println(b.Stats().Successes)
	// Output: 1
}

// A Circuit opens when half the requests in its window fail, stays open for
// its timeout, then lets one probe through; the probe's success closes it.
func ExampleCircuit() {
	clk := clock.NewManual(0)
	c, err := breaker.NewCircuit(breaker.ErrorRatio(0.5),
		breaker.WithClock(clk), breaker.WithMinRequests(4), breaker.WithOpenTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	for i := 0; i < 4; i++ { // two successes, two failures
		_ = c.Do(func() error {
			if i%2 == 1 {
				return errDown
			}
			return nil
		})
	}
	fmt.Println(c.State(), c.Do(func() error { return nil }))
	clk.Advance(time.Second)
	fmt.Println(c.Do(func() error { return nil }), c.State())
	// Output:
	// open breaker: open
	// <nil> closed
}

// A Circuit that opens when a fifth of the requests take more than 200 ms,
// backs off from 1 s to 30 s while probing fails, and reports its state
// changes.
func ExampleSlowRatio() {
	clk := clock.NewManual(0)
	changed := make(chan breaker.Transition, 10)
	c, err := breaker.NewCircuit(breaker.SlowRatio(200*time.Millisecond, 0.2),
		breaker.WithClock(clk),
		breaker.WithMinRequests(5),
		breaker.WithOpenTimeout(time.Second),
		breaker.WithBackoff(30*time.Second),
		breaker.OnStateChange(func(t breaker.Transition) { changed <- t }))
	if err != nil {
		panic(err)
	}
	for i := 0; i < 5; i++ {
		p, err := c.Allow()
		if err != nil {
			panic(err)
		}
		clk.Advance(time.Duration(50+100*i) * time.Millisecond) // 50, 150, 250, 350, 450 ms
		p.Succeed()
	}
	defer c.Close()
	fmt.Println(<-changed) // told on the listener's own goroutine
	// Output:
	// closed → open (tripped: 0 of 5 requests failed, 3 slow, open for 1s)
}
