package compare

import (
	"context"
	"testing"

	scb "github.com/alibaba/sentinel-golang/core/circuitbreaker"
	sflow "github.com/alibaba/sentinel-golang/core/flow"
	zbreaker "github.com/zeromicro/go-zero/core/breaker"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
)

// The guard's speed rows: one request through a resource protected by a QPS
// rule and a circuit breaker at once, the whole per-request path of a
// service that governs its traffic. The limit is never reached and every
// request succeeds, so every request is allowed and the rows measure
// deciding, counting and settling, not blocking.
//
// slidegate's guard and sentinel are given the same rules: a QPS limit of
// 2^30 per second that blocks at once rather than waiting (a QPSRule, and
// sentinel's Reject behavior), and an error-ratio breaker with the Circuit's
// defaults (0.5 over a 10 s window in 10 buckets, at least 10 requests, open
// for 5 s; see breaker.go). go-zero has no local QPS limiter to put on the
// same call path (core/limit's PeriodLimit and TokenLimiter keep their
// counts in Redis), so its row is its breaker's Do alone: a floor for what
// go-zero would cost, not a like-for-like comparison.

// guardResource is the resource of the slidegate rows. Each Setup makes its
// own Guard, so the name cannot collide.
const guardResource = "guard-a"

// guardSentinelResource is the sentinel resource of the guard row, distinct
// from the other shapes' because sentinel's rules are global.
const guardSentinelResource = "compare-guard"

// guardLimit is the QPS limit of both guards: never reached.
const guardLimit = 1 << 30

// newGuard returns a slidegate Guard with a QPS rule and an error-ratio
// breaker on guardResource.
func newGuard(b *testing.B) *slidegate.Guard {
	g, err := slidegate.New()
	if err != nil {
		b.Fatal(err)
	}
	err = g.SetRules(slidegate.Rules{
		Flow: []slidegate.FlowRule{{Resource: guardResource, Limit: guardLimit}},
		Breakers: []slidegate.BreakerRule{{Resource: guardResource, Strategy: slidegate.ErrorRatioBreaker,
			Threshold: breakerRatio}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// guardEntryExit enters a resource with a QPS rule and a breaker, and exits
// at once with success.
var guardEntryExit = &Shape{
	ID:   "GuardEnterExit",
	Name: "Enter + Exit, a QPS rule and a breaker on one resource, every request allowed",
	Impls: []Impl{
		timeNow,
		{Name: "clock.System.Now", Setup: func(*testing.B) Op {
			return func() int64 { return clock.System.Now() }
		}},
		// Enter reads the clock once, finds the resource's rules in the
		// snapshot, asks the breaker and counts the allowed request in the
		// limiter and the resource's statistics; Exit reads the clock again and counts
		// the success and response time, and settles the breaker's promise.
		{Name: "slidegate Guard.Enter+Exit", Role: Ours, Setup: func(b *testing.B) Op {
			g := newGuard(b)
			ctx := context.Background()
			return allows(b, "slidegate Enter", func() int64 {
				e, err := g.Enter(ctx, guardResource)
				if err != nil {
					return 0
				}
				e.Exit(nil)
				return 1
			})
		}},
		// The same through a handle on the resource, made once: no lookup
		// of the name.
		{Name: "slidegate Resource.Enter+Exit", Role: Ours, Setup: func(b *testing.B) Op {
			r := newGuard(b).Resource(guardResource)
			ctx := context.Background()
			return allows(b, "slidegate Resource.Enter", func() int64 {
				e, err := r.Enter(ctx)
				if err != nil {
					return 0
				}
				e.Exit(nil)
				return 1
			})
		}},
		// The same in one call, with a static function.
		{Name: "slidegate Guard.Do", Role: Ours, Setup: func(b *testing.B) Op {
			g := newGuard(b)
			ctx := context.Background()
			return allows(b, "slidegate Do", func() int64 {
				return b2i(g.Do(ctx, guardResource, succeed) == nil)
			})
		}},
		// sentinel's whole slot chain with a flow rule (Direct, Reject,
		// threshold 2^30 per 1 s) and an ErrorRatio circuit-breaker rule on
		// the resource; both are cleared when the benchmark ends.
		{Name: "sentinel api.Entry+Exit, flow rule + ErrorRatio rule", Setup: func(b *testing.B) Op {
			loadBreakerRule(b, sentinelRule(guardSentinelResource, scb.ErrorRatio, breakerOpen))
			if _, err := sflow.LoadRulesOfResource(guardSentinelResource, []*sflow.Rule{{
				Resource:               guardSentinelResource,
				TokenCalculateStrategy: sflow.Direct,
				ControlBehavior:        sflow.Reject,
				Threshold:              guardLimit,
				StatIntervalInMs:       1000,
			}}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _, _ = sflow.LoadRulesOfResource(guardSentinelResource, nil) })
			return allows(b, "sentinel", sentinelEntryExit(guardSentinelResource))
		}},
		// go-zero's default breaker, without a QPS limit (see above).
		{Name: "go-zero breaker Do (breaker only, no QPS limit)", Setup: func(b *testing.B) Op {
			zb := zbreaker.NewBreaker()
			return allows(b, "go-zero", func() int64 { return b2i(zb.Do(succeed) == nil) })
		}},
	},
}
