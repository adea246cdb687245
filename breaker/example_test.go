package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
)

var (
	errDown = errors.New("dependency down")
	ctx     = context.Background()
)

// An SRE breaker guarding calls with Do: while the dependency fails, the
// breaker blocks a growing share of the calls.
func ExampleSRE() {
	clk := clock.NewManual(0)
	b, err := breaker.NewSRE(breaker.WithClock(clk))
	if err != nil {
		panic(err)
	}
	call := func() error { return errDown } // the dependency is down
	var blocked int
	for i := 0; i < 1000; i++ {
		if err := b.Do(ctx, call); errors.Is(err, breaker.ErrBlocked) {
			blocked++
		}
		clk.Advance(time.Millisecond)
	}
	s := b.Stats()
	fmt.Println("state:", s.State)
	fmt.Println("most calls blocked:", blocked > 900)
	fmt.Println("calls that reached the dependency:", s.Requests == int64(1000-blocked))
	// Output:
	// state: open
	// most calls blocked: true
	// calls that reached the dependency: true
}

// Allow and a Promise, for code that learns the outcome elsewhere: settle
// the Promise once with Done.
func ExampleSRE_Allow() {
	b, err := breaker.NewSRE()
	if err != nil {
		panic(err)
	}
	p, err := b.Allow()
	if err != nil {
		fmt.Println("blocked:", err)
		return
	}
	err = nil // ... call the dependency ...
	p.Done(err)
	fmt.Println(b.Stats().Successes)
	// Output: 1
}

// A Circuit opens when half the requests in its window fail, stays open for
// its timeout, then lets one probe through; the probe's success closes it.
func ExampleCircuit() {
	clk := clock.NewManual(0)
	c, err := breaker.NewCircuit(breaker.ErrorRatio(0.5),
		breaker.WithClock(clk), breaker.WithMinRequests(4), breaker.WithOpenTimeout(time.Second, 0))
	if err != nil {
		panic(err)
	}
	for i := 0; i < 4; i++ { // two successes, two failures
		_ = c.Do(ctx, func() error {
			if i%2 == 1 {
				return errDown
			}
			return nil
		})
	}
	fmt.Println(c.Stats().State, c.Do(ctx, func() error { return nil }))
	clk.Advance(time.Second)
	fmt.Println(c.Do(ctx, func() error { return nil }), c.Stats().State)
	// Output:
	// open breaker: blocked
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
		breaker.WithOpenTimeout(time.Second, 30*time.Second),
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
		p.Done(nil)
	}
	fmt.Println(<-changed) // told on the listener's own goroutine
	// Output:
	// closed → open (tripped: 0 of 5 requests failed, 0 in a row, 3 slow, open for 1s)
}

// A Circuit that opens after three failures in a row, however many requests
// succeeded before them; a success in between starts the run again.
func ExampleConsecutiveFailures() {
	clk := clock.NewManual(0)
	c, err := breaker.NewCircuit(breaker.ConsecutiveFailures(3), breaker.WithClock(clk))
	if err != nil {
		panic(err)
	}
	ok := func() error { return nil }
	down := func() error { return errDown }
	for _, call := range []func() error{ok, ok, ok, down, down, ok, down, down} {
		_ = c.Do(ctx, call)
	}
	s := c.Stats()
	fmt.Println(s.State, s.ConsecutiveFailures, "in a row of", s.Failures, "failures")
	_ = c.Do(ctx, down)
	fmt.Println(c.Stats().State)
	// Output:
	// closed 2 in a row of 4 failures
	// open
}

// A condition of your own over the window's counts, as gobreaker's
// ReadyToTrip: here, at least 20 requests of which 60% failed, or 5 failures
// in a row.
func ExampleTripWhen() {
	clk := clock.NewManual(0)
	c, err := breaker.NewCircuit(breaker.TripWhen(func(n breaker.Stats) bool {
		return (n.Requests >= 20 && n.Failures*5 >= n.Requests*3) || n.ConsecutiveFailures >= 5
	}), breaker.WithClock(clk))
	if err != nil {
		panic(err)
	}
	for i := 0; i < 20; i++ { // 12 of 20 fail, the last one too; never 5 in a row
		_ = c.Do(ctx, func() error {
			if i%5 >= 2 {
				return errDown
			}
			return nil
		})
	}
	fmt.Println(c.Stats().State, c.Do(ctx, func() error { return nil }))
	// Output:
	// open breaker: blocked
}
