// Command overload runs slidegate's Shedder and Adaptive limiters, go-zero's
// adaptive shedder and go-concurrency-limits' Gradient2 and AIMD limits
// through flowsim's overload scenarios (a service of 1000 requests/s and
// 50 ms service time, 3x overload from cold, capacity halving and doubling,
// bursty arrivals, and 0.8x load), and prints one markdown table: goodput
// as a share of the capacity, p99 latency in service times, the share
// refused, time to converge from cold, time to recover after capacity
// doubles, and the trend of an adaptive limit under sustained overload,
// with the goals slidegate sets itself and the goals each row misses; then
// the attempts per request that clients send a downstream that fails every
// request, retrying naively or within a flow.RetryBudget.
//
// The go-zero rows run in real time (go-zero reads the real clock), all at
// once, so the command takes as long as the longest scenario (30 s);
// -realtime=false leaves them out.
//
// Usage:
//
//	go run ./cmd/overload [-seed 1] [-realtime=true]
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/slidegate/slidegate/benchmarks/compare"
	"github.com/slidegate/slidegate/internal/flowsim"
)

func main() {
	seed := flag.Uint64("seed", 1, "seed of the arrivals and service times")
	realTime := flag.Bool("realtime", true, "include the limiters that must run in real time")
	flag.Parse()

	var limiters []compare.OverloadLimiter
	for _, l := range compare.OverloadLimiters() {
		if l.RealTime && !*realTime {
			continue
		}
		limiters = append(limiters, l)
	}
	svc := flowsim.DefaultService()
	if *realTime {
		fmt.Fprintln(os.Stderr, "overload: the real-time rows take 30 s")
	}
	results, err := compare.Overload(limiters, flowsim.OverloadScenarios(), *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "overload:", err)
		os.Exit(1)
	}
	fmt.Printf("Service: C = %.0f requests/s, S = %v ± %.0f %%, %d workers, client timeout %v; a timed-out request still holds its place and worker. Seed %d; measured from 2 s on.\n\n",
		svc.Capacity, svc.ServiceTime, 100*svc.Jitter, int(svc.Capacity*svc.ServiceTime.Seconds()), svc.Timeout, *seed)
	if err := compare.WriteOverloadTable(os.Stdout, limiters, results); err != nil {
		fmt.Fprintln(os.Stderr, "overload:", err)
		os.Exit(1)
	}
	l, err := compare.SimulateRetryLoad(1000, time.Minute, 3, 10*time.Millisecond,
		0.2, 10, 10*time.Second)
	if err == nil {
		fmt.Println()
		err = compare.WriteRetryLoad(os.Stdout, l)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "overload:", err)
		os.Exit(1)
	}
}
