package flow

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// benchShedder returns a shedder that has learnt a bound of about 100 in
// flight (1,000 requests of 10 ms per 100 ms bucket), with the CPU at cpu.
func benchShedder(b *testing.B, cpu float64) (*Shedder, int64) {
	clk := clock.NewManual(0)
	s, err := NewShedder(ShedderSettings{CPU: func() float64 { return cpu }, Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	for range 1000 {
		var p Permit
		s.AcquireAt(0, &p, "")
		p.DoneAt(int64(10*time.Millisecond), Succeeded)
	}
	now := int64(150 * time.Millisecond)
	if got := s.maxInFlight(now); got != 100 {
		b.Fatalf("bound %d, want 100", got)
	}
	return s, now
}

// The decision alone: the CPU over the threshold, so that the bound is
// read, and room under it.
func BenchmarkShedderAcquireAt(b *testing.B) {
	s, now := benchShedder(b, 0.95)
	var p Permit
	for b.Loop() {
		s.AcquireAt(now, &p, "")
		p.Done(Ignored)
	}
}

// A whole request: the decision, and its response time counted at the end.
func BenchmarkShedderAcquireDoneAt(b *testing.B) {
	s, now := benchShedder(b, 0.95)
	var p Permit
	for b.Loop() {
		s.AcquireAt(now, &p, "")
		p.DoneAt(now+1000, Succeeded)
	}
}

// Shedding: every request over the bound.
func BenchmarkShedderShedding(b *testing.B) {
	s, now := benchShedder(b, 0.95)
	held := make([]Permit, 100)
	for i := range held {
		s.AcquireAt(now, &held[i], "")
	}
	var p Permit
	for b.Loop() {
		if s.AcquireAt(now, &p, "").Allowed {
			b.Fatal("allowed over the bound")
		}
	}
}

func BenchmarkShedderAcquireDoneParallel(b *testing.B) {
	s, now := benchShedder(b, 0.5)
	b.RunParallel(func(pb *testing.PB) {
		var p Permit
		for pb.Next() {
			s.AcquireAt(now, &p, "")
			p.DoneAt(now+1000, Succeeded)
		}
	})
}

func BenchmarkAdaptiveAcquireAt(b *testing.B) {
	a, err := NewAdaptive(AdaptiveSettings{InitialLimit: 1000, MaxLimit: 1000, Clock: clock.NewManual(0)})
	if err != nil {
		b.Fatal(err)
	}
	var p Permit
	for b.Loop() {
		a.AcquireAt(0, &p, "")
		p.Done(Ignored)
	}
}

// A whole request: the decision, and its sample at the end; windows close
// as the time goes on.
func BenchmarkAdaptiveAcquireDoneAt(b *testing.B) {
	a, err := NewAdaptive(AdaptiveSettings{InitialLimit: 1000, MaxLimit: 1000, Clock: clock.NewManual(0)})
	if err != nil {
		b.Fatal(err)
	}
	var p Permit
	now := int64(0)
	for b.Loop() {
		a.AcquireAt(now, &p, "")
		now += 1000
		p.DoneAt(now, Succeeded)
	}
}

func BenchmarkAdaptiveAcquireDoneParallel(b *testing.B) {
	a, err := NewAdaptive(AdaptiveSettings{InitialLimit: 10000, MinLimit: 10000, MaxLimit: 10000})
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		var p Permit
		for pb.Next() {
			a.Acquire(&p, "")
			p.Done(Succeeded)
		}
	})
}

// BenchmarkAdaptiveAcquireDone is BenchmarkAdaptiveAcquireDoneParallel from
// one goroutine: the serial time its parallel twin is measured against.
func BenchmarkAdaptiveAcquireDone(b *testing.B) {
	a, err := NewAdaptive(AdaptiveSettings{InitialLimit: 10000, MinLimit: 10000, MaxLimit: 10000})
	if err != nil {
		b.Fatal(err)
	}
	var p Permit
	for b.Loop() {
		a.Acquire(&p, "")
		p.Done(Succeeded)
	}
}

// BenchmarkShedderAcquireDoneWarm is BenchmarkShedderAcquireDoneParallel
// from one goroutine: the CPU between half the threshold and the threshold.
func BenchmarkShedderAcquireDoneWarm(b *testing.B) {
	s, now := benchShedder(b, 0.5)
	var p Permit
	for b.Loop() {
		s.AcquireAt(now, &p, "")
		p.DoneAt(now+1000, Succeeded)
	}
}
