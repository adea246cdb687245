// Command comparetable runs the benchmarks of package compare in one process
// with testing.Benchmark and prints a markdown table of the results, with
// each row's cost relative to its group's baseline and to slidegate.
//
// Usage:
//
//	go run ./cmd/comparetable [-filter regexp] [-count n] [-test.benchtime 1s]
//
// -filter keeps the rows whose name (Shape/mode/implementation, as in
// go test -bench) matches, plus the baseline and slidegate rows of their
// groups. -count runs every row n times, round robin, and reports the run
// with the median ns/op. Progress goes to stderr, the table to stdout. Rows
// that cannot run on this machine (the Redis rows without redis-server) are
// left out, saying why on stderr; the redis-server the Redis rows start is
// stopped before the table is printed. The units rows report besides ns/op
// (compare.Metrics: round trips per decision for the Redis rows) get a
// column when a printed row reports them.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/benchmarks/compare"
)

func main() {
	testing.Init() // registers -test.benchtime, which testing.Benchmark honours
	filter := flag.String("filter", "", "run only rows whose name matches this regexp, with their groups' baseline and slidegate rows")
	count := flag.Int("count", 1, "run each row this many times and report the median")
	flag.Parse()
	re, err := regexp.Compile(*filter)
	if err != nil || *count < 1 {
		fmt.Fprintln(os.Stderr, "comparetable: bad -filter or -count:", err)
		os.Exit(2)
	}

	rows := available(selectRows(compare.Rows(), re))
	runs := make([][]testing.BenchmarkResult, len(rows))
	for range *count {
		for i, r := range rows {
			fmt.Fprintf(os.Stderr, "%-60s", r.Name)
			res := testing.Benchmark(r.Fn)
			fmt.Fprintln(os.Stderr, res.String())
			runs[i] = append(runs[i], res)
		}
	}
	compare.StopRedis()
	results := make([]testing.BenchmarkResult, len(rows))
	for i, rs := range runs {
		slices.SortFunc(rs, func(a, b testing.BenchmarkResult) int { return cmp.Compare(nsPerOp(a), nsPerOp(b)) })
		results[i] = rs[len(rs)/2]
	}
	printTable(os.Stdout, rows, results)
}

// selectRows returns the rows whose name matches re, and the baseline and
// slidegate rows of the groups they belong to.
func selectRows(all []compare.Row, re *regexp.Regexp) []compare.Row {
	groups := map[string]bool{}
	for _, r := range all {
		if re.MatchString(r.Name) {
			groups[r.Group] = true
		}
	}
	var rows []compare.Row
	for _, r := range all {
		if re.MatchString(r.Name) || groups[r.Group] && r.Role != compare.Other {
			rows = append(rows, r)
		}
	}
	return rows
}

// available returns the rows that can run on this machine, and tells on
// stderr, once per reason, which cannot and why.
func available(rows []compare.Row) []compare.Row {
	var ok []compare.Row
	var reasons []string
	left := map[string][]string{} // reason: the rows left out
	for _, r := range rows {
		if r.Unavailable != nil {
			if why := r.Unavailable(); why != "" {
				if _, seen := left[why]; !seen {
					reasons = append(reasons, why)
				}
				left[why] = append(left[why], r.Name)
				continue
			}
		}
		ok = append(ok, r)
	}
	for _, why := range reasons {
		fmt.Fprintf(os.Stderr, "comparetable: leaving out %d rows (%s, ...): %s\n", len(left[why]), left[why][0], why)
	}
	return ok
}

// printTable writes rows and their results as a markdown table. Ratios are
// taken within a group, against its first Baseline row and its first Ours
// row; a group keeps the position of its first row.
func printTable(w io.Writer, rows []compare.Row, results []testing.BenchmarkResult) {
	ns := func(i int) float64 { return nsPerOp(results[i]) }
	var groups []string
	members := map[string][]int{}
	for i, r := range rows {
		if _, ok := members[r.Group]; !ok {
			groups = append(groups, r.Group)
		}
		members[r.Group] = append(members[r.Group], i)
	}

	fmt.Fprintf(w, "%s %s/%s, GOMAXPROCS=%d, %d CPUs, benchtime %s\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU(),
		flag.Lookup("test.benchtime").Value)
	// The extra units, in compare.Metrics' order, that some row reports.
	var units []string
	for _, u := range compare.Metrics {
		for _, r := range results {
			if _, ok := r.Extra[u]; ok {
				units = append(units, u)
				break
			}
		}
	}
	head, rule := "| Operation | Implementation | ns/op | allocs/op | × baseline | × ours |", "|---|---|--:|--:|--:|--:|"
	for _, u := range units {
		head += " " + u + " |"
		rule += "--:|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, g := range groups {
		base, ours := -1, -1
		for _, i := range members[g] {
			if rows[i].Role == compare.Baseline && base < 0 {
				base = i
			}
			if rows[i].Role == compare.Ours && ours < 0 {
				ours = i
			}
		}
		ratio := func(i, ref int) string {
			if ref < 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f", ns(i)/ns(ref))
		}
		for k, i := range members[g] {
			op := ""
			if k == 0 {
				op = g
			}
			fmt.Fprintf(w, "| %s | %s | %.1f | %d | %s | %s |",
				op, rows[i].Impl, ns(i), results[i].AllocsPerOp(), ratio(i, base), ratio(i, ours))
			for _, u := range units {
				fmt.Fprintf(w, " %s |", metric(results[i], u))
			}
			fmt.Fprintln(w)
		}
	}
}

// metric formats r's value in unit, or a dash if r does not report it: rates
// (per second) as whole numbers, other values with two decimals, or two
// significant digits below 0.01.
func metric(r testing.BenchmarkResult, unit string) string {
	v, ok := r.Extra[unit]
	switch {
	case !ok:
		return "–"
	case strings.HasSuffix(unit, "/s"):
		return fmt.Sprintf("%.0f", v)
	case v == 0 || v >= 0.01:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

// nsPerOp returns r's time per operation, unrounded (r.NsPerOp truncates).
func nsPerOp(r testing.BenchmarkResult) float64 {
	return float64(r.T.Nanoseconds()) / float64(r.N)
}
