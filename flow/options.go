package flow

import (
	"time"

	"github.com/slidegate/slidegate/clock"
)

// options are the settings shared by the constructors in this package.
type options struct {
	clock        clock.Clock
	buckets      int
	bucketsGiven bool // WithBuckets was given: a Throttle without warm-up has no use for it
	warmUp       time.Duration
	cold         float64
	warming      bool         // WithWarmUp was given
	memory       *KeyMemory   // WithKeyMemory: what a keyed limiter draws from
	bad          *ConfigError // the first option found bad as it was applied
}

// An Option customises a limiter. An Option that would change nothing is an
// error, not ignored; a nil Option is no option.
type Option func(*options)

// WithClock makes the limiter read time from c instead of clock.System.
// Tests and simulations pass a *clock.Manual. A nil c is an error.
func WithClock(c clock.Clock) Option {
	return func(o *options) {
		if c == nil && o.bad == nil {
			o.bad = &ConfigError{Option: "clock", Value: c, Detail: "must not be nil"}
		}
		o.clock = c
	}
}

// WithBuckets sets how many buckets a QPS limiter divides its interval into
// (default DefaultBuckets). More buckets let the limiter allow closer to its
// limit under steady overload, k/(k+1) of it, at 8 bytes per bucket; the
// interval must divide into whole nanoseconds per bucket, each at least 1 µs.
// A Throttle has buckets only with warm-up, where they set how often its pace
// changes; without WithWarmUp, WithBuckets is an error.
func WithBuckets(k int) Option {
	return func(o *options) { o.buckets, o.bucketsGiven = k, true }
}

// WithWarmUp makes a QPS limiter or a Throttle start cold and warm up, as
// Sentinel's and Guava's warm-up rules do. From cold its limit is
// limit/coldFactor (rounded down, for a QPS limiter), and it rises along
// Guava's curve to the full limit as traffic uses it: under steady overload
// it reaches the full limit in period and a bucket or two, and from then on
// allows what it would without warm-up (a QPS limiter of k buckets, k/(k+1)
// of its limit per interval). Traffic below the limit warms it by the share
// of its capacity it uses, and the share left unused cools it: an idle
// limiter is fully cold after period. The limit in force is never above the
// configured one, and a QPS limiter keeps its promise for the limit of each
// bucket. Sentinel's default cold factor is 3.
//
// The constructor returns a *ConfigError for what it cannot honor:
//
//   - period must be positive (Option "warm_up");
//   - coldFactor must be greater than 1 and at most the limit, so that the
//     cold limit is at least 1 request per interval (Option "cold_factor");
//   - period must be at least 2 intervals: a limit holds over an interval,
//     so a shorter warm-up would let the first interval allow far above the
//     cold limit;
//   - period must be at least 10 buckets: the limit changes once per bucket.
//
// A limiter with limit 0 has nothing to warm up; its period is checked all
// the same.
func WithWarmUp(period time.Duration, coldFactor float64) Option {
	return func(o *options) { o.warmUp, o.cold, o.warming = period, coldFactor, true }
}

// buildOptions applies opts over the defaults and returns the first bad
// option's error; WithKeyMemory is one for a limiter without keys.
func buildOptions(opts []Option) (options, error) {
	o, err := buildKeyedOptions(opts)
	if err == nil && o.memory != nil {
		err = &ConfigError{Option: "key_memory", Value: o.memory.limit, Detail: "only a keyed limiter keeps per-key state"}
	}
	return o, err
}

// buildKeyedOptions is buildOptions for a keyed limiter.
func buildKeyedOptions(opts []Option) (options, error) {
	o := options{clock: clock.System, buckets: DefaultBuckets}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.bad != nil {
		return o, o.bad
	}
	return o, nil
}
