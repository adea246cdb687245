package window

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// The baselines are measured in the same run as the benchmarks they judge:
// the targets are ratios to them (see BENCHMARKS.md).

var (
	sinkInt  int64
	sinkTime time.Time
)

func BenchmarkBaselineTimeNow(b *testing.B) {
	var t time.Time
	for i := 0; i < b.N; i++ {
		t = time.Now()
	}
	sinkTime = t
}

func BenchmarkBaselineMonotonicRead(b *testing.B) {
	var s int64
	for i := 0; i < b.N; i++ {
		s += clock.System.Now()
	}
	sinkInt = s
}

func BenchmarkBaselineAtomicAdd(b *testing.B) {
	var x atomic.Int64
	for i := 0; i < b.N; i++ {
		x.Add(1)
	}
	sinkInt = x.Load()
}

func BenchmarkBaselineAtomicAddParallel(b *testing.B) {
	var x atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			x.Add(1)
		}
	})
	sinkInt = x.Load()
}

func BenchmarkCounterAdd(b *testing.B) {
	c, _ := NewCounter(10, time.Second)
	for i := 0; i < b.N; i++ {
		c.Add(Allowed, 1)
	}
}

func BenchmarkCounterAddAt(b *testing.B) {
	c, _ := NewCounter(10, time.Second)
	now := clock.System.Now()
	for i := 0; i < b.N; i++ {
		c.AddAt(now, Allowed, 1)
	}
}

func BenchmarkCounterAddParallel(b *testing.B) {
	c, _ := NewCounter(10, time.Second)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Add(Allowed, 1)
		}
	})
}

func BenchmarkCounterAddAtParallel(b *testing.B) {
	c, _ := NewCounter(10, time.Second)
	now := clock.System.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.AddAt(now, Allowed, 1)
		}
	})
}

// filledView returns a 1 s view of a 10 s counter of 100 buckets, every
// bucket written, and the time to read it at.
func filledView(b *testing.B) (*Counter, int64) {
	c, _ := NewCounter(100, 10*time.Second)
	now := clock.System.Now()
	for i := int64(0); i < 100; i++ {
		c.AddAt(now-i*int64(100*time.Millisecond), Allowed, i)
	}
	v, err := c.View(time.Second)
	if err != nil {
		b.Fatal(err)
	}
	return v, now
}

func BenchmarkViewSum1sAt(b *testing.B) {
	v, now := filledView(b)
	var s int64
	for i := 0; i < b.N; i++ {
		s += v.SumAt(now, Allowed)
	}
	sinkInt = s
}

func BenchmarkViewSum1s(b *testing.B) {
	v, _ := filledView(b)
	var s int64
	for i := 0; i < b.N; i++ {
		s += v.Sum(Allowed)
	}
	sinkInt = s
}

func BenchmarkViewSumsAt(b *testing.B) {
	v, now := filledView(b)
	var s int64
	for i := 0; i < b.N; i++ {
		s += v.SumsAt(now)[Allowed]
	}
	sinkInt = s
}

func BenchmarkViewSum1sWhileWriting(b *testing.B) {
	v, now := filledView(b)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				v.r.add(now, int(Allowed), 1)
			}
		}
	}()
	b.ResetTimer()
	var s int64
	for i := 0; i < b.N; i++ {
		s += v.SumAt(now, Allowed)
	}
	b.StopTimer()
	close(stop)
	<-done
	sinkInt = s
}

func BenchmarkRollingWindowAdd(b *testing.B) {
	rw, _ := NewRollingWindow(10, time.Second)
	for i := 0; i < b.N; i++ {
		rw.Add(1)
	}
}

func BenchmarkRollingWindowReduce(b *testing.B) {
	rw, _ := NewRollingWindow(10, time.Second)
	rw.Add(1)
	var s int64
	for i := 0; i < b.N; i++ {
		rw.Reduce(func(bk Bucket) { s += bk.Sum })
	}
	sinkInt = s
}

func BenchmarkHistogramRecord(b *testing.B) {
	h, _ := NewHistogram(10, 10*time.Second)
	for i := 0; i < b.N; i++ {
		h.Record(time.Duration(i&0xfffff) * time.Microsecond)
	}
}

func BenchmarkHistogramRecordParallel(b *testing.B) {
	h, _ := NewHistogram(10, 10*time.Second)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			h.Record(time.Duration(i&0xfffff) * time.Microsecond)
		}
	})
}

// BenchmarkHistogramSummary1s reads a second of 100,000 latencies, on a
// clock that stands still: on the system clock the second would empty
// itself during the run, and the read with it.
func BenchmarkHistogramSummary1s(b *testing.B) {
	h, _ := NewHistogram(10, 10*time.Second, WithClock(clock.NewManual(int64(time.Hour))))
	for i := 0; i < 100000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	v, _ := h.View(time.Second)
	for i := 0; i < b.N; i++ {
		sinkInt += v.Summary().Count
	}
}

// The Sketch rows record the latencies a resource sees: around 1 ms, over
// four powers of two.
func BenchmarkSketchRecord(b *testing.B) {
	k, _ := NewSketch(10 * time.Second)
	for i := 0; i < b.N; i++ {
		k.Record(time.Duration(1<<20 + i&0x3fffff))
	}
}

func BenchmarkSketchRecordParallel(b *testing.B) {
	k, _ := NewSketch(10 * time.Second)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			k.Record(time.Duration(1<<20 + i&0x3fffff))
		}
	})
}

func BenchmarkSketchSummary(b *testing.B) {
	k, _ := NewSketch(10*time.Second, WithClock(clock.NewManual(int64(time.Hour))))
	for i := 0; i < 100000; i++ {
		k.Record(time.Duration(i) * time.Microsecond)
	}
	for i := 0; i < b.N; i++ {
		sinkInt += k.Summary().Count
	}
}

// BenchmarkCounterSumAt reads one event over a Counter's whole interval of
// 10 buckets, every one written.
func BenchmarkCounterSumAt(b *testing.B) {
	c, _ := NewCounter(10, time.Second)
	now := int64(time.Hour)
	for i := range int64(10) {
		c.AddAt(now-i*int64(100*time.Millisecond), Allowed, 1)
	}
	var s int64
	for i := 0; i < b.N; i++ {
		s += c.SumAt(now, Allowed)
	}
	sinkInt = s
}

// BenchmarkBreakerSumsAt reads what a breaker reads on every request: the
// sums of its events over the whole interval of 10 buckets.
func BenchmarkBreakerSumsAt(b *testing.B) {
	t, _ := NewCounter(10, 10*time.Second, WithEvents(Succeeded, Failed, Blocked, Slow), CachedSums())
	now := int64(time.Hour)
	for i := range int64(10) {
		t.AddAt(now-i*int64(time.Second), Failed, 1)
	}
	var s int64
	for i := 0; i < b.N; i++ {
		s += t.SumsAt(now)[Failed]
	}
	sinkInt = s
}
