package flow

import "github.com/slidegate/slidegate/clock"

// options are the settings shared by the constructors in this package.
type options struct {
	clock   clock.Clock
	buckets int
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
// limit under steady overload, k/(k+1) of it, at 16 bytes per bucket; the
// interval must divide into whole nanoseconds per bucket, each at least 1 µs.
func WithBuckets(k int) Option {
	return func(o *options) { o.buckets = k }
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
