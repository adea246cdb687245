package compare

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sapi "github.com/alibaba/sentinel-golang/api"
	sflow "github.com/alibaba/sentinel-golang/core/flow"
	"github.com/alibaba/sentinel-golang/logging"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"go.uber.org/ratelimit"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// The flow limiters' speed rows. Every limiter is configured so that every
// call is allowed: the rows measure the cost of deciding and counting, not
// of blocking. The accuracy of the same limiters under overload is measured
// by Accuracy (accuracy.go) and cmd/accuracy.

// allowResource is the sentinel resource of the speed row, with a flow rule
// whose threshold is never reached.
const allowResource = "compare-allow"

// inFlightLimit is the concurrency limit of the Acquire+Release rows: far
// above the number of goroutines, so that every call is allowed.
const inFlightLimit = 1 << 30

// quietSentinel keeps sentinel's console logger, which writes to stdout at
// Info level by default, to errors. Sentinel is otherwise used with its
// default global configuration: api.InitDefault is not called, as it would
// start metric log files and system collectors that the rows do not need.
var quietSentinel = sync.OnceFunc(func() { logging.ResetGlobalLoggerLevel(logging.ErrorLevel) })

// allowClock decides one request at the current time, each limiter reading
// its own clock.
var allowClock = &Shape{
	ID:   "AllowClock",
	Name: "Allow 1, limiter reading its clock",
	Impls: []Impl{
		timeNow,
		{Name: "clock.System.Now", Setup: func(*testing.B) Op {
			return func() int64 { return clock.System.Now() }
		}},
		{Name: "slidegate flow.QPS.Allow", Role: Ours, Setup: func(*testing.B) Op {
			q := must(flow.NewQPS(flow.QPSSettings{Limit: flowlimits.MaxLimit, Interval: time.Second}))
			return func() int64 { return b2i(q.Allow().Allowed) }
		}},
		// With rate.Inf, Allow takes the mutex and returns at once: it counts
		// nothing.
		{Name: "x/time/rate Allow, rate.Inf", Setup: func(*testing.B) Op {
			l := rate.NewLimiter(rate.Inf, 1)
			return func() int64 { return b2i(l.Allow()) }
		}},
		// A finite limit that is never reached: Allow refills and takes a
		// token, as it does in service.
		{Name: "x/time/rate Allow, 1e12/s", Setup: func(*testing.B) Op {
			l := rate.NewLimiter(rate.Limit(1e12), 1<<30)
			return func() int64 { return b2i(l.Allow()) }
		}},
		// ratelimit paces instead of blocking requests: Take waits until the
		// caller's turn. At 1e9/s without slack the turns are 1 ns apart, so a serial
		// caller never sleeps. In parallel, a caller preempted between its
		// clock read and its compare-and-swap finds a later turn already
		// issued and sleeps until the one after it, as long as it was away.
		{Name: "uber ratelimit Take (paces, waits), 1e9/s", Setup: func(*testing.B) Op {
			l := ratelimit.New(1e9, ratelimit.WithoutSlack)
			return func() int64 { return l.Take().UnixNano() }
		}},
		{Name: "sentinel api.Entry+Exit, flow rule", Setup: func(b *testing.B) Op {
			quietSentinel()
			if _, err := sflow.LoadRulesOfResource(allowResource, []*sflow.Rule{{
				Resource:               allowResource,
				TokenCalculateStrategy: sflow.Direct,
				ControlBehavior:        sflow.Reject,
				Threshold:              1e12,
				StatIntervalInMs:       1000,
			}}); err != nil {
				b.Fatal(err)
			}
			return func() int64 {
				e, blocked := sapi.Entry(allowResource)
				if blocked != nil {
					return 0
				}
				e.Exit()
				return 1
			}
		}},
	},
}

// acquireRelease takes one place under a concurrency limit and gives it back.
var acquireRelease = &Shape{
	ID:   "AcquireRelease",
	Name: "Acquire+Release, concurrency limit",
	Impls: []Impl{
		{Name: "2 × atomic.AddInt64", Role: Baseline, Setup: func(*testing.B) Op {
			var n int64
			return func() int64 {
				atomic.AddInt64(&n, 1)
				atomic.AddInt64(&n, -1)
				return 0
			}
		}},
		{Name: "slidegate flow.Concurrency", Role: Ours, Setup: func(*testing.B) Op {
			c := must(flow.NewConcurrency(flow.ConcurrencySettings{Limit: inFlightLimit}))
			return func() int64 {
				var p flow.Permit
				ok := c.Acquire(&p, "").Allowed
				p.Done(flow.Succeeded)
				return b2i(ok)
			}
		}},
		{Name: "x/sync/semaphore TryAcquire+Release", Setup: func(*testing.B) Op {
			s := semaphore.NewWeighted(inFlightLimit)
			return func() int64 {
				if !s.TryAcquire(1) {
					return 0
				}
				s.Release(1)
				return 1
			}
		}},
	},
}

// b2i returns 1 for true, 0 for false.
func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
