// Command memtable measures the heap that one resource takes in slidegate's
// guard, in sentinel-golang and in go-zero, in one process, and prints a
// markdown table of the bytes per resource (see compare.MeasureMemory for
// the method): a resource entered once without rules, one with a QPS rule
// and an error-ratio breaker, at each resource count of -n, and both again
// after their resources have been entered concurrently from -goroutines
// goroutines (slidegate's only, unless -contend-all).
//
// Usage:
//
//	go run ./cmd/memtable [-n 2000,20000] [-contended 200] [-ops 10000] [-goroutines 0] [-contend-all]
//
// Progress, with how long each measurement took, goes to stderr, the table
// to stdout.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/benchmarks/compare"
)

func main() {
	d := compare.DefaultMemoryOptions
	sizes := flag.String("n", joinInts(d.Sizes), "comma-separated resource counts of the rows without contention")
	contended := flag.Int("contended", d.Contended, "resources of the contended rows")
	ops := flag.Int("ops", d.Ops, "Enter+Exit per contended resource, all goroutines together")
	goroutines := flag.Int("goroutines", d.Goroutines, "goroutines entering a contended resource at once (0: GOMAXPROCS)")
	contendAll := flag.Bool("contend-all", d.ContendAll, "measure the contended rows of sentinel-golang and go-zero too (about 10 s more)")
	flag.Parse()
	o := compare.MemoryOptions{Contended: *contended, Ops: *ops, Goroutines: *goroutines, ContendAll: *contendAll}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintf(os.Stderr, "memtable: -n %q: %v\n", *sizes, err)
			os.Exit(2)
		}
		o.Sizes = append(o.Sizes, n)
	}

	start := time.Now()
	t, err := compare.MeasureMemory(o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memtable:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "memtable: %v in all\n", time.Since(start).Round(time.Millisecond))
	if err := t.WriteMarkdown(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "memtable:", err)
		os.Exit(1)
	}
}

// joinInts writes ns as a comma-separated list.
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
