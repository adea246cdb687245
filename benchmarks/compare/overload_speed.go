package compare

import (
	"context"
	"testing"
	"time"

	gcllimit "github.com/platinummonkey/go-concurrency-limits/limit"
	gclimiter "github.com/platinummonkey/go-concurrency-limits/limiter"
	gclstrategy "github.com/platinummonkey/go-concurrency-limits/strategy"
	"github.com/zeromicro/go-zero/core/load"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// The overload protections' speed rows: one request admitted and ended,
// each limiter reading its own clock, every request admitted. slidegate's
// Shedder has learnt a bound far above the requests in flight and reads a
// CPU under its threshold, as go-zero's shedder reads the machine's, so both
// take their path for a service with room; go-concurrency-limits'
// DefaultLimiter (Gradient2, a simple strategy) reads the clock at Acquire
// and at OnSuccess, as slidegate's Adaptive does.

func init() { Shapes = append(Shapes, overloadAdmit) }

// overloadUnreachable is a limit far above what the rows keep in flight.
const overloadUnreachable = 1 << 20

var overloadAdmit = &Shape{
	ID:   "OverloadAdmit",
	Name: "Admit 1 and end it, adaptive protection, limiter reading its clock",
	Impls: []Impl{
		timeNow,
		{Name: "slidegate flow.Shedder", Role: Ours, Setup: func(b *testing.B) Op {
			s := must(flow.NewShedder(flow.ShedderSettings{CPU: func() float64 { return 0.5 }}))
			// A bound of about 10^5: 10^6 requests of 10 ms in one bucket.
			clk := clock.System
			at := clk.Now() - int64(time.Second)
			for range 100000 {
				var p flow.Permit
				s.AcquireAt(at, &p, "")
				p.DoneAt(at+int64(100*time.Millisecond), flow.Succeeded)
			}
			return func() int64 {
				var p flow.Permit
				d := s.Acquire(&p, "")
				p.Done(flow.Succeeded)
				return b2i(d.Allowed)
			}
		}},
		{Name: "slidegate flow.Adaptive", Role: Ours, Setup: func(*testing.B) Op {
			a := must(flow.NewAdaptive(flow.AdaptiveSettings{InitialLimit: overloadUnreachable, MinLimit: overloadUnreachable, MaxLimit: overloadUnreachable}))
			return func() int64 {
				var p flow.Permit
				d := a.Acquire(&p, "")
				p.Done(flow.Succeeded)
				return b2i(d.Allowed)
			}
		}},
		{Name: "go-zero load.AdaptiveShedder", Setup: func(*testing.B) Op {
			quietGoZeroShedder()
			s := load.NewAdaptiveShedder()
			return func() int64 {
				p, err := s.Allow()
				if err != nil {
					return 0
				}
				p.Pass()
				return 1
			}
		}},
		{Name: "go-concurrency-limits DefaultLimiter, Gradient2", Setup: func(b *testing.B) Op {
			l, err := gclimiter.NewDefaultLimiter(gcllimit.NewDefaultGradient2Limit("bench", nil, nil),
				int64(time.Second), int64(time.Second), int64(time.Microsecond), 100,
				gclstrategy.NewSimpleStrategy(overloadUnreachable), nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			return func() int64 {
				lis, ok := l.Acquire(ctx)
				if !ok {
					return 0
				}
				lis.OnSuccess()
				return 1
			}
		}},
	},
}
