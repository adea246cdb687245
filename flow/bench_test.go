package flow

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// Baselines for the same run; see BENCHMARKS.md.

var sinkTime time.Time

func BenchmarkBaselineTimeNow(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sinkTime = time.Now()
	}
}

func BenchmarkBaselineAtomicAdd(b *testing.B) {
	var x atomic.Int64
	for i := 0; i < b.N; i++ {
		x.Add(1)
	}
}

// BenchmarkBaselineAtomicAddParallel adds to one word from every
// processor: each add waits for the word's cache line to come from the
// core that wrote it last, so its time is about one transfer of a line.
func BenchmarkBaselineAtomicAddParallel(b *testing.B) {
	var x atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			x.Add(1)
		}
	})
}

// An unreachable limit, so that every decision allows and counts.
func BenchmarkQPSAllow(b *testing.B) {
	q := mustQPS(b, QPSSettings{Limit: maxLimit, Interval: time.Second})
	for i := 0; i < b.N; i++ {
		q.Allow()
	}
}

func BenchmarkQPSAllowAt(b *testing.B) {
	q := mustQPS(b, QPSSettings{Limit: maxLimit, Interval: time.Second})
	now := clock.System.Now()
	for i := 0; i < b.N; i++ {
		q.AllowAt(now)
	}
}

// A limit far below the offered rate: most decisions block.
func BenchmarkQPSAllowBlocking(b *testing.B) {
	q := mustQPS(b, QPSSettings{Limit: 1000, Interval: time.Second})
	for i := 0; i < b.N; i++ {
		q.Allow()
	}
}

func BenchmarkQPSAllowParallel(b *testing.B) {
	q := mustQPS(b, QPSSettings{Limit: maxLimit, Interval: time.Second})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			q.Allow()
		}
	})
}

func BenchmarkConcurrencyAcquireRelease(b *testing.B) {
	c, _ := NewConcurrency(ConcurrencySettings{Limit: 100})
	for i := 0; i < b.N; i++ {
		var p Permit
		c.Acquire(&p, "")
		p.Done(Succeeded)
	}
}

func BenchmarkConcurrencyAcquireReleaseParallel(b *testing.B) {
	c, _ := NewConcurrency(ConcurrencySettings{Limit: 100})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			var p Permit
			c.Acquire(&p, "")
			p.Done(Succeeded)
		}
	})
}

func BenchmarkThrottleAllow(b *testing.B) {
	th, _ := NewThrottle(ThrottleSettings{Limit: maxLimit, Interval: time.Second, MaxWait: time.Hour})
	for i := 0; i < b.N; i++ {
		th.Allow("")
	}
}

func BenchmarkQPSAllowPriorityBorrowing(b *testing.B) {
	c := clock.NewManual(0)
	q := mustQPS(b, QPSSettings{Limit: 1000, Interval: time.Second, Clock: c})
	for i := 0; i < b.N; i++ {
		if i%64 == 0 {
			c.Advance(time.Millisecond)
		}
		q.AllowPriorityN(1, time.Second)
	}
}

// With warm-up, an unreachable limit: every decision allows, and the meter
// warms. Buckets open on the system clock, once per bucket width.
func BenchmarkQPSAllowWarmUp(b *testing.B) {
	q := mustQPS(b, QPSSettings{Limit: maxLimit, Interval: time.Second, WarmUp: 10 * time.Second, ColdFactor: 3})
	for i := 0; i < b.N; i++ {
		q.Allow()
	}
}

// With warm-up and a limit far below the offered rate: most decisions block.
func BenchmarkQPSAllowWarmUpBlocking(b *testing.B) {
	q := mustQPS(b, QPSSettings{Limit: 1000, Interval: time.Second, WarmUp: 10 * time.Second, ColdFactor: 3})
	for i := 0; i < b.N; i++ {
		q.Allow()
	}
}

// With warm-up, a bucket opens every 64 decisions, so the cost of opening
// one (and of updating the coldness) shows.
func BenchmarkQPSAllowAtWarmUpOpeningBuckets(b *testing.B) {
	q := mustQPS(b, QPSSettings{Limit: 100000, Interval: time.Second, WarmUp: 10 * time.Second, ColdFactor: 3})
	width := int64(time.Second / flowlimits.DefaultBuckets)
	for i := 0; i < b.N; i++ {
		q.AllowAt(int64(i/64) * width)
	}
}

func BenchmarkThrottleAllowWarmUp(b *testing.B) {
	th, _ := NewThrottle(ThrottleSettings{Limit: maxLimit, Interval: time.Second, MaxWait: time.Hour, WarmUp: 10 * time.Second, ColdFactor: 3})
	for i := 0; i < b.N; i++ {
		th.Allow("")
	}
}

// A keyedCase is a way of drawing keys for the keyed benchmarks.
type keyedCase struct {
	name string
	key  func(i int) string
}

// keyedCases are keys drawn from a million, as a per-key rule on a public
// API sees them, and one hot key; warm returns a limiter that has seen
// each of the case's first million keys once, at time 0.
func keyedCases() (cases []keyedCase, warm func(tc keyedCase) *KeyedQPS) {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	cases = []keyedCase{
		// In order: the hash scatters them as it would any keys, and the
		// benchmark does not measure its own reads of a 16 MiB slice of keys.
		{"random of 1M", func(i int) string { return keys[i&(len(keys)-1)] }},
		{"one key", func(int) string { return "hot" }},
	}
	warm = func(tc keyedCase) *KeyedQPS {
		q, _ := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{{Limit: 100, Interval: time.Second}}, Clock: clock.NewManual(0)})
		for i := range len(keys) {
			q.AllowNAt(0, tc.key(i), 1)
		}
		return q
	}
	return cases, warm
}

// BenchmarkKeyedQPS decides for the keyed cases' keys.
func BenchmarkKeyedQPS(b *testing.B) {
	cases, warm := keyedCases()
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			q := warm(tc)
			now := int64(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				now += 100
				q.AllowNAt(now, tc.key(i), 1)
			}
			b.ReportMetric(float64(q.bytes())/(1<<20), "held-MiB")
		})
	}
}

// BenchmarkKeyedQPSParallel is BenchmarkKeyedQPS from every processor, the
// time given, each goroutine taking the keys of a million from its own
// place in turn.
func BenchmarkKeyedQPSParallel(b *testing.B) {
	cases, warm := keyedCases()
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			q := warm(tc)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1) << 16)
				now := int64(0)
				for pb.Next() {
					now += 100
					q.AllowNAt(now, tc.key(i), 1)
					i++
				}
			})
		})
	}
}
