package flow

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

// Every limiter that gives places in flight fills the same Permit, and
// Done ends it once: a second Done, and Done of a zero Permit, give
// nothing back.
func TestEveryLimiterFillsOnePermitThatDoneEndsOnce(t *testing.T) {
	conc, err := NewConcurrency(ConcurrencySettings{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	keyed, err := NewConcurrency(ConcurrencySettings{PerKey: true, Limit: 1, Overrides: map[string]int64{"pinned": 1}})
	if err != nil {
		t.Fatal(err)
	}
	shed, _ := newTestShedder(t, ShedderSettings{})
	adaptive, _ := newTestAdaptive(t, AdaptiveSettings{})
	for _, l := range []struct {
		name     string
		acquire  func(*Permit) Decision
		inFlight func() int64
	}{
		{"Concurrency", func(p *Permit) Decision { return conc.Acquire(p, "") }, func() int64 { return conc.InFlight("") }},
		{"KeyedConcurrency", func(p *Permit) Decision { return keyed.Acquire(p, "k") }, func() int64 { return keyed.InFlight("k") }},
		{"KeyedConcurrency override", func(p *Permit) Decision { return keyed.Acquire(p, "pinned") }, func() int64 { return keyed.InFlight("pinned") }},
		{"Shedder", func(p *Permit) Decision { return shed.Acquire(p, "k") }, shed.inFlight},
		{"Adaptive", func(p *Permit) Decision { return adaptive.Acquire(p, "k") }, adaptive.inFlight},
	} {
		for _, o := range []Outcome{Succeeded, Failed, FailedOverloaded, Ignored} {
			var p Permit
			if d := l.acquire(&p); !d.Allowed {
				t.Fatalf("%s: %+v, want allowed", l.name, d)
			}
			if n := l.inFlight(); n != 1 {
				t.Fatalf("%s: %d in flight after Acquire, want 1", l.name, n)
			}
			p.Done(o)
			p.Done(o)
			var zero Permit
			zero.Done(o)
			if n := l.inFlight(); n != 0 {
				t.Fatalf("%s, outcome %d: %d in flight after Done twice, want 0", l.name, o, n)
			}
		}
	}
}

// A Shedder counts a request that ran as completed, whether it succeeded
// or failed, overloaded or not; an Ignored one never ran, and counts
// nothing.
func TestAShedderCountsWhatRanAsCompleted(t *testing.T) {
	s, _ := newTestShedder(t, ShedderSettings{})
	for _, o := range []Outcome{Succeeded, Failed, FailedOverloaded, Ignored, Ignored} {
		var p Permit
		s.AcquireAt(0, &p, "")
		p.DoneAt(int64(time.Millisecond), o)
	}
	var completed int64
	s.completed.ReduceAt(int64(time.Second), func(b window.Bucket) { completed += b.Count })
	if completed != 3 {
		t.Fatalf("%d completed, want 3: Succeeded, Failed and FailedOverloaded", completed)
	}
}

// An Adaptive limit samples a request that succeeded, backs off for one
// that failed overloaded, and learns nothing from one that failed for its
// own reasons or never ran.
func TestAnAdaptiveLimitLearnsOnlyFromSuccessAndOverload(t *testing.T) {
	for _, c := range []struct {
		o                   Outcome
		samples, overloaded int64
	}{
		{Succeeded, 1, 0},
		{FailedOverloaded, 0, 1},
		{Failed, 0, 0},
		{Ignored, 0, 0},
	} {
		a, _ := newTestAdaptive(t, AdaptiveSettings{})
		var p Permit
		a.AcquireAt(0, &p, "")
		p.DoneAt(int64(time.Millisecond), c.o)
		if got, over := a.samples.count.Load(), a.overloaded.Load(); got != c.samples || over != c.overloaded {
			t.Errorf("outcome %d: %d samples and %d overloaded, want %d and %d", c.o, got, over, c.samples, c.overloaded)
		}
	}
}
