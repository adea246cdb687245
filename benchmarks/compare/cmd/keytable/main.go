// Command keytable compares slidegate's per-key limits with sentinel-golang's
// hotspot rules: it runs the per-key traffic patterns on simulated time and
// prints, for each limiter and pattern, the most requests of any key
// allowed in any interval of the limit's length (wherever it starts), and
// how many keys within their limit were refused; then the heap that a
// million distinct keys in one interval take in each. The speed rows are
// comparetable's (-filter KeyEnterExit|KeysEnterExit).
//
// Usage:
//
//	go run ./cmd/keytable [-limit 10] [-cold-rate 200000] [-duration 10s] [-seed 1] [-keys 1000000]
//	go run ./cmd/keytable -quick          # the scale of go test
//	go run ./cmd/keytable -keys 0         # no memory table
//	go run ./cmd/keytable -duration 0     # no accuracy tables
//
// Progress, with how long each run took, goes to stderr, the tables to
// stdout.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/slidegate/slidegate/benchmarks/compare"
)

func main() {
	full := compare.KeyScaleFull
	limit := flag.Int64("limit", compare.KeyLimit, "requests per key per second")
	coldRate := flag.Int("cold-rate", full.ColdRate, "requests of keys other than the hot key per second of simulated time")
	duration := flag.Duration("duration", full.Duration, "simulated time per pattern (0: no accuracy tables)")
	quick := flag.Bool("quick", false, "the scale of go test (compare.KeyScaleQuick), overriding -cold-rate and -duration")
	seed := flag.Uint64("seed", compare.KeySeed, "seed of the random patterns")
	keys := flag.Int("keys", compare.KeyMemoryKeys, "distinct keys of the memory table (0: no memory table)")
	flag.Parse()
	scale := compare.KeyScale{ColdRate: *coldRate, Duration: *duration}
	if *quick {
		scale = compare.KeyScaleQuick
	}

	start := time.Now()
	w := os.Stdout
	fmt.Fprintf(w, "%s %s/%s, GOMAXPROCS=%d.\n\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
	if scale.Duration > 0 {
		tables, err := compare.KeyAccuracy(scale, *limit, compare.KeyInterval, *seed, os.Stderr)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(w, "Limit %d per key per %v; cold keys at %d requests per second, %v of simulated time per pattern, seed %d.\n\n",
			*limit, compare.KeyInterval, scale.ColdRate, scale.Duration, *seed)
		for _, t := range tables {
			if err := compare.WriteKeyTable(w, t, *limit); err != nil {
				fail(err)
			}
			fmt.Fprintln(w)
		}
		if err := compare.WriteKeySummary(w, tables, *limit); err != nil {
			fail(err)
		}
		fmt.Fprintln(w)
	}
	if *keys > 0 {
		rows, err := compare.MeasureKeyMemory(*keys, *limit, os.Stderr)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(w, "Heap for %d distinct keys, one request each, within one interval, under one per-key limit of %d per %v:\n\n",
			*keys, *limit, compare.KeyInterval)
		if err := compare.WriteKeyMemory(w, rows); err != nil {
			fail(err)
		}
	}
	fmt.Fprintf(os.Stderr, "keytable: %v in all\n", time.Since(start).Round(time.Millisecond))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "keytable:", err)
	os.Exit(1)
}
