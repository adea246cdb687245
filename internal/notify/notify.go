// Package notify delivers notices to a listener off the goroutine that
// makes them: a breaker's state changes, a guard's events. Making a notice
// never waits for the listener, which a slow listener must not hold up.
package notify

import (
	"sync"
	"sync/atomic"
)

// A Queue delivers the notices pushed to it to its listener, in order, on a
// goroutine of its own. The goroutine starts when a notice is queued and
// none is running, and returns when the queue is empty: nothing runs while
// nothing happens, and there is nothing to stop. A queue holds at most its
// size of undelivered notices; pushing one more drops the oldest, counted
// in Dropped. The ring is allocated by the first push, so a queue that is
// never pushed to costs only its header.
type Queue[T any] struct {
	f       func(T)
	size    int
	dropped atomic.Int64
	Running sync.WaitGroup // the delivering goroutine, if any: tests wait on it

	mu      sync.Mutex
	ring    []T
	head, n int
	busy    bool // a goroutine is delivering
	closed  bool
}

// New returns a queue that delivers to f, holding at most size undelivered
// notices (at least 1).
func New[T any](f func(T), size int) *Queue[T] {
	return &Queue[T]{f: f, size: max(size, 1)}
}

// Push queues v, dropping the oldest notice if the queue is full, and
// starts a goroutine to deliver it if none is running. It never waits for
// the listener.
func (q *Queue[T]) Push(v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if q.ring == nil {
		q.ring = make([]T, q.size)
	}
	if q.n == q.size {
		var zero T
		q.ring[q.head] = zero
		q.head = (q.head + 1) % q.size
		q.n--
		q.dropped.Add(1)
	}
	q.ring[(q.head+q.n)%q.size] = v
	q.n++
	if !q.busy {
		q.busy = true
		q.Running.Add(1)
		go q.deliver()
	}
}

// deliver tells the queued notices, in order, until the queue is empty.
func (q *Queue[T]) deliver() {
	defer q.Running.Done()
	var zero T
	for {
		q.mu.Lock()
		if q.n == 0 {
			q.busy = false
			q.mu.Unlock()
			return
		}
		v := q.ring[q.head]
		q.ring[q.head] = zero // let go of what it holds
		q.head = (q.head + 1) % q.size
		q.n--
		q.mu.Unlock()
		q.f(v)
	}
}

// Dropped returns how many notices were dropped because the listener fell
// more than the queue's size behind.
func (q *Queue[T]) Dropped() int64 { return q.dropped.Load() }

// Close stops queueing notices; those queued already are still told. It
// does not wait, so the listener itself may call it.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}
