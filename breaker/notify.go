package breaker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A Cause says why a Circuit changed state. The zero Cause is Tripped.
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

// A Transition is one state change of a Circuit, as told to OnStateChange.
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

// queueSize is how many undelivered changes a notifier keeps.
const queueSize = 64

// A notifier delivers transitions to a listener on a goroutine of its own,
// in order, so that a slow listener never holds up the request that caused a
// change. The goroutine starts when a change is queued and none is running,
// and returns when the queue is empty: nothing runs while nothing changes,
// and there is nothing to stop.
type notifier struct {
	f       func(Transition)
	dropped atomic.Int64
	running sync.WaitGroup // the delivering goroutine, if any; tests wait on it

	mu      sync.Mutex
	queue   [queueSize]Transition
	head, n int
	busy    bool // a goroutine is delivering
	closed  bool
}

func newNotifier(f func(Transition)) *notifier { return &notifier{f: f} }

// push queues t, dropping the oldest change if the queue is full, and starts
// a goroutine to deliver it if none is running.
func (n *notifier) push(t Transition) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	if n.n == queueSize {
		n.head = (n.head + 1) % queueSize
		n.n--
		n.dropped.Add(1)
	}
	n.queue[(n.head+n.n)%queueSize] = t
	n.n++
	if !n.busy {
		n.busy = true
		n.running.Add(1)
		go n.deliver()
	}
}

// deliver tells the queued changes, in order, until the queue is empty.
func (n *notifier) deliver() {
	defer n.running.Done()
	for {
		n.mu.Lock()
		if n.n == 0 {
			n.busy = false
			n.mu.Unlock()
			return
		}
		t := n.queue[n.head]
		n.head = (n.head + 1) % queueSize
		n.n--
		n.mu.Unlock()
		n.f(t)
	}
}

// close stops queueing changes; those queued already are still told. It does
// not wait, so the listener itself may call it.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
}
