package breaker

import (
	"fmt"
	"strconv"
	"time"
)

// A Strategy is the condition on which a Circuit opens, over its window.
// Make one with ErrorRatio, ErrorCount or SlowRatio. Every strategy also
// needs the window to hold at least the minimum volume of requests
// (WithMinRequests), and it is checked when a request that can meet it ends:
// a failure, or for SlowRatio a slow request. So a Circuit opens on a failure
// (or a slow request), counting that request, and never on a success.
type Strategy struct {
	kind      strategyKind
	threshold float64       // ErrorRatio, SlowRatio
	count     int64         // ErrorCount
	maxRT     time.Duration // SlowRatio
}

type strategyKind uint8

const (
	noStrategy strategyKind = iota
	errorRatio
	errorCount
	slowRatio
)

// ErrorRatio opens the circuit when failures are at least threshold of the
// requests in the window (threshold in (0, 1]; 0.5 opens at half).
func ErrorRatio(threshold float64) Strategy {
	return Strategy{kind: errorRatio, threshold: threshold}
}

// ErrorCount opens the circuit when the window holds at least n failures.
func ErrorCount(n int64) Strategy { return Strategy{kind: errorCount, count: n} }

// SlowRatio opens the circuit when requests slower than maxRT are at least
// threshold of the requests in the window (threshold in (0, 1]). A request
// that takes exactly maxRT is not slow. A half-open probe slower than maxRT
// fails. Errors do not count against this strategy; pair it with another
// Circuit for those.
func SlowRatio(maxRT time.Duration, threshold float64) Strategy {
	return Strategy{kind: slowRatio, threshold: threshold, maxRT: maxRT}
}

// String describes the strategy ("error ratio ≥ 0.5").
func (s Strategy) String() string {
	switch s.kind {
	case errorRatio:
		return "error ratio ≥ " + strconv.FormatFloat(s.threshold, 'g', -1, 64)
	case errorCount:
		return "errors ≥ " + strconv.FormatInt(s.count, 10)
	case slowRatio:
		return "ratio of requests slower than " + s.maxRT.String() + " ≥ " + strconv.FormatFloat(s.threshold, 'g', -1, 64)
	}
	return "no strategy"
}

func (s Strategy) check() error {
	switch s.kind {
	case errorRatio:
		return checkRatio("error ratio threshold", s.threshold)
	case errorCount:
		if s.count < 1 {
			return fmt.Errorf("%w: error count threshold = %d: must be at least 1", ErrInvalidConfig, s.count)
		}
		return nil
	case slowRatio:
		if s.maxRT <= 0 {
			return fmt.Errorf("%w: slow ratio max RT = %v: must be positive", ErrInvalidConfig, s.maxRT)
		}
		return checkRatio("slow ratio threshold", s.threshold)
	}
	return fmt.Errorf("%w: strategy is the zero Strategy: make one with ErrorRatio, ErrorCount or SlowRatio", ErrInvalidConfig)
}

// meets reports whether window totals c meet the strategy, given the minimum
// volume. Ratios are compared as quotients, so a threshold written as the
// decimal of failures/requests (0.3 for 3 of 10) is met exactly there.
func (s Strategy) meets(c counts, minRequests int64) bool {
	n := c.successes + c.failures
	if n == 0 || n < minRequests {
		return false
	}
	switch s.kind {
	case errorRatio:
		return float64(c.failures)/float64(n) >= s.threshold
	case errorCount:
		return c.failures >= s.count
	case slowRatio:
		return float64(c.slow)/float64(n) >= s.threshold
	}
	return false
}

// slow reports whether a request that took rt nanoseconds is slow.
func (s Strategy) slow(rt int64) bool { return s.kind == slowRatio && rt > int64(s.maxRT) }
