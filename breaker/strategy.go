package breaker

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/internal/breakerlimits"
)

// A Strategy is the condition on which a [Circuit] opens, over its window:
// [ErrorRatio], [ErrorCount], [SlowRatio], [ConsecutiveFailures], or a
// condition of your own with [TripWhen]. Every strategy also needs the
// window to hold the minimum volume of requests ([WithMinRequests]). It is
// checked when a request that can meet it ends: a failure, or for SlowRatio
// a slow request. So a Circuit opens on a failure (or a slow request),
// counting that request, and never on a success.
//
// A Strategy is a small value; copy it freely. The zero Strategy is no
// strategy: [NewCircuit] returns an error for it.
type Strategy struct {
	kind      strategyKind
	threshold float64       // ErrorRatio, SlowRatio
	count     int64         // ErrorCount, ConsecutiveFailures
	maxRT     time.Duration // SlowRatio
	when      *condition    // TripWhen; a pointer, so that a Strategy stays comparable
}

// A condition is a TripWhen strategy's predicate.
type condition struct {
	f func(Stats) bool
}

type strategyKind uint8

const (
	noStrategy strategyKind = iota
	errorRatio
	errorCount
	slowRatio
	consecutiveFailures
	tripWhen
)

// ErrorRatio opens the circuit when failures are at least threshold of the
// requests in the window. threshold is in (0, 1]: 0.5 opens at half.
func ErrorRatio(threshold float64) Strategy {
	return Strategy{kind: errorRatio, threshold: threshold}
}

// ErrorCount opens the circuit when the window holds at least n failures
// (n at least 1).
func ErrorCount(n int64) Strategy { return Strategy{kind: errorCount, count: n} }

// SlowRatio opens the circuit when requests slower than maxRT are at least
// threshold of the requests in the window. threshold is in (0, 1], and maxRT
// positive. A request that takes exactly maxRT is not slow. A half-open
// probe slower than maxRT fails. Errors do not count against this strategy;
// pair it with another Circuit for those.
func SlowRatio(maxRT time.Duration, threshold float64) Strategy {
	return Strategy{kind: slowRatio, threshold: threshold, maxRT: maxRT}
}

// ConsecutiveFailures opens the circuit when n failures in a row end its
// window ([Stats.ConsecutiveFailures] at least n, n at least 1). They are n
// failures with no success counted between them, all within the window's
// interval. A success starts the run again. An ignored outcome neither
// breaks nor extends it. A failure that leaves the window leaves the run.
// Its minimum volume is 0 unless [WithMinRequests] sets one: a run of n
// failures is a volume of n.
//
// Half-open probes are not part of the run. As under every strategy, one
// failed probe opens the circuit again, and the probes' successes close it,
// with an empty window and no run.
func ConsecutiveFailures(n int64) Strategy {
	return Strategy{kind: consecutiveFailures, count: n}
}

// TripWhen opens the circuit when trip, given the window's counts in a
// [Stats], returns true: gobreaker's ReadyToTrip. trip must not be nil.
//
// trip is called when a failure is counted, with counts that include it,
// and only then. So a condition that only a success could make true never
// trips. Its minimum volume is 0 unless [WithMinRequests] sets one: trip
// sees every failure, and checks [Stats.Requests] itself if it wants a
// volume. It is called on the goroutine that settles the request, outside
// every lock of the Circuit, maybe from several goroutines at once. It must
// be safe for concurrent use, be quick, and never block. It is not called
// for half-open probes, which decide by themselves.
func TripWhen(trip func(Stats) bool) Strategy {
	return Strategy{kind: tripWhen, when: &condition{f: trip}}
}

func (s Strategy) check() error {
	switch s.kind {
	case errorRatio:
		return checkRatio("ErrorRatio threshold", s.threshold)
	case errorCount:
		if s.count < 1 {
			return fmt.Errorf("%w: ErrorCount n = %d: must be at least 1", errInvalidConfig, s.count)
		}
		return nil
	case slowRatio:
		if s.maxRT <= 0 {
			return fmt.Errorf("%w: SlowRatio max RT = %v: must be positive", errInvalidConfig, s.maxRT)
		}
		return checkRatio("SlowRatio threshold", s.threshold)
	case consecutiveFailures:
		if s.count < 1 {
			return fmt.Errorf("%w: ConsecutiveFailures n = %d: must be at least 1", errInvalidConfig, s.count)
		}
		return nil
	case tripWhen:
		if s.when.f == nil {
			return fmt.Errorf("%w: TripWhen(nil): the condition must not be nil", errInvalidConfig)
		}
		return nil
	}
	return fmt.Errorf("%w: strategy is the zero Strategy: make one with ErrorRatio, ErrorCount, SlowRatio, ConsecutiveFailures or TripWhen", errInvalidConfig)
}

// minRequests is the strategy's default minimum volume (see WithMinRequests).
func (s Strategy) minRequests() int64 {
	switch s.kind {
	case consecutiveFailures, tripWhen:
		return 0
	}
	return breakerlimits.DefaultMinRequests
}

// meets reports whether window counts c meet the strategy, given the minimum
// volume. Ratios are compared as quotients, so a threshold written as the
// decimal of failures/requests (0.3 for 3 of 10) is met exactly there.
func (s Strategy) meets(c Stats, minRequests int64) bool {
	n := c.Requests
	if n == 0 || n < minRequests {
		return false
	}
	switch s.kind {
	case errorRatio:
		return float64(c.Failures)/float64(n) >= s.threshold
	case errorCount:
		return c.Failures >= s.count
	case slowRatio:
		return float64(c.Slow)/float64(n) >= s.threshold
	case consecutiveFailures:
		return c.ConsecutiveFailures >= s.count
	case tripWhen:
		return s.when.f(c)
	}
	return false
}

// slow reports whether a request that took rt nanoseconds is slow.
func (s Strategy) slow(rt int64) bool { return s.kind == slowRatio && rt > int64(s.maxRT) }
