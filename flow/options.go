package flow

import (
	"time"

	"github.com/slidegate/slidegate/clock"
)

// options are the settings shared by the constructors in this package.
type options struct {
	clock   clock.Clock
	buckets int
	warmUp  time.Duration
	cold    float64
}

// An Option customises a limiter.
type Option func(*options)

// WithClock makes the limiter read time from c instead of clock.System.
// Tests and simulations pass a *clock.Manual. A nil c is ignored.
func WithClock(c clock.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithBuckets sets how many buckets a QPS limiter divides its interval into
// (default DefaultBuckets). More buckets let the limiter admit closer to its
// limit under steady overload, k/(k+1) of it, at 40 bytes per bucket; the
// interval must divide into whole nanoseconds per bucket, each at least 1 µs.
func WithBuckets(k int) Option {
	return func(o *options) { o.buckets = k }
}

// WithWarmUp makes a QPS limiter or a Throttle start cold and warm up, as Sentinel's and
// Guava's warm-up rules do: from cold its limit is limit/coldFactor, and it
// rises to the full limit as traffic uses it, in period when traffic keeps
// the limiter full. Capacity left unused cools it again: an idle limiter is
// fully cold after period. coldFactor must exceed 1; Sentinel's default is 3.
func WithWarmUp(period time.Duration, coldFactor float64) Option {
	return func(o *options) { o.warmUp, o.cold = period, coldFactor }
}

func buildOptions(opts []Option) options {
	o := options{clock: clock.System, buckets: DefaultBuckets}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}
