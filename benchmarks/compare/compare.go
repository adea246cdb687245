// Package compare benchmarks slidegate against other Go libraries that do the
// same job: go-zero, sentinel-golang and hystrix-go for the sliding windows;
// x/time/rate, go.uber.org/ratelimit, sentinel-golang's flow rules and
// x/sync/semaphore for the flow limiters; go-zero's breaker, sony/gobreaker
// and sentinel-golang's circuit-breaker rules for the circuit breakers
// (breaker.go); sentinel-golang's Entry and Exit with a flow rule and a
// circuit-breaker rule, and go-zero's breaker, for the guard (guard.go);
// go-redis/redis_rate and go-zero's core/limit for the cluster-wide limits
// kept in Redis (redislimit.go), which run against a real redis-server that
// the first of them starts and StopRedis stops.
// Accuracy (accuracy.go) measures how exactly the rate limiters keep their
// limit, with flowsim; MeasureMemory (memory.go) the heap one resource
// takes in slidegate's guard, sentinel-golang and go-zero;
// RecoveryInRealTime (recovery.go) the share of requests go-zero's breaker
// and slidegate's SRE breaker let through after an outage.
//
// Each comparison is a Shape: one operation measured on every implementation
// that offers it, next to a baseline measured in the same run. Rows expands
// the shapes into benchmarks, serial and parallel; window_test.go runs them
// with go test -bench, rows_test.go runs each once with plain go test, and
// cmd/comparetable runs them in one process and prints a markdown table. To
// compare something new, append a Shape to Shapes; to add an implementation
// to an operation, append an Impl to its Shape.
package compare

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// An Op performs the measured operation once. Its result is summed and kept,
// so that the compiler cannot drop the work; operations without a result
// return 0.
type Op func() int64

// A Role says how a row is used for the ratios in the table.
type Role int

// The roles of an implementation within its Shape.
const (
	Other    Role = iota // a library compared with ours
	Baseline             // the reference cost of the operation, e.g. time.Now
	Ours                 // slidegate
)

// An Impl is one implementation of a Shape's operation.
type Impl struct {
	Name string
	Role Role
	// Setup builds the structure under test, fills it if needed, and returns
	// the operation. It runs before the timer starts; it may register
	// b.Cleanup functions.
	Setup func(b *testing.B) Op
}

// A Shape is one operation measured on every implementation that offers it.
type Shape struct {
	ID    string // short name used in benchmark names, e.g. "AddClock"
	Name  string // description used in the table
	Impls []Impl
	// Unavailable, if set, says why the shape cannot run on this machine
	// (a server it needs is not installed), or returns "" if it can. Its
	// Setups skip the benchmark then; TestRows and comparetable leave its
	// rows out.
	Unavailable func() string
	// Serial, if true, gives the shape a serial row only: an operation
	// that callers do not run side by side, such as loading rules.
	Serial bool
}

// Shapes lists the comparisons in table order.
var Shapes = []*Shape{addClock, addNow, sumClock, sumNow, allowClock, acquireRelease,
	allowSucceed, breakerDo, blockOpen, guardEntryExit, redisAllow, redisBlock}

// Metrics lists, in table order, the units some rows report besides ns/op
// and allocs/op (with b.ReportMetric): comparetable gives each a column
// when a row it prints reports it.
var Metrics = []string{"roundtrips/op", "rediscalls/op", "script-µs/op", "decisions/s"}

// A Row is one benchmark: an implementation of a shape, run serially or in
// parallel.
type Row struct {
	Name  string // ID/mode/impl, as go test names the sub-benchmark
	Group string // shape name and mode; ratios are taken within a group
	Impl  string
	Role  Role
	Fn    func(b *testing.B)
	// Unavailable is the Shape's: if set and it returns a reason, the row
	// cannot run on this machine.
	Unavailable func() string
}

// Rows returns a serial and a parallel row for every Impl of every Shape
// (a serial row only for a Serial Shape), grouped by shape and mode.
func Rows() []Row {
	var rows []Row
	for _, s := range Shapes {
		modes := []string{"serial", "parallel"}
		if s.Serial {
			modes = modes[:1]
		}
		for _, mode := range modes {
			for _, im := range s.Impls {
				rows = append(rows, Row{
					Name:        s.ID + "/" + mode + "/" + im.Name,
					Group:       s.Name + " (" + mode + ")",
					Impl:        im.Name,
					Role:        im.Role,
					Fn:          bench(im.Setup, mode == "parallel"),
					Unavailable: s.Unavailable,
				})
			}
		}
	}
	return rows
}

// sink keeps the results of every Op.
var sink atomic.Int64

// bench returns a benchmark that calls the Op built by setup b.N times, from
// one goroutine or, if parallel, from GOMAXPROCS goroutines with
// b.RunParallel. Every row, baselines included, pays the same indirect call
// per operation.
func bench(setup func(b *testing.B) Op, parallel bool) func(b *testing.B) {
	return func(b *testing.B) {
		op := setup(b)
		b.ReportAllocs()
		b.ResetTimer()
		if !parallel {
			var s int64
			for i := 0; i < b.N; i++ {
				s += op()
			}
			sink.Add(s)
			return
		}
		b.RunParallel(func(pb *testing.PB) {
			var s int64
			for pb.Next() {
				s += op()
			}
			sink.Add(s)
		})
	}
}

// keepAlive calls add every 10 ms until the benchmark ends, so that a window
// being read keeps receiving data as it would in service: without it, the
// buckets of a clock-reading window expire during the benchmark and some
// implementations then read less.
func keepAlive(b *testing.B, add func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				add()
			}
		}
	}()
	b.Cleanup(func() {
		close(done)
		wg.Wait()
	})
}

// must returns v, or panics if err is not nil: the benchmarks are built from
// constant, valid arguments.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
