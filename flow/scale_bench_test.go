package flow

import (
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkScaling measures each limiter serially and from every processor
// (b.RunParallel) with the same body, so that the parallel row is read
// against the serial one of the same run: a limiter that scales with cores
// costs at most 0.6 × its serial time per request from two goroutines.
// Keys are taken from a million, each goroutine from its own place in turn.
//
//	go test -run '^$' -bench 'BaselineTimeNow|Scaling' -cpu 2 ./flow
func BenchmarkScaling(b *testing.B) {
	keys := millionKeys()
	key := func(i int) string { return keys[i&(len(keys)-1)] }
	cases := []struct {
		name string
		make func(b *testing.B) func(i int, p *Permit)
	}{
		{"Concurrency", func(b *testing.B) func(int, *Permit) {
			c, _ := NewConcurrency(ConcurrencySettings{Limit: 100})
			return func(_ int, p *Permit) {
				c.Acquire(p, "")
				p.Done(Succeeded)
			}
		}},
		// Through the cells from the first request, as on four processors
		// or more: what a request through them costs.
		{"Concurrency/cells", func(b *testing.B) func(int, *Permit) {
			c, _ := NewConcurrency(ConcurrencySettings{Limit: 100})
			c.places.grow()
			return func(_ int, p *Permit) {
				c.Acquire(p, "")
				p.Done(Succeeded)
			}
		}},
		{"Adaptive", func(b *testing.B) func(int, *Permit) {
			a, err := NewAdaptive(AdaptiveSettings{InitialLimit: 10000, MinLimit: 10000, MaxLimit: 10000})
			if err != nil {
				b.Fatal(err)
			}
			return func(_ int, p *Permit) {
				a.Acquire(p, "")
				p.Done(Succeeded)
			}
		}},
		{"Shedder", func(b *testing.B) func(int, *Permit) {
			s, now := benchShedder(b, 0.5)
			return func(_ int, p *Permit) {
				s.AcquireAt(now, p, "")
				p.DoneAt(now+1000, Succeeded)
			}
		}},
		{"KeyedQPS/keys of 1M", func(b *testing.B) func(int, *Permit) {
			q, _ := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{{Limit: 100, Interval: time.Second}}})
			for i := range len(keys) {
				q.Allow(key(i))
			}
			return func(i int, _ *Permit) { q.Allow(key(i)) }
		}},
		{"KeyedConcurrency/keys of 1M", func(b *testing.B) func(int, *Permit) {
			c, _ := NewConcurrency(ConcurrencySettings{PerKey: true, Limit: 1 << 20})
			for i := range len(keys) {
				var p Permit
				c.Acquire(&p, key(i))
				p.Done(Succeeded)
			}
			return func(i int, p *Permit) {
				c.Acquire(p, key(i))
				p.Done(Succeeded)
			}
		}},
		{"KeyedThrottle/keys of 1M", func(b *testing.B) func(int, *Permit) {
			th, _ := NewThrottle(ThrottleSettings{PerKey: true, Limit: maxLimit, Interval: time.Second, MaxWait: time.Hour})
			for i := range len(keys) {
				th.Allow(key(i))
			}
			return func(i int, _ *Permit) { th.Allow(key(i)) }
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name+"/serial", func(b *testing.B) {
			do := tc.make(b)
			var p Permit
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				do(i, &p)
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			do := tc.make(b)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var p Permit
				for i := int(next.Add(1) << 16); pb.Next(); i++ {
					do(i, &p)
				}
			})
		})
	}
}
