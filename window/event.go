package window

import "strconv"

// An Event is something a [Counter] counts in each bucket.
type Event uint8

// The events a [Counter] records, nine of them. Summed events come first.
const (
	Allowed        Event = iota // requests allowed
	Blocked                     // requests blocked
	Succeeded                   // requests that ended without an error
	Failed                      // requests that ended with an error
	RT                          // summed response time, in microseconds
	Borrowed                    // requests allowed by borrowing a place in a later bucket
	Slow                        // requests slower than a threshold (a slow-request breaker's count)
	MinRT                       // smallest response time, in microseconds
	MaxConcurrency              // largest number of requests in flight

	// numEvents counts the events. To add a summed event, add its line
	// above MinRT, and its name to eventNames.
	numEvents
)

var eventNames = [numEvents]string{"allowed", "blocked", "succeeded", "failed", "rt", "borrowed", "slow", "min_rt", "max_concurrency"}

// String returns the event's name in snake case ("allowed", "min_rt").
func (e Event) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

// kind returns how the event combines values within a bucket and across
// buckets.
func (e Event) kind() kind {
	switch e {
	case MinRT:
		return kindMin
	case MaxConcurrency:
		return kindMax
	}
	return kindSum
}
