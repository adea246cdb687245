package window_test

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/window"
)

// Count requests over the last 10 seconds in 100 ms buckets, and read the
// last second of it.
func ExampleCounter() {
	c := clock.NewManual(0)
	ctr, err := window.NewCounter(100, 10*time.Second, window.WithClock(c))
	if err != nil {
		panic(err)
	}
	for i := 0; i < 50; i++ { // 50 requests, one every 100 ms, every fifth an error
		ctr.Add(window.Allowed, 1)
		if i%5 == 0 {
			ctr.Add(window.Failed, 1)
		}
		c.Advance(100 * time.Millisecond)
	}
	lastSecond, err := ctr.View(time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("allowed in 10 s:", ctr.Sum(window.Allowed))
	fmt.Println("failed in 10 s:", ctr.Sum(window.Failed))
	fmt.Println("allowed in the last second:", lastSecond.Sum(window.Allowed))
	// Output:
	// allowed in 10 s: 50
	// failed in 10 s: 10
	// allowed in the last second: 9
}

// The ...At methods take the time, for code that has already read the clock
// or that simulates traffic.
func ExampleCounter_AddAt() {
	ctr, _ := window.NewCounter(2, time.Second)
	now := int64(10 * time.Second)
	ctr.AddAt(now, window.Allowed, 3)
	ctr.AddAt(now+int64(600*time.Millisecond), window.Allowed, 4)
	fmt.Println(ctr.SumAt(now+int64(600*time.Millisecond), window.Allowed))
	fmt.Println(ctr.SumAt(now+int64(1200*time.Millisecond), window.Allowed)) // the first bucket has left
	// Output:
	// 7
	// 4
}

// A RollingWindow works as go-zero's does: Add values, Reduce buckets. It
// takes the whole interval, here ten buckets over one second, where go-zero
// takes one bucket's width.
func ExampleRollingWindow() {
	c := clock.NewManual(0)
	rw, err := window.NewRollingWindow(10, time.Second, window.WithClock(c))
	if err != nil {
		panic(err)
	}
	for i := 0; i < 20; i++ { // 20 calls over 1 s; 1 for success, 0 for failure
		rw.Add(int64(i % 2))
		c.Advance(50 * time.Millisecond)
	}
	var succeeded, total int64
	rw.Reduce(func(b window.Bucket) {
		succeeded += b.Sum
		total += b.Count
	})
	fmt.Printf("%d of %d succeeded\n", succeeded, total)
	// Output: 9 of 18 succeeded
}

// A Histogram answers latency quantiles over the last part of its interval.
func ExampleHistogram() {
	c := clock.NewManual(0)
	h, err := window.NewHistogram(10, 10*time.Second, window.WithClock(c))
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 1000; i++ { // 1 ms .. 1 s over one second
		h.Record(time.Duration(i) * time.Millisecond)
		c.Advance(time.Millisecond)
	}
	s := h.Summary()
	fmt.Println("count:", s.Count, "max:", s.Max)
	fmt.Println("p50 within 1%:", within(s.P50, 500*time.Millisecond))
	fmt.Println("p99 within 1%:", within(s.P99, 990*time.Millisecond))
	// Output:
	// count: 1000 max: 1s
	// p50 within 1%: true
	// p99 within 1%: true
}

func within(got, want time.Duration) bool {
	d := got - want
	return d < want/100 && -d < want/100
}

// Keep a resource's response times in a Sketch: the quantiles within
// 4.43%, the maximum exact, over the last 5 to 10 seconds.
func ExampleSketch() {
	c := clock.NewManual(0)
	lat, err := window.NewSketch(10*time.Second, window.WithClock(c))
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 100; i++ { // 1 ms, 2 ms, ... 100 ms
		lat.Record(time.Duration(i) * time.Millisecond)
	}
	s := lat.Summary()
	fmt.Println("count:", s.Count, "max:", s.Max)
	fmt.Println("p50 within 4.43% of 50ms:", s.P50 > 47800*time.Microsecond && s.P50 < 52300*time.Microsecond)
	c.Advance(10 * time.Second) // both halves have left
	fmt.Println("count 10 s later:", lat.Summary().Count)
	// Output:
	// count: 100 max: 100ms
	// p50 within 4.43% of 50ms: true
	// count 10 s later: 0
}

// Count with totals since the Counter was made, and only the events read:
// what a metrics exporter wants, in a fraction of the memory.
func ExampleWithTotals() {
	c := clock.NewManual(0)
	ctr, err := window.NewCounter(10, 10*time.Second, window.WithClock(c),
		window.WithEvents(window.Allowed, window.Failed), window.WithTotals())
	if err != nil {
		panic(err)
	}
	for range 30 { // one a second for 30 s
		c.Advance(time.Second)
		ctr.Add(window.Allowed, 1)
	}
	fmt.Println("allowed in the last 10 s:", ctr.Sum(window.Allowed))
	fmt.Println("allowed in all:", ctr.Totals()[window.Allowed])
	// Output:
	// allowed in the last 10 s: 10
	// allowed in all: 30
}
