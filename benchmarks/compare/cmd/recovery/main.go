// Command recovery replays an outage through go-zero's breaker and
// slidegate's SRE breaker, and prints, second by second after the
// outage, the share of the requests each let through, as a markdown table.
// Requests come evenly spaced; the dependency handles every request, then
// fails every one for the outage, then handles every one again.
//
// go-zero's breaker reads the real clock, so the scenario runs in real time,
// with slidegate's breaker on the system clock beside it (32 s with the
// defaults); slidegate's breaker also runs on a simulated clock, under its
// default block policy and under CountBlocks. -realtime=false leaves the
// real-time columns out.
//
// Usage:
//
//	go run ./cmd/recovery [-rate 1000] [-outage 10s] [-after 12] [-seed 1] [-realtime=true]
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/slidegate/slidegate/benchmarks/compare"
)

func main() {
	sc := compare.DefaultRecovery
	flag.IntVar(&sc.Rate, "rate", sc.Rate, "requests per second")
	flag.DurationVar(&sc.Outage, "outage", sc.Outage, "how long the dependency fails every request")
	flag.IntVar(&sc.After, "after", sc.After, "seconds measured after the outage")
	seed := flag.Uint64("seed", 1, "seed of the simulated breakers' draws")
	realTime := flag.Bool("realtime", true, "run go-zero's breaker and slidegate's beside it in real time")
	flag.Parse()
	if sc.Rate < 1 || sc.Rate > 100_000 || sc.Outage <= 0 || sc.After < 1 {
		fmt.Fprintf(os.Stderr, "recovery: -rate %d (1 to 100,000), -outage %v (positive), -after %d (at least 1)\n", sc.Rate, sc.Outage, sc.After)
		os.Exit(2)
	}
	var rows []compare.RecoveryRow
	if *realTime {
		fmt.Fprintf(os.Stderr, "recovery: the real-time columns take %v\n", sc.Healthy+sc.Outage+time.Duration(sc.After)*time.Second)
		rt, err := compare.RecoveryInRealTime(sc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "recovery:", err)
			os.Exit(1)
		}
		rows = append(rows, rt...)
	}
	sim, err := compare.RecoverySimulated(sc, *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recovery:", err)
		os.Exit(1)
	}
	rows = append(rows, sim...)
	fmt.Printf("%d requests/s, evenly spaced; the dependency handles them for %v, fails them all for %v, then handles them again. Share of the requests let through in each second after the outage; seed %d for the simulated columns.\n\n",
		sc.Rate, sc.Healthy, sc.Outage, *seed)
	if err := compare.WriteRecoveryTable(os.Stdout, rows); err != nil {
		fmt.Fprintln(os.Stderr, "recovery:", err)
		os.Exit(1)
	}
}
