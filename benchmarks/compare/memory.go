package compare

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The memory table: the heap one resource takes in each library, in a few
// configurations, measured in one process.
//
// The method: collect garbage twice (the second collection also empties
// sync.Pools, which keep what the first one left for a cycle) and read
// runtime.MemStats; make N resources; collect twice again and read again;
// the heap bytes per resource are (HeapAlloc after − HeapAlloc before) / N.
// Everything made stays reachable until the second reading; what only the
// measurement holds (the names it enters) is let go before it.
//
// What a library keeps per resource is counted wherever it keeps it:
// sentinel's global maps of statistics, rules, traffic controllers and
// breakers, and the Prometheus series its statistics slot adds per
// resource; slidegate's resource table and rule snapshot; the name and its
// map entry. What sentinel and go-zero keep whatever their resources (the
// slot chain, the inbound statistics, go-zero's CPU sampler) is made before
// the first reading and not counted. slidegate's guard is made between the
// readings, so that anything it sizes by its bound (WithMaxResources) is
// counted; its own two resources (inbound traffic and OtherResource) come
// with it, a few bytes per resource at the N of the table.
//
// Three things keep the figure to what the resources cost. Each
// configuration of each library is measured once on a few resources before
// the table, and that figure dropped: a first measurement would also pay
// for what a library or the runtime makes once, on first use. Every
// measurement names its resources anew (namespace). And a reading is the
// least of a few (heapAfterGC).

// A MemoryConfig is what each resource is given and how it is used: one
// row of the memory table per resource count.
type MemoryConfig int

// The configurations of the memory table, in its order.
const (
	// NoRules: a resource entered once (and exited with success), no rules.
	NoRules MemoryConfig = iota
	// QPSAndBreaker: a resource with a QPS rule and an error-ratio breaker,
	// entered once.
	QPSAndBreaker
	// NoRulesContended: NoRules, then entered and exited concurrently from
	// several goroutines many times.
	NoRulesContended
	// QPSAndBreakerContended: QPSAndBreaker, then entered and exited
	// concurrently from several goroutines many times.
	QPSAndBreakerContended
	numMemoryConfigs
)

// String returns the configuration's name in Go.
func (c MemoryConfig) String() string {
	switch c {
	case NoRules:
		return "NoRules"
	case QPSAndBreaker:
		return "QPSAndBreaker"
	case NoRulesContended:
		return "NoRulesContended"
	case QPSAndBreakerContended:
		return "QPSAndBreakerContended"
	}
	return "MemoryConfig(" + strconv.Itoa(int(c)) + ")"
}

// contended reports whether the configuration's resources are entered
// concurrently before the second reading.
func (c MemoryConfig) contended() bool { return c == NoRulesContended || c == QPSAndBreakerContended }

// withRules reports whether the configuration's resources have rules.
func (c MemoryConfig) withRules() bool { return c == QPSAndBreaker || c == QPSAndBreakerContended }

// MemoryOptions say how many resources the memory table makes, and how hard
// the contended rows are entered.
type MemoryOptions struct {
	// Sizes are the resource counts N of the rows without contention: a row
	// per configuration and size, so that the table shows whether the
	// figure per resource depends on N.
	Sizes []int
	// Contended is the number of resources of the contended rows.
	Contended int
	// Ops is how many times each contended resource is entered and exited,
	// all goroutines together.
	Ops int
	// Goroutines is how many goroutines enter each contended resource at
	// once; 0 means GOMAXPROCS.
	Goroutines int
	// ContendAll measures the contended rows of every library; otherwise
	// only slidegate's, whose counters add per-core stripes when they meet
	// contention. The others' take most of the time (sentinel's Entry and
	// Exit take microseconds: 4 million of them, seconds).
	ContendAll bool
}

// DefaultMemoryOptions are the options of cmd/memtable: the whole table in
// about 15 s on a 2-core machine, sentinel's rule loading for 20,000
// resources included.
var DefaultMemoryOptions = MemoryOptions{Sizes: []int{2_000, 20_000}, Contended: 200, Ops: 10_000}

// warmUpResources is how many resources the warm-up of each configuration
// makes, and how many times it enters each.
const warmUpResources = 20

// MemoryLibrary is a column of the memory table.
type MemoryLibrary struct {
	Name string // with its version, read from the build
	Ours bool   // slidegate
	// cell returns how the library makes resources of configuration c, or
	// a reason why the configuration does not apply to it.
	cell func(c MemoryConfig) (newResidents, string)
}

// A MemoryCell is one figure of the memory table, or the reason for its
// absence.
type MemoryCell struct {
	// BytesPerResource is (HeapAlloc after − HeapAlloc before) / N, NaN
	// when the configuration does not apply (see Absent).
	BytesPerResource float64
	// Absent says why the library has no figure for the configuration, or
	// is empty.
	Absent string
	// Growth is, in a contended row, how much of BytesPerResource the
	// resources gained while they were entered concurrently: the heap per
	// resource after the contention less the heap per resource of the same
	// resources entered once.
	Growth float64
	// Note qualifies a figure (what the library's nearest equivalent is).
	Note string
	// Elapsed is how long making the resources, and entering them
	// concurrently in a contended row, took.
	Elapsed time.Duration
}

// A MemoryRow is one configuration at one resource count, a cell per
// library.
type MemoryRow struct {
	Config MemoryConfig
	N      int
	Cells  []MemoryCell
}

// A MemoryTable is the result of MeasureMemory.
type MemoryTable struct {
	Options    MemoryOptions
	Goroutines int // the goroutines of the contended rows
	Libraries  []MemoryLibrary
	Rows       []MemoryRow
}

// MeasureMemory measures the heap bytes per resource of every library in
// every configuration, in one process, logging each measurement and its
// duration to progress (which may be nil). It must not run concurrently
// with anything else that uses sentinel's global state: it clears
// sentinel's rules and resource statistics after each measurement.
func MeasureMemory(o MemoryOptions, progress io.Writer) (*MemoryTable, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	g := o.Goroutines
	if g == 0 {
		g = runtime.GOMAXPROCS(0)
	}
	t := &MemoryTable{Options: o, Goroutines: g, Libraries: MemoryLibraries()}
	// A first measurement in a process pays for what is made once, on first
	// use, whatever the resources (lazily made global maps and pools, the
	// runtime's goroutine descriptors): each configuration of each library
	// runs once on a few resources first, and its figures are dropped.
	for c := range numMemoryConfigs {
		for _, lib := range t.Libraries {
			if newRes, _ := lib.cell(c); newRes != nil {
				if _, _, _, err := measureResidents(newRes, warmUpResources, warmUpResources, g); err != nil {
					return nil, fmt.Errorf("%s, %s, warm-up: %w", lib.Name, c.label(g, warmUpResources), err)
				}
			}
		}
	}
	for c := range numMemoryConfigs {
		sizes := o.Sizes
		if c.contended() {
			sizes = []int{o.Contended}
		}
		for _, n := range sizes {
			row := MemoryRow{Config: c, N: n}
			for _, lib := range t.Libraries {
				cell := MemoryCell{BytesPerResource: math.NaN()}
				newRes, absent := lib.cell(c)
				switch {
				case newRes == nil:
					cell.Absent = absent
				case c.contended() && !lib.Ours && !o.ContendAll:
					cell.Absent = "not entered concurrently unless asked (memtable -contend-all): its statistics are made in full with the resource."
				default:
					cell.Note = absent
					ops := 0
					if c.contended() {
						ops = o.Ops
					}
					var err error
					cell.BytesPerResource, cell.Growth, cell.Elapsed, err = measureResidents(newRes, n, ops, g)
					if err != nil {
						return nil, fmt.Errorf("%s, %s, N = %d: %w", lib.Name, c.label(g, o.Ops), n, err)
					}
				}
				if cell.Absent != "" {
					fmt.Fprintf(progress, "%s | %s | N = %d: none: %s\n", lib.Name, c.label(g, o.Ops), n, cell.Absent)
				} else {
					fmt.Fprintf(progress, "%s | %s | N = %d: %.0f B per resource (%+.0f B in contention), made in %v\n",
						lib.Name, c.label(g, o.Ops), n, cell.BytesPerResource, cell.Growth, cell.Elapsed.Round(time.Millisecond))
				}
				row.Cells = append(row.Cells, cell)
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t, nil
}

// validate returns an error naming the first option that cannot give a
// figure, and its value.
func (o MemoryOptions) validate() error {
	if len(o.Sizes) == 0 {
		return errors.New("memory options: Sizes is empty: give at least one resource count")
	}
	for i, n := range o.Sizes {
		if n < 1 {
			return fmt.Errorf("memory options: Sizes[%d] = %d: want at least 1", i, n)
		}
	}
	switch {
	case o.Contended < 1:
		return fmt.Errorf("memory options: Contended = %d: want at least 1", o.Contended)
	case o.Ops < 0:
		return fmt.Errorf("memory options: Ops = %d: want 0 or more", o.Ops)
	case o.Goroutines < 0:
		return fmt.Errorf("memory options: Goroutines = %d: want 0 (GOMAXPROCS) or more", o.Goroutines)
	}
	return nil
}

// label is the configuration's name in the table, for contended rows with
// g goroutines and ops entries per resource.
func (c MemoryConfig) label(g, ops int) string {
	contention := fmt.Sprintf(", after contention from GOMAXPROCS goroutines (%d, %s Enter+Exit per resource)", g, thousands(ops))
	switch c {
	case NoRules:
		return "a resource entered once, no rules"
	case QPSAndBreaker:
		return "a resource with a QPS rule and an error-ratio breaker, entered once"
	case NoRulesContended:
		return "a resource entered once, no rules" + contention
	case QPSAndBreakerContended:
		return "a resource with a QPS rule and an error-ratio breaker" + contention
	}
	return c.String()
}

// newResidents prepares a library to make n resources. It runs before the
// first reading: what it makes is not counted.
type newResidents func(n int) (*residents, error)

// residents is one measurement's view of a library: how to make its
// resources, enter them, check them and let them go.
type residents struct {
	// make makes the n resources, each entered and exited once: it runs
	// between the readings.
	make func() error
	// enter enters resource i < n and exits it with success. It may be
	// called from several goroutines at once.
	enter func(i int) error
	// forget lets go of what only the measurement holds (the names it
	// enters), before the second reading. Nil if nothing.
	forget func()
	// check reports an error if the n resources are not all there as
	// made, each entered 1 + ops times (where the library counts it). It
	// runs after the second reading.
	check func(ops int) error
	// release lets go of everything the library keeps for the resources,
	// so that the next measurement starts from the same state.
	release func()
}

// measureResidents makes n resources with the residents newRes returns and
// enters each ops more times from g goroutines at once. It returns the heap
// bytes per resource once all is done, and of that the growth during the
// ops alone (0 if ops is 0), and how long making and entering them took.
func measureResidents(newRes newResidents, n, ops, g int) (perResource, growth float64, elapsed time.Duration, err error) {
	r, err := newRes(n)
	if err != nil {
		return 0, 0, 0, err
	}
	defer r.release()
	bytesPer := func(from, to uint64) float64 { return float64(int64(to)-int64(from)) / float64(n) }
	base := heapAfterGC()
	start := time.Now()
	if err := r.make(); err != nil {
		return 0, 0, 0, err
	}
	if ops > 0 {
		// Both readings around the ops hold the names alike, so their
		// difference is what entering concurrently added.
		elapsed = time.Since(start)
		made := heapAfterGC()
		start = time.Now()
		if err := contend(r.enter, n, ops, g); err != nil {
			return 0, 0, 0, err
		}
		growth = bytesPer(made, heapAfterGC())
	}
	elapsed += time.Since(start)
	if r.forget != nil {
		r.forget()
	}
	end := heapAfterGC()
	runtime.KeepAlive(r) // and so everything its functions hold
	if err := r.check(ops); err != nil {
		return 0, 0, 0, err
	}
	return bytesPer(base, end), growth, elapsed, nil
}

// heapAfterGC returns the bytes of live heap objects: the least HeapAlloc
// of heapReadings readings, each after two collections (the second one
// also empties what sync.Pools kept through the first). A reading counts
// whatever was allocated between the end of its collection and the reading
// itself, such as the samples of go-zero's CPU sampler, which only adds:
// the least reading is the nearest to the live heap.
func heapAfterGC() uint64 {
	least := uint64(math.MaxUint64)
	for range heapReadings {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		least = min(least, m.HeapAlloc)
	}
	return least
}

// heapReadings is how many readings heapAfterGC takes the least of.
const heapReadings = 3

// contend enters each of n resources ops times in all, from g goroutines
// started together on that resource, one resource after another, so that
// the goroutines meet on the same resource's counters.
func contend(enter func(i int) error, n, ops, g int) error {
	var (
		mu    sync.Mutex
		first error
	)
	for i := range n {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k := range g {
			share := ops / g // the first ops % g goroutines take one more
			if k < ops%g {
				share++
			}
			wg.Go(func() {
				<-start
				for range share {
					if err := enter(i); err != nil {
						mu.Lock()
						first = cmp.Or(first, err)
						mu.Unlock()
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if first != nil {
			return first
		}
	}
	return nil
}

// measurements counts the measurements of the process, so that each names
// its resources anew.
var measurements atomic.Int64

// A namespace names the resources of one measurement, alike in every
// library: "resource-<measurement>-<index>", 18 to 22 bytes. Names are new
// in every measurement because a library may keep something per name that
// outlives its resources: sentinel's statistics slot adds a series to a
// Prometheus counter for every resource, kept in the default registry for
// the life of the process, and a name seen before would not pay for it
// again.
type namespace int64

// newNamespace returns the names of a new measurement.
func newNamespace() namespace { return namespace(measurements.Add(1)) }

// name returns the name of resource i.
func (ns namespace) name(i int) string { return fmt.Sprintf("resource-%d-%06d", ns, i) }

// names returns the names of resources 0 to n−1.
func (ns namespace) names(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = ns.name(i)
	}
	return names
}

// errMissing is wrapped by the checks when a resource is not where it
// should be after the measurement.
var errMissing = errors.New("resource missing")

// moduleVersion returns the version of module path in this build, or "" if
// the build does not say.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

// WriteMarkdown writes the table, and the notes its cells refer to, as
// markdown.
func (t *MemoryTable) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s, GOMAXPROCS=%d, %d CPUs. Heap bytes per resource: (HeapAlloc after − before) / N, each reading after two runtime.GC",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU())
	if slices.ContainsFunc(t.Rows, func(r MemoryRow) bool { return r.Config.contended() }) {
		b.WriteString("; in the rows after contention, (+x) is what the contention added to the same resources entered once")
	}
	b.WriteString(".\n\n")
	b.WriteString("| configuration | N |")
	for _, l := range t.Libraries {
		b.WriteString(" " + l.Name + " |")
	}
	b.WriteString("\n|---|--:|" + strings.Repeat("--:|", len(t.Libraries)) + "\n")
	var notes []string
	mark := func(note string) string {
		for i, n := range notes {
			if n == note {
				return fmt.Sprintf(" [%d]", i+1)
			}
		}
		notes = append(notes, note)
		return fmt.Sprintf(" [%d]", len(notes))
	}
	for _, r := range t.Rows {
		fmt.Fprintf(&b, "| %s | %s |", r.Config.label(t.Goroutines, t.Options.Ops), thousands(r.N))
		for _, c := range r.Cells {
			if c.Absent != "" {
				b.WriteString(" —" + mark(c.Absent) + " |")
				continue
			}
			b.WriteString(" " + thousands(int(math.Round(c.BytesPerResource))))
			if r.Config.contended() {
				fmt.Fprintf(&b, " (%+d)", int(math.Round(c.Growth)))
			}
			if c.Note != "" {
				b.WriteString(mark(c.Note))
			}
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	for i, n := range notes {
		fmt.Fprintf(&b, "[%d] %s\n", i+1, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// thousands formats n with commas between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
