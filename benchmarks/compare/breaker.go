package compare

import (
	"context"
	"errors"
	"testing"
	"time"

	sapi "github.com/alibaba/sentinel-golang/api"
	sbase "github.com/alibaba/sentinel-golang/core/base"
	scb "github.com/alibaba/sentinel-golang/core/circuitbreaker"
	"github.com/sony/gobreaker/v2"
	zbreaker "github.com/zeromicro/go-zero/core/breaker"
	zstat "github.com/zeromicro/go-zero/core/stat"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
)

// The circuit breakers' speed rows. BreakerAllowSucceed and BreakerDo run a
// healthy dependency: every request succeeds, so every breaker stays closed
// and the rows measure allowing a request and counting its success.
// BreakerBlockOpen measures blocking: every breaker is tripped first (or,
// for the adaptive ones, driven to a block ratio near 1) and stays so for the
// whole run.
//
// The breakers with states are configured alike where their options allow:
// slidegate's Circuit has its defaults (10 s window in 10 buckets, at least
// 10 requests, open for 5 s) and sentinel's rules the same numbers. gobreaker
// is used with its defaults (counts never cleared while closed, trips after
// more than 5 consecutive failures, open for 60 s), and once more, in
// BreakerAllowSucceed, with a 10 s rolling window of 10 buckets and an error
// ratio of 0.5 over at least 10 requests. The SRE breakers, slidegate's
// SRE and go-zero's, have their defaults (10 s in 40 buckets,
// protection 5; K = 2 and go-zero's 1.5).

// Sentinel resources of the breaker rows. Each Setup loads its resource's
// rule afresh and clears it when the benchmark ends, so that every run
// starts with a new, closed breaker: sentinel's rules and breakers are
// global.
const (
	errorRatioResource = "compare-breaker-error-ratio"
	slowRatioResource  = "compare-breaker-slow-ratio"
	openResource       = "compare-breaker-open"
)

// Settings shared by the rows.
const (
	breakerWindow   = 10 * time.Second // slidegate Circuit's default window
	breakerBuckets  = 10               // and its default buckets
	breakerMinReqs  = 10               // and its default minimum volume
	breakerRatio    = 0.5              // error (or slow) ratio that trips
	breakerMaxRT    = time.Second      // slowness threshold of the slow-ratio rows
	breakerOpen     = 5 * time.Second  // slidegate Circuit's default open timeout
	breakerLongOpen = time.Hour        // open timeout of the tripped breakers
	// breakerFailures is how many failing requests the SRE breakers of
	// BreakerBlockOpen are offered before the run. With every request
	// failing, and the requests the breakers block themselves counted as
	// requests (both count them by default while the window holds failures),
	// the block ratio is (requests − 5) / (requests + 1): 0.9994 after 10,000.
	breakerFailures = 10_000
)

// errDependency is the error of a failing request.
var errDependency = errors.New("compare: dependency failed")

// ctx is the context of slidegate's Do: never done.
var ctx = context.Background()

// The requests the one-call APIs run: static functions, so that no closure
// is built per call.
func succeed() error           { return nil }
func succeedAny() (any, error) { return nil, nil }
func failAny() (any, error)    { return nil, errDependency }

// go-zero's breaker imports its core/stat package, whose init starts a
// goroutine that samples the process's CPU usage every 250 ms and logs it,
// with memory statistics, to stdout every minute; and whose alert reporter
// logs to stderr (at most once per 5 minutes) when the breaker blocks a
// request. The sampling goes on, as in any program that uses go-zero's
// breaker. The usage log is turned off, so that it does not land in
// comparetable's table, and the reporter is replaced by one that discards
// the message: go-zero still builds the message for every request it blocks
// and still runs the reporter's rate limiter, as in service. (go-zero's own
// tests remove the reporter altogether.)
func init() {
	zstat.DisableLog()
	zstat.SetReporter(func(string) {})
}

// loadBreakerRule loads rule as the only circuit-breaker rule of its
// resource, and clears it when the benchmark ends. No flow rule is loaded:
// of the rule-checking slots, only the circuit breaker has work to do.
func loadBreakerRule(b *testing.B, rule scb.Rule) {
	quietSentinel()
	res := rule.Resource
	if _, err := scb.LoadRulesOfResource(res, []*scb.Rule{&rule}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = scb.LoadRulesOfResource(res, nil) })
}

// sentinelRule returns a rule on resource res with the Circuit's settings.
func sentinelRule(res string, s scb.Strategy, retryTimeout time.Duration) scb.Rule {
	return scb.Rule{
		Resource:                     res,
		Strategy:                     s,
		RetryTimeoutMs:               uint32(retryTimeout / time.Millisecond),
		MinRequestAmount:             breakerMinReqs,
		StatIntervalMs:               uint32(breakerWindow / time.Millisecond),
		StatSlidingWindowBucketCount: breakerBuckets,
		MaxAllowedRtMs:               uint64(breakerMaxRT / time.Millisecond), // SlowRequestRatio only
		Threshold:                    breakerRatio,
	}
}

// sentinelEntryExit returns the operation of sentinel's healthy rows: enter
// res and exit at once, with no error.
func sentinelEntryExit(res string) Op {
	return func() int64 {
		e, blocked := sapi.Entry(res)
		if blocked != nil {
			return 0
		}
		e.Exit()
		return 1
	}
}

// allows checks, before the timer starts, that op allows a request (returns
// 1), and returns op. Running it once also settles that request.
func allows(b *testing.B, name string, op Op) Op {
	if op() != 1 {
		b.Fatalf("%s: the healthy breaker blocked a request", name)
	}
	return op
}

// blocks checks, before the timer starts, that op allows (returns 1) at most
// most of 100 requests, and returns op. A tripped Circuit, gobreaker or
// sentinel breaker allows none. The SRE breakers block with a
// probability, above 0.999 in BreakerBlockOpen, so they may allow 10: the
// chance that they allow more is below 10^-20.
func blocks(b *testing.B, name string, most int64, op Op) Op {
	var allowed int64
	for range 100 {
		allowed += op()
	}
	if allowed > most {
		b.Fatalf("%s: the tripped breaker allowed %d of 100 requests, want at most %d", name, allowed, most)
	}
	return op
}

// allowSucceed allows one request and settles it as a success through each
// breaker's two-step API (allow, then report), with a healthy dependency.
var allowSucceed = &Shape{
	ID:   "BreakerAllowSucceed",
	Name: "Allow + settle 1 success, healthy dependency",
	Impls: []Impl{
		timeNow,
		{Name: "clock.System.Now", Setup: func(*testing.B) Op {
			return func() int64 { return clock.System.Now() }
		}},
		// Default SRE: Allow reads the clock and, with no failure in
		// the window, neither reads the window nor draws; Succeed reads the
		// clock and counts.
		{Name: "slidegate SRE Allow+Succeed", Role: Ours, Setup: func(b *testing.B) Op {
			a := must(breaker.NewSRE())
			return allows(b, "SRE", func() int64 {
				p, err := a.Allow()
				if err != nil {
					return 0
				}
				p.Done(nil)
				return 1
			})
		}},
		// A closed error-ratio Circuit does not read the clock to allow;
		// Succeed reads it once and counts.
		{Name: "slidegate Circuit ErrorRatio(0.5) Allow+Succeed", Role: Ours, Setup: func(b *testing.B) Op {
			c := must(breaker.NewCircuit(breaker.ErrorRatio(breakerRatio)))
			return allows(b, "Circuit ErrorRatio", allowSucceedCircuit(c))
		}},
		// A slow-ratio Circuit reads the clock twice, to time the request.
		{Name: "slidegate Circuit SlowRatio(1s, 0.5) Allow+Succeed", Role: Ours, Setup: func(b *testing.B) Op {
			c := must(breaker.NewCircuit(breaker.SlowRatio(breakerMaxRT, breakerRatio)))
			return allows(b, "Circuit SlowRatio", allowSucceedCircuit(c))
		}},
		// go-zero's default breaker (NewBreaker): its Allow wraps the
		// promise with the breaker's error log.
		{Name: "go-zero breaker Allow+Accept", Setup: func(b *testing.B) Op {
			zb := zbreaker.NewBreaker()
			return allows(b, "go-zero", func() int64 {
				p, err := zb.Allow()
				if err != nil {
					return 0
				}
				p.Accept()
				return 1
			})
		}},
		// gobreaker's two-step breaker with default Settings: it never
		// clears its counts while closed and trips on consecutive failures.
		// Allow returns a closure that reports the outcome.
		{Name: "gobreaker TwoStep Allow+done(nil)", Setup: func(b *testing.B) Op {
			cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{})
			return allows(b, "gobreaker", allowDoneGobreaker(cb))
		}},
		// The same with a rolling window like the Circuit's, 10 s in buckets
		// of 1 s, and an error ratio of 0.5 over at least 10 requests.
		{Name: "gobreaker TwoStep Allow+done(nil), 10 s in 10 buckets, ratio 0.5", Setup: func(b *testing.B) Op {
			cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
				Interval:     breakerWindow,
				BucketPeriod: breakerWindow / breakerBuckets,
				ReadyToTrip: func(c gobreaker.Counts) bool {
					return c.Requests >= breakerMinReqs && float64(c.TotalFailures) >= breakerRatio*float64(c.Requests)
				},
			})
			return allows(b, "gobreaker rolling", allowDoneGobreaker(cb))
		}},
		// sentinel's whole slot chain with one circuit-breaker rule on the
		// resource, ErrorRatio 0.5 over 10 s in 10 buckets, at least 10
		// requests; Exit reports the request to the breaker, which sums its
		// window on every completion.
		{Name: "sentinel api.Entry+Exit, ErrorRatio rule", Setup: func(b *testing.B) Op {
			loadBreakerRule(b, sentinelRule(errorRatioResource, scb.ErrorRatio, breakerOpen))
			return allows(b, "sentinel ErrorRatio", sentinelEntryExit(errorRatioResource))
		}},
		// The same with a SlowRequestRatio rule: requests slower than 1 s,
		// ratio 0.5.
		{Name: "sentinel api.Entry+Exit, SlowRequestRatio rule", Setup: func(b *testing.B) Op {
			loadBreakerRule(b, sentinelRule(slowRatioResource, scb.SlowRequestRatio, breakerOpen))
			return allows(b, "sentinel SlowRequestRatio", sentinelEntryExit(slowRatioResource))
		}},
	},
}

// allowSucceedCircuit returns the two-step operation on a Circuit.
func allowSucceedCircuit(c *breaker.Circuit) Op {
	return func() int64 {
		p, err := c.Allow()
		if err != nil {
			return 0
		}
		p.Done(nil)
		return 1
	}
}

// allowDoneGobreaker returns the two-step operation on a gobreaker.
func allowDoneGobreaker(cb *gobreaker.TwoStepCircuitBreaker[any]) Op {
	return func() int64 {
		done, err := cb.Allow()
		if err != nil {
			return 0
		}
		done(nil)
		return 1
	}
}

// breakerDo runs one request that succeeds through each breaker's one-call
// API, which allows it, calls it and counts its outcome; every library
// defers a call that counts a panicking request as a failure. sentinel has
// no such API.
var breakerDo = &Shape{
	ID:   "BreakerDo",
	Name: "Do 1 request returning nil, healthy dependency",
	Impls: []Impl{
		timeNow,
		// Default SRE.
		{Name: "slidegate SRE.Do", Role: Ours, Setup: func(b *testing.B) Op {
			a := must(breaker.NewSRE())
			return allows(b, "SRE", func() int64 { return b2i(a.Do(ctx, succeed) == nil) })
		}},
		// Circuit with the default settings, ErrorRatio 0.5.
		{Name: "slidegate Circuit.Do, ErrorRatio(0.5)", Role: Ours, Setup: func(b *testing.B) Op {
			c := must(breaker.NewCircuit(breaker.ErrorRatio(breakerRatio)))
			return allows(b, "Circuit", func() int64 { return b2i(c.Do(ctx, succeed) == nil) })
		}},
		// go-zero's default breaker.
		{Name: "go-zero breaker Do", Setup: func(b *testing.B) Op {
			zb := zbreaker.NewBreaker()
			return allows(b, "go-zero", func() int64 { return b2i(zb.Do(succeed) == nil) })
		}},
		// gobreaker with default Settings; its requests return a value, here
		// a nil any.
		{Name: "gobreaker Execute", Setup: func(b *testing.B) Op {
			cb := gobreaker.NewCircuitBreaker[any](gobreaker.Settings{})
			return allows(b, "gobreaker", func() int64 {
				_, err := cb.Execute(succeedAny)
				return b2i(err == nil)
			})
		}},
	},
}

// blockOpen asks a tripped breaker to allow one request: the cost of
// blocking. Every breaker is tripped before the run by failing requests and
// stays tripped throughout; a request it lets through anyway fails too, as
// the dependency is still down. The operation returns 1 for an allowed
// request, 0 for a blocked one.
var blockOpen = &Shape{
	ID:   "BreakerBlockOpen",
	Name: "Block 1 request, breaker open",
	Impls: []Impl{
		timeNow,
		// An error-ratio Circuit opened by 10 failures (its minimum volume),
		// open for an hour: Allow reads the clock, compares it with the end
		// of the open period and counts the blocked request.
		{Name: "slidegate Circuit.Allow, open", Role: Ours, Setup: func(b *testing.B) Op {
			c := must(breaker.NewCircuit(breaker.ErrorRatio(breakerRatio), breaker.WithOpenTimeout(breakerLongOpen, 0)))
			for range breakerMinReqs {
				if p, err := c.Allow(); err == nil {
					p.Done(errDependency)
				}
			}
			if s := c.Stats().State; s != breaker.Open {
				b.Fatalf("Circuit: %v after %d failures, want open", s, breakerMinReqs)
			}
			return blocks(b, "Circuit", 0, func() int64 {
				p, err := c.Allow()
				if err != nil {
					return 0
				}
				p.Done(errDependency)
				return 1
			})
		}},
		// A default SRE breaker offered 10,000 failing requests: block
		// ratio 0.9994 and rising, as its own blocks count. Allow reads the
		// clock and the window totals, draws, and counts the blocked request;
		// about 6 requests in 10,000 are let through, and fail, besides a
		// probe whenever none has gone through for a second.
		{Name: "slidegate SRE.Allow, block ratio ≈ 1", Role: Ours, Setup: func(b *testing.B) Op {
			a := must(breaker.NewSRE())
			op := func() int64 {
				p, err := a.Allow()
				if err != nil {
					return 0
				}
				p.Done(errDependency)
				return 1
			}
			for range breakerFailures {
				op()
			}
			if r := a.Stats().BlockRatio; r < 0.999 {
				b.Fatalf("SRE: block ratio %v after %d failing requests, want above 0.999", r, breakerFailures)
			}
			return blocks(b, "SRE", 10, op)
		}},
		// go-zero's default breaker offered 10,000 failing requests, the
		// same ratio (go-zero's dropRatio). For each request it blocks,
		// go-zero also formats the breaker's recent errors for its alert
		// reporter (see init). It lets one request through whenever none has
		// gone through for a second, so about one per second of the run is
		// let through, and fails.
		{Name: "go-zero breaker Allow, drop ratio ≈ 1", Setup: func(b *testing.B) Op {
			zb := zbreaker.NewBreaker()
			op := func() int64 {
				p, err := zb.Allow()
				if err != nil {
					return 0
				}
				p.Reject(errDependency.Error())
				return 1
			}
			for range breakerFailures {
				op()
			}
			return blocks(b, "go-zero", 10, op)
		}},
		// gobreaker with default Settings but an open period of an hour,
		// opened by 6 consecutive failures: Execute takes the mutex, reads
		// the clock and returns ErrOpenState.
		{Name: "gobreaker Execute, open", Setup: func(b *testing.B) Op {
			cb := gobreaker.NewCircuitBreaker[any](gobreaker.Settings{Timeout: breakerLongOpen})
			for range 6 {
				_, _ = cb.Execute(failAny)
			}
			if s := cb.State(); s != gobreaker.StateOpen {
				b.Fatalf("gobreaker: %v after 6 failures, want open", s)
			}
			return blocks(b, "gobreaker", 0, func() int64 {
				_, err := cb.Execute(failAny)
				return b2i(!errors.Is(err, gobreaker.ErrOpenState))
			})
		}},
		// sentinel's slot chain with an ErrorRatio rule (0.5, 10 s in 10
		// buckets, at least 10 requests, retry after an hour), opened by
		// entries that record an error (api.TraceError) before they exit:
		// api.Entry returns a BlockError.
		{Name: "sentinel api.Entry, ErrorRatio rule, open", Setup: func(b *testing.B) Op {
			loadBreakerRule(b, sentinelRule(openResource, scb.ErrorRatio, breakerLongOpen))
			op := func() int64 {
				e, blocked := sapi.Entry(openResource)
				if blocked != nil {
					return 0
				}
				sapi.TraceError(e, errDependency)
				e.Exit()
				return 1
			}
			for i := 0; op() == 1; i++ {
				if i == 10*breakerMinReqs {
					b.Fatalf("sentinel: still closed after %d errors", i)
				}
			}
			e, blocked := sapi.Entry(openResource)
			if blocked == nil {
				e.Exit()
				b.Fatal("sentinel: entry allowed after the breaker opened")
			}
			if blocked.BlockType() != sbase.BlockTypeCircuitBreaking {
				b.Fatalf("sentinel: entry blocked by %v, want the circuit breaker", blocked.BlockType())
			}
			return blocks(b, "sentinel", 0, op)
		}},
	},
}
