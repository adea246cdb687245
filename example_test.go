package slidegate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
)

// Protect a resource with a QPS rule: the third request within the second is
// blocked, and the error says by which rule and when to retry.
func ExampleGuard() {
	g, err := slidegate.New(slidegate.WithClock(clock.NewManual(0)))
	if err != nil {
		panic(err)
	}
	err = g.SetRules(slidegate.Rules{
		Flow: []slidegate.FlowRule{{Resource: "GET /orders", Limit: 2}},
	})
	if err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		e, err := g.Enter(context.Background(), "GET /orders")
		var blocked *slidegate.BlockError
		if errors.As(err, &blocked) {
			fmt.Println("blocked by", blocked.Rule+":", blocked.Reason)
			continue
		}
		// ... serve the request ...
		e.Exit(nil)
		fmt.Println("served")
	}
	s, _ := g.Stats("GET /orders")
	fmt.Println("allowed", s.Allowed, "blocked", s.Blocked)
	// Output:
	// served
	// served
	// blocked by qps: rate limited
	// allowed 2 blocked 1
}

// Rules with a problem are refused whole, with every problem and its place,
// and the rules in force stay.
func ExampleRules_Validate() {
	err := slidegate.Rules{
		Flow:     []slidegate.FlowRule{{Resource: "a", Limit: -1}},
		Breakers: []slidegate.BreakerRule{{Resource: "db", Strategy: "error_ratio", Threshold: 1.5}},
	}.Validate()
	fmt.Println(err)
	// Output:
	// slidegate: invalid rules: 2 problems
	// 	flow[0] (resource "a"): limit: -1 must not be negative
	// 	breakers[0] (resource "db"): threshold: 1.5 must be above 0 and at most 1
}

// Exit must be given the request's final error: defer it in a closure that
// reads the named result, so that the breakers see failures.
func ExampleEntry_Exit() {
	g, err := slidegate.New(slidegate.WithClock(clock.NewManual(0)))
	if err != nil {
		panic(err)
	}
	minimum := int64(1)
	err = g.SetRules(slidegate.Rules{
		Breakers: []slidegate.BreakerRule{{Resource: "db", Strategy: slidegate.ErrorCountBreaker, Count: 2, MinRequests: &minimum}},
	})
	if err != nil {
		panic(err)
	}
	query := func() (err error) {
		e, err := g.Enter(context.Background(), "db")
		if err != nil {
			return err
		}
		defer func() { e.Exit(err) }() // not defer e.Exit(err): that records nil
		return errors.New("connection refused")
	}
	for i := 0; i < 3; i++ {
		fmt.Println(query())
	}
	// Output:
	// connection refused
	// connection refused
	// slidegate: db blocked by breaker: breaker open, retry after 5s
}

// Limit each user on its own, with two windows decided together: 2 in any
// second and 3 in any minute. A request one window refuses counts in
// neither.
func ExampleWithKey() {
	clk := clock.NewManual(0)
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	err = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /search", Name: "per user per second", Limit: 2, PerKey: true, Overrides: map[string]int64{"bob": 0}},
		{Resource: "GET /search", Name: "per user per minute", Limit: 3, Interval: slidegate.Duration(time.Minute), PerKey: true},
	}})
	if err != nil {
		panic(err)
	}
	search := func(user string) {
		err := g.Do(context.Background(), "GET /search", func() error { return nil }, slidegate.WithKey(user))
		var blocked *slidegate.BlockError
		if errors.As(err, &blocked) {
			fmt.Printf("%s: blocked by %s (%v), retry after %v\n", user, blocked.Rule, blocked.Reason, blocked.RetryAfter)
			return
		}
		fmt.Println(user + ": served")
	}
	search("alice")
	search("alice")
	search("alice") // the per-second window refuses the third
	search("carol") // another key has its own windows
	search("bob")   // overridden to 0
	clk.Advance(2 * time.Second)
	search("alice")
	search("alice") // the minute window refuses the fourth
	// Output:
	// alice: served
	// alice: served
	// alice: blocked by per user per second (rate limited), retry after 1.05s
	// carol: served
	// bob: blocked by per user per second (exceeds limit), retry after 0s
	// alice: served
	// alice: blocked by per user per minute (rate limited), retry after 1m1s
}

// Listen to a guard's events: a breaker opening, rules put in force.
func ExampleGuard_OnEvent() {
	clk := clock.NewManual(0)
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	told := make(chan slidegate.Event, 16)
	stop := g.OnEvent(func(e slidegate.Event) { told <- e }) // runs off the way of requests
	defer stop()

	err = g.SetRules(slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "mysql", Strategy: slidegate.ConsecutiveFailuresBreaker, Count: 2},
	}})
	if err != nil {
		panic(err)
	}
	for range 2 {
		_ = g.Do(context.Background(), "mysql", func() error { return errors.New("connection refused") })
	}
	fmt.Println((<-told).String())
	fmt.Println((<-told).String())
	// Output:
	// rules in force: breaker rule "breaker" of "mysql" added
	// breaker "breaker" of "mysql": closed → open (tripped: 2 of 2 requests failed, 2 in a row, 0 slow, open for 5s)
}
