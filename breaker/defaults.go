package breaker

import "time"

// DefaultInterval is the interval of both breakers' sliding window (see
// [WithWindow]).
const DefaultInterval = 10 * time.Second

// The defaults of an [SRE] breaker: go-zero's window and protection,
// and the K that the Google SRE book recommends. It has no minimum volume.
const (
	DefaultSREBuckets = 40  // see [WithWindow]
	DefaultK          = 2.0 // see [WithK]
	DefaultProtection = 5   // see [WithProtection]
)

// The defaults of a [Circuit]. Its probe timeout is its open timeout, and
// its open timeout does not back off.
const (
	DefaultCircuitBuckets = 10              // see [WithWindow]
	DefaultOpenTimeout    = 5 * time.Second // see [WithOpenTimeout]
	DefaultProbes         = 1               // see [WithProbes]
	// DefaultMinRequests is the minimum volume of [ErrorRatio],
	// [ErrorCount] and [SlowRatio]. [ConsecutiveFailures] and [TripWhen]
	// have none (see [WithMinRequests]).
	DefaultMinRequests = 10
)
