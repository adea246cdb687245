package compare

import (
	"fmt"
	"sync/atomic"
	"time"

	sapi "github.com/alibaba/sentinel-golang/api"
	sflow "github.com/alibaba/sentinel-golang/core/flow"
	sutil "github.com/alibaba/sentinel-golang/util"
	"golang.org/x/time/rate"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowsim"
)

// The accuracy comparison: every limiter is driven by flowsim's traffic
// patterns on simulated time, and flowsim measures the most it allowed in
// any interval of the limit's length, wherever the interval starts.

// The accuracy simulation's defaults: 100 per second over 60 s of simulated
// time.
const (
	AccuracyLimit    = 100
	AccuracyInterval = time.Second
	AccuracyDuration = 60 * time.Second
	AccuracySeed     = 1
)

// simEpoch is the wall-clock time at which the simulation's time 0 falls, for
// the limiters that take a time.Time or read a Unix clock. It is a whole
// second, so that sentinel's buckets (500 ms from the Unix epoch) and
// slidegate's (from time 0) both have edges where the "edge bursts" pattern
// puts its bursts.
var simEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// An AccuracyLimiter is a limiter run through the simulation.
type AccuracyLimiter struct {
	Name string
	Ours bool // slidegate's: the one whose bound is guaranteed
	// New returns a fresh limiter of limit requests per interval as an
	// allow function for flowsim.Run, and a function to call when the run
	// is over.
	New func(limit int64, interval time.Duration) (allow func(now, n int64) bool, done func(), err error)
}

// AccuracyLimiters returns the limiters compared, in table order.
func AccuracyLimiters() []AccuracyLimiter {
	return []AccuracyLimiter{
		{Name: "slidegate flow.QPS", Ours: true, New: newQPSAllow},
		{Name: "x/time/rate", New: newRateAllow},
		{Name: "sentinel flow rule", New: newSentinelAllow},
	}
}

// An AccuracyTable is one limiter's results, one per pattern.
type AccuracyTable struct {
	Limiter AccuracyLimiter
	Results []flowsim.Result
}

// Accuracy runs every limiter of AccuracyLimiters through every pattern of
// flowsim.Patterns, a fresh limiter per pattern.
func Accuracy(limit int64, interval, duration time.Duration, seed uint64) ([]AccuracyTable, error) {
	var tables []AccuracyTable
	for _, l := range AccuracyLimiters() {
		t := AccuracyTable{Limiter: l}
		for _, p := range flowsim.Patterns() {
			allow, done, err := l.New(limit, interval)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.Name, err)
			}
			t.Results = append(t.Results, flowsim.Run(allow, p, limit, interval, duration, 0, seed))
			done()
		}
		tables = append(tables, t)
	}
	return tables, nil
}

// newQPSAllow runs slidegate's QPS limiter in its default configuration on
// the simulation's time.
func newQPSAllow(limit int64, interval time.Duration) (func(now, n int64) bool, func(), error) {
	q, err := flow.NewQPS(flow.QPSSettings{Limit: limit, Interval: interval})
	if err != nil {
		return nil, nil, err
	}
	return func(now, n int64) bool { return q.AllowNAt(now, n).Allowed }, func() {}, nil
}

// newRateAllow runs x/time/rate with the same rate and a burst of the limit,
// through AllowN, which takes the time.
func newRateAllow(limit int64, interval time.Duration) (func(now, n int64) bool, func(), error) {
	l := rate.NewLimiter(rate.Limit(float64(limit)/interval.Seconds()), int(limit))
	return func(now, n int64) bool { return l.AllowN(time.Unix(0, simEpoch+now), int(n)) }, func() {}, nil
}

// sentinelRuns numbers the sentinel resources of the simulation: sentinel's
// resources, their statistics and rules are global, so every run takes a
// fresh one.
var sentinelRuns atomic.Int64

// newSentinelAllow runs sentinel's default QPS flow rule (Direct, Reject,
// StatIntervalInMs of the interval, which for 1 s reuses the resource's
// default statistic: 2 buckets of 500 ms) through api.Entry, the whole slot
// chain, on simulated time.
//
// Sentinel reads every time through the clock of its util package, which
// util.SetClock replaces (its own tests do so with util.MockClock). The run
// installs a simClock, sets it to each arrival's time before api.Entry, and
// done puts the previous clock back. The clock is global: while a run is in
// progress, every sentinel user in the process sees simulated time.
func newSentinelAllow(limit int64, interval time.Duration) (func(now, n int64) bool, func(), error) {
	if interval%time.Millisecond != 0 {
		return nil, nil, fmt.Errorf("interval %v is not whole milliseconds", interval)
	}
	quietSentinel()
	prev := sutil.CurrentClock()
	c := new(simClock)
	c.set(simEpoch)
	sutil.SetClock(c) // before the resource's statistic is created, which reads the time
	res := fmt.Sprintf("flowsim-%d", sentinelRuns.Add(1))
	_, err := sflow.LoadRulesOfResource(res, []*sflow.Rule{{
		Resource:               res,
		TokenCalculateStrategy: sflow.Direct,
		ControlBehavior:        sflow.Reject,
		Threshold:              float64(limit),
		StatIntervalInMs:       uint32(interval / time.Millisecond),
	}})
	if err != nil {
		sutil.SetClock(prev)
		return nil, nil, err
	}
	allow := func(now, n int64) bool {
		c.set(simEpoch + now)
		e, blocked := sapi.Entry(res, sapi.WithBatchCount(uint32(n)))
		if blocked != nil {
			return false
		}
		e.Exit()
		return true
	}
	done := func() {
		_, _ = sflow.LoadRulesOfResource(res, nil) // remove the rule
		sutil.SetClock(prev)
	}
	return allow, done, nil
}

// simClock is a sentinel util.Clock showing simulated time: Unix nanoseconds
// set by the simulation.
type simClock struct{ ns atomic.Int64 }

func (c *simClock) set(unixNano int64) { c.ns.Store(unixNano) }

func (c *simClock) Now() time.Time            { return time.Unix(0, c.ns.Load()) }
func (c *simClock) CurrentTimeMillis() uint64 { return uint64(c.ns.Load() / int64(time.Millisecond)) }
func (c *simClock) CurrentTimeNano() uint64   { return uint64(c.ns.Load()) }

// Sleep does nothing: simulated time moves only with the arrivals. The Reject
// rules simulated never sleep.
func (c *simClock) Sleep(time.Duration) {}
