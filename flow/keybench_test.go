package flow

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// Benchmarks of the per-key concurrency limit and pacing, beside the
// unkeyed limiters in the same run; BenchmarkBaselineTimeNow (bench_test.go)
// gives the clock's cost. Run:
//
//	go test -run '^$' -bench 'BaselineTimeNow|KeyedConcurrency|KeyedThrottle' ./flow/

// millionKeys are 2^20 distinct keys, as a per-key rule on a public API
// sees them. Benchmarks take them in order: the seeded hash scatters them
// as it would any keys, and the benchmark does not measure its own random
// reads of a slice of 16 MiB.
var millionKeys = sync.OnceValue(func() []string {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	return keys
})

// keyCases are the keys a benchmark decides for: one key, or a million in
// turn.
func keyCases() []struct {
	name string
	key  func(i int) string
} {
	keys := millionKeys()
	return []struct {
		name string
		key  func(i int) string
	}{
		{"one key", func(int) string { return "hot" }},
		{"random of 1M", func(i int) string { return keys[i&(len(keys)-1)] }},
	}
}

// BenchmarkBaselineMiss reads one word of a 64-byte line of a slice, the
// line picked by the word read before, so that no two reads overlap: what
// a cold key's read of its sketch block costs once the processor's other
// work cannot hide it, for a slice of the size a million keys a second
// give a KeyedQPS's sketches (24 MiB at a limit of 100), and of 1 MiB,
// which the caches hold. Every page is written first.
func BenchmarkBaselineMiss(b *testing.B) {
	for _, mib := range []int{1, 24} {
		b.Run(strconv.Itoa(mib)+"MiB", func(b *testing.B) {
			missLoop(b, make([]uint64, mib<<20/8))
		})
	}
}

// missLoop writes every word of s, then reads, per operation, the first
// word of a line of s drawn by a multiplicative hash of the last read:
// each read waits for the one before, so no other work hides its miss.
func missLoop(b *testing.B, s []uint64) {
	for i := range s {
		s[i] = uint64(i)
	}
	lines := uint64(len(s) / 8)
	x := uint64(1)
	for b.Loop() {
		x = x*0x9E3779B97F4A7C15 + s[(x>>32)*lines>>32*8]&1
	}
	sinkMiss = x
}

var sinkMiss uint64

// BenchmarkKeyedConcurrency acquires and releases one place per request,
// under a limit the requests never reach, for one key and for keys of a
// million, in a sketch of the default size (1 MiB) and the largest (64
// MiB, where a key's block is rarely in cache); and for an unkeyed
// Concurrency.
//
// Each acquisition waits for the one before it, as a server's do: the
// next key's index steps by the key's estimate, read before Done (1, its
// own place, as nothing else is in flight). Without that chain, an
// iteration that fits in the processor's window of instructions in flight
// lets it read the next key's block while this one's is on its way. The
// 64 MiB row then measured that overlap, not a miss: it nearly halved or
// doubled with a few dozen instructions less or more per iteration.
func BenchmarkKeyedConcurrency(b *testing.B) {
	b.Run("unkeyed", func(b *testing.B) {
		c, _ := NewConcurrency(ConcurrencySettings{Limit: 100})
		b.ReportAllocs()
		for b.Loop() {
			var p Permit
			c.Acquire(&p, "")
			p.Done(Succeeded)
		}
	})
	for _, keys := range []int{0, flowlimits.MaxKeysInFlight} {
		for _, tc := range keyCases() {
			c, _ := NewConcurrency(ConcurrencySettings{PerKey: true, Limit: 100, Keys: keys})
			b.Run(tc.name+"/"+strconv.Itoa(c.keys.bytes()>>20)+"MiB", func(b *testing.B) {
				for i := range 1 << 20 { // every page of the sketch touched
					var p Permit
					c.Acquire(&p, millionKeys()[i])
					p.Done(Succeeded)
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); {
					var p Permit
					c.Acquire(&p, tc.key(i))
					i += int(c.keys.estimate(p.h)) // see above
					p.Done(Succeeded)
				}
			})
		}
	}
}

// BenchmarkKeyedConcurrencyParallel is BenchmarkKeyedConcurrency from
// every processor, each taking keys of a million in its own turn.
func BenchmarkKeyedConcurrencyParallel(b *testing.B) {
	b.Run("unkeyed", func(b *testing.B) {
		c, _ := NewConcurrency(ConcurrencySettings{Limit: 1 << 20})
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				var p Permit
				c.Acquire(&p, "")
				p.Done(Succeeded)
			}
		})
	})
	var next atomic.Int64
	for _, tc := range keyCases() {
		c, _ := NewConcurrency(ConcurrencySettings{PerKey: true, Limit: 1 << 20})
		b.Run(tc.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1) << 16)
				for pb.Next() {
					var p Permit
					c.Acquire(&p, tc.key(i))
					p.Done(Succeeded)
					i++
				}
			})
		})
	}
}

// BenchmarkKeyedThrottle decides one request at a time, under a limit the
// requests never reach (every decision allows and takes a place), for one
// key and for keys of a million, with the time given (AllowNAt) and read
// from the system clock inside (Allow); and for an unkeyed Throttle.
func BenchmarkKeyedThrottle(b *testing.B) {
	b.Run("unkeyed/now given", func(b *testing.B) {
		th, _ := NewThrottle(ThrottleSettings{Limit: maxLimit, Interval: time.Second, MaxWait: time.Hour})
		b.ReportAllocs()
		now := int64(0)
		for b.Loop() {
			now += 100
			th.AllowNAt(now, "", 1)
		}
	})
	b.Run("unkeyed/clock read", func(b *testing.B) {
		th, _ := NewThrottle(ThrottleSettings{Limit: maxLimit, Interval: time.Second, MaxWait: time.Hour})
		b.ReportAllocs()
		for b.Loop() {
			th.Allow("")
		}
	})
	for _, tc := range keyCases() {
		b.Run(tc.name+"/now given", func(b *testing.B) {
			th, _ := NewThrottle(ThrottleSettings{PerKey: true, Limit: maxLimit, Interval: time.Second, MaxWait: time.Hour, Clock: clock.NewManual(0)})
			b.ReportAllocs()
			now := int64(0)
			for i := 0; b.Loop(); i++ {
				now += 100
				th.AllowNAt(now, tc.key(i), 1)
			}
		})
		b.Run(tc.name+"/clock read", func(b *testing.B) {
			th, _ := NewThrottle(ThrottleSettings{PerKey: true, Limit: maxLimit, Interval: time.Second, MaxWait: time.Hour})
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				th.Allow(tc.key(i))
			}
		})
	}
}

// BenchmarkKeyedThrottleParallel is BenchmarkKeyedThrottle with the clock
// read inside, from every processor.
func BenchmarkKeyedThrottleParallel(b *testing.B) {
	b.Run("unkeyed", func(b *testing.B) {
		th, _ := NewThrottle(ThrottleSettings{Limit: maxLimit, Interval: time.Second, MaxWait: time.Hour})
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				th.Allow("")
			}
		})
	})
	var next atomic.Int64
	for _, tc := range keyCases() {
		th, _ := NewThrottle(ThrottleSettings{PerKey: true, Limit: maxLimit, Interval: time.Second, MaxWait: time.Hour})
		b.Run(tc.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1) << 16)
				for pb.Next() {
					th.Allow(tc.key(i))
					i++
				}
			})
		})
	}
}

// floodFigures are what one flood of distinct keys through a KeyedQPS
// measured: the requests asked and refused in the second interval (the
// sketch grew through the first, which it reads as its previous
// generation) and in the third (steady: the sketch had its size all
// through the second), and the heap the limiter holds after them.
type floodFigures struct {
	asked, refused [2]int
	heap           int64
	bytes          int
}

// rate is the share of the requests refused in the second interval and
// the third.
func (f floodFigures) rate() (second, third float64) {
	return float64(f.refused[0]) / float64(f.asked[0]), float64(f.refused[1]) / float64(f.asked[1])
}

// flood sends keys distinct keys per interval, each each times evenly
// spread over the interval, for three intervals (new keys in each),
// through a limiter of a one-second window made by newQ, and counts the
// refusals of the second and the third. The keys are made in a reused
// buffer, as a server reads them.
func flood(tb testing.TB, keys, each int, newQ func() *KeyedQPS) floodFigures {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	q := newQ()
	var f floodFigures
	buf := make([]byte, 0, 32)
	iv := int64(time.Second)
	step := iv / int64(keys*each)
	for gen := range 3 {
		now := int64(gen) * iv
		for range each {
			for k := range keys {
				buf = strconv.AppendInt(append(buf[:0], byte('a'+gen), '-'), int64(k), 10)
				d, _ := q.AllowNAt(now, string(buf), 1)
				now += step
				if gen > 0 {
					f.asked[gen-1]++
					if !d.Allowed {
						f.refused[gen-1]++
					}
				}
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	f.heap = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	f.bytes = q.bytes()
	runtime.KeepAlive(q)
	return f
}

// BenchmarkKeyedQPSFlood sends floods of distinct keys per interval, each
// key at a share of its limit (10 per second: 4-bit counters; 20: 8-bit),
// and reports the share of their requests refused and the heap. One
// iteration is one flood: run it with -benchtime 1x.
//
//	go test -run '^$' -bench KeyedQPSFlood -benchtime 1x ./flow/
func BenchmarkKeyedQPSFlood(b *testing.B) {
	for _, tc := range []struct {
		keys, each int
		limit      int64
	}{
		{4_000_000, 1, 10}, {10_000_000, 1, 10}, {10_000_000, 4, 10}, {10_000_000, 5, 10}, {12_000_000, 4, 10}, {12_000_000, 5, 10},
		{5_000_000, 8, 20}, {5_000_000, 10, 20},
	} {
		b.Run(fmt.Sprintf("%dM keys at %d%% of %d", tc.keys/1_000_000, 100*int64(tc.each)/tc.limit, tc.limit), func(b *testing.B) {
			for b.Loop() {
				f := flood(b, tc.keys, tc.each, func() *KeyedQPS {
					return mustKeyed(b, clock.NewManual(0), KeyWindow{Limit: tc.limit, Interval: time.Second})
				})
				second, third := f.rate()
				b.ReportMetric(100*second, "%refused-2nd")
				b.ReportMetric(100*third, "%refused-3rd")
				b.ReportMetric(float64(f.heap)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(f.bytes)/(1<<20), "Bytes-MiB")
			}
		})
	}
}
