package breaker

import (
	"fmt"
	"time"
)

// A cause says why a Circuit changed state. Each but a failed probe's
// follows from the change itself (closed to open: tripped); a Transition
// tells a probe that timed out from one that failed (ProbeTimedOut).
type cause uint8

const (
	tripped           cause = iota // a closed circuit's window met its strategy
	openTimeoutPassed              // an open circuit's timeout passed and a request arrived, the first probe
	probeFailed                    // a half-open circuit's probe failed
	probeTimedOut                  // a probe did not finish within the probe timeout
	probesSucceeded                // enough of a half-open circuit's probes succeeded
)

// A Transition is one state change of a [Circuit], as told to
// [OnStateChange]. Its cause follows from From and To. A closed circuit
// opens when its window meets its strategy. An open one turns half-open
// when its timeout has passed and a request arrives, the first probe. A
// half-open one closes when its probes succeed, and opens when one fails
// or times out. The zero Transition describes no change.
type Transition struct {
	From, To State
	// At is the time of the change, in nanoseconds on the Circuit's clock.
	At int64
	// Generation is the generation the change begins.
	Generation uint64
	// Stats are the window's counts that met the strategy, when a closed
	// circuit tripped; zero for other changes.
	Stats Stats
	// OpenFor is how long the circuit stays open, for a change to Open.
	OpenFor time.Duration
	// ProbeTimedOut says a half-open circuit opened because a probe did not
	// finish within the probe timeout, not because one failed.
	ProbeTimedOut bool
	// Dropped is how many changes the listener was not told so far,
	// because it fell more than 64 behind.
	Dropped int64
}

// String describes the change ("closed → open (tripped: 6 of 10 requests
// failed, 2 in a row, 0 slow, open for 5s)").
func (t Transition) String() string {
	var why string
	switch {
	case t.From == Closed && t.To == Open:
		c := t.Stats
		why = fmt.Sprintf("tripped: %d of %d requests failed, %d in a row, %d slow", c.Failures, c.Requests, c.ConsecutiveFailures, c.Slow)
	case t.From == Open && t.To == HalfOpen:
		why = "open timeout passed"
	case t.From == HalfOpen && t.To == Closed:
		why = "probes succeeded"
	case t.ProbeTimedOut:
		why = "probe timed out"
	default:
		why = "probe failed"
	}
	s := fmt.Sprintf("%v → %v (%s", t.From, t.To, why)
	if t.To == Open {
		s += ", open for " + t.OpenFor.String()
	}
	return s + ")"
}

// queueSize is how many undelivered changes a Circuit keeps for its
// listener (notify.Queue): one that falls further behind loses the oldest.
const queueSize = 64
