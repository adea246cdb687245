// Package breakerlimits holds the defaults of package breaker's options,
// which the guard also needs to write a breaker rule out in full: one
// source for each number. breaker's docs state them.
package breakerlimits

import "time"

// DefaultInterval is the interval of both breakers' sliding window.
const DefaultInterval = 10 * time.Second

// An SRE breaker's defaults: go-zero's window and protection, and the K
// that the Google SRE book recommends. It has no minimum volume.
const (
	DefaultSREBuckets = 40
	DefaultK          = 2.0
	DefaultProtection = 5
)

// A Circuit's defaults. Its probe timeout is its open timeout, and its open
// timeout does not back off.
const (
	DefaultCircuitBuckets = 10
	DefaultOpenTimeout    = 5 * time.Second
	DefaultProbes         = 1
	// DefaultMinRequests is the minimum volume of ErrorRatio, ErrorCount
	// and SlowRatio. ConsecutiveFailures and TripWhen have none.
	DefaultMinRequests = 10
)
