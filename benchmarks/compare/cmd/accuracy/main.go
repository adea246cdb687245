// Command accuracy runs slidegate's flow.QPS limiter, x/time/rate and
// sentinel's QPS flow rule through the traffic patterns of flowsim on
// simulated time, and prints, for each, the most requests allowed in any
// interval of the limit's length (wherever it starts) and the long-run
// allowed rate, as markdown tables.
//
// Usage:
//
//	go run ./cmd/accuracy [-limit 100] [-interval 1s] [-duration 60s] [-seed 1]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/slidegate/slidegate/benchmarks/compare"
	"github.com/slidegate/slidegate/internal/flowsim"
)

func main() {
	limit := flag.Int64("limit", compare.AccuracyLimit, "requests per interval")
	interval := flag.Duration("interval", compare.AccuracyInterval, "the limit's interval")
	duration := flag.Duration("duration", compare.AccuracyDuration, "simulated time per run")
	seed := flag.Uint64("seed", compare.AccuracySeed, "seed of the random patterns")
	flag.Parse()

	tables, err := compare.Accuracy(*limit, *interval, *duration, *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "accuracy:", err)
		os.Exit(1)
	}
	w := os.Stdout
	fmt.Fprintf(w, "Limit %d per %v, %v of simulated time per pattern, seed %d.\n\n", *limit, *interval, *duration, *seed)
	for _, t := range tables {
		if err := flowsim.WriteTable(w, t.Limiter.Name, *limit, t.Results); err != nil {
			fmt.Fprintln(os.Stderr, "accuracy:", err)
			os.Exit(1)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "| limiter | worst max in any interval | × limit |")
	fmt.Fprintln(w, "|---|--:|--:|")
	for _, t := range tables {
		var worst int64
		for _, r := range t.Results {
			worst = max(worst, r.MaxInInterval)
		}
		fmt.Fprintf(w, "| %s | %d | %.2f |\n", t.Limiter.Name, worst, float64(worst)/float64(*limit))
	}
}
