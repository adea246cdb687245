package breaker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A Cause says why a Circuit changed state.
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
type Transition struct {
	From, To State
	Cause    Cause
	// At is the time of the change, in nanoseconds on the Circuit's clock.
	At int64
	// Generation is the generation the change begins.
	Generation uint64
	// Requests, Failures and Slow are the window's totals when a closed
	// circuit tripped; zero for other changes.
	Requests, Failures, Slow int64
	// OpenFor is how long the circuit stays open, for a change to Open.
	OpenFor time.Duration
}

// String describes the change ("closed → open (tripped: 6 of 10 requests
// failed)").
func (t Transition) String() string {
	s := fmt.Sprintf("%v → %v (%v", t.From, t.To, t.Cause)
	if t.Cause == Tripped {
		s += fmt.Sprintf(": %d of %d requests failed, %d slow", t.Failures, t.Requests, t.Slow)
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
// change. The goroutine starts with the first change and stops on close.
type notifier struct {
	f       func(Transition)
	dropped atomic.Int64

	mu      sync.Mutex
	queue   [queueSize]Transition
	head, n int
	running bool
	closed  bool
	wake    chan struct{} // capacity 1: a pending wake-up
	stop    chan struct{}
	done    chan struct{} // closed when the goroutine has returned
}

func newNotifier(f func(Transition)) *notifier {
	return &notifier{f: f, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// push queues t, dropping the oldest change if the queue is full.
func (n *notifier) push(t Transition) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	if n.n == queueSize {
		n.head = (n.head + 1) % queueSize
		n.n--
		n.dropped.Add(1)
	}
	n.queue[(n.head+n.n)%queueSize] = t
	n.n++
	if !n.running {
		n.running = true
		go n.loop()
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) loop() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			n.drain()
			return
		case <-n.wake:
			n.drain()
		}
	}
}

// drain delivers the queued changes, in order.
func (n *notifier) drain() {
	for {
		n.mu.Lock()
		if n.n == 0 {
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

// close delivers the changes already queued, then stops the goroutine.
func (n *notifier) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	running := n.running
	close(n.stop)
	n.mu.Unlock()
	if running {
		<-n.done
	}
}
