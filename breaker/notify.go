package breaker

import (
	"fmt"
	"time"
)

// A Cause says why a [Circuit] changed state. The zero Cause is [Tripped].
type Cause uint8

const (
	// Tripped: a closed circuit's window met its strategy.
	Tripped Cause = iota
	// OpenTimeoutPassed: an open circuit's timeout passed and a request
	// arrived, which becomes the first probe.
	OpenTimeoutPassed
	// ProbeFailed: a half-open circuit's probe failed.
	ProbeFailed
	// ProbeTimedOut: a half-open circuit's probe did not finish within the
	// probe timeout.
	ProbeTimedOut
	// ProbesSucceeded: enough of a half-open circuit's probes succeeded.
	ProbesSucceeded
)

var causeNames = [...]string{"tripped", "open timeout passed", "probe failed", "probe timed out", "probes succeeded"}

// String returns the cause in words ("probe timed out").
func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return "unknown cause"
}

// A Transition is one state change of a [Circuit], as told to
// [OnStateChange].
// The zero Transition describes no change.
type Transition struct {
	From, To State
	Cause    Cause
	// At is the time of the change, in nanoseconds on the Circuit's clock.
	At int64
	// Generation is the generation the change begins.
	Generation uint64
	// Counts are the window's counts that met the strategy, when a closed
	// circuit tripped; zero for other changes.
	Counts Counts
	// OpenFor is how long the circuit stays open, for a change to Open.
	OpenFor time.Duration
}

// String describes the change ("closed → open (tripped: 6 of 10 requests
// failed, 2 in a row, 0 slow, open for 5s)").
func (t Transition) String() string {
	s := fmt.Sprintf("%v → %v (%v", t.From, t.To, t.Cause)
	if t.Cause == Tripped {
		c := t.Counts
		s += fmt.Sprintf(": %d of %d requests failed, %d in a row, %d slow", c.Failures, c.Requests, c.ConsecutiveFailures, c.Slow)
	}
	if t.To == Open {
		s += ", open for " + t.OpenFor.String()
	}
	return s + ")"
}

// queueSize is how many undelivered changes a Circuit keeps for its
// listener (notify.Queue): one that falls further behind loses the oldest.
const queueSize = 64
