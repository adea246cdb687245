// Package flowlimits holds the defaults and bounds of package flow's
// settings, which the guard, redisflow and the integrations also need:
// one source for each number. flow's docs state them, and exports none.
package flowlimits

import "time"

// MaxLimit is the largest limit a limiter of package flow takes: 2^32-1,
// the most one of its count words holds.
const MaxLimit = 1<<32 - 1

// NumReasons is the number of flow.Reason values, the one of a request
// allowed included: an array indexed by a Reason has NumReasons elements.
const NumReasons = 8

// The buckets of a QPS limiter's interval and of a per-key window's, and
// the windows a KeyedQPS decides together.
const (
	// DefaultBuckets: under steady overload a QPS limiter allows 25/26
	// (96%) of its limit.
	DefaultBuckets = 25
	// DefaultKeyBuckets: a key paced at 95% of its limit is never refused.
	// Each bucket takes 4 bytes per hot key.
	DefaultKeyBuckets = 20
	MaxKeyBuckets     = 100
	MaxKeyWindows     = 8
)

// What the keyed limiters keep of keys.
const (
	// DefaultHotKeys is the most keys a KeyedQPS keeps exact windows for
	// before it asks its budget for more.
	DefaultHotKeys = 512
	// MaxShownKeyLength is the longest key KeyedQPS.Top shows.
	MaxShownKeyLength = 64
	// DefaultKeyMemory is the budget of a keyed limiter without one given,
	// and of a guard's per-key rules.
	DefaultKeyMemory = 64 << 20
	// DefaultKeysInFlight and MaxKeysInFlight bound the keys a
	// Concurrency or a Throttle per key is sized for.
	DefaultKeysInFlight = 4096
	MaxKeysInFlight     = 1 << 18
)

// A warm-up's cold factor when the settings leave it out: Sentinel's.
const DefaultColdFactor = 3

// A Shedder's defaults: go-zero's and BBR's, with a cool-off of a second.
const (
	DefaultShedCPUThreshold = 0.9
	DefaultShedInterval     = 5 * time.Second
	DefaultShedBuckets      = 50
	DefaultShedCoolOff      = time.Second
)

// An Adaptive limit's defaults.
const (
	DefaultAdaptiveAlgorithm     = "gradient"
	DefaultAdaptiveInitialLimit  = 20
	DefaultAdaptiveMinLimit      = 4
	DefaultAdaptiveMaxLimit      = 10000
	DefaultAdaptiveTolerance     = 1.25
	DefaultAdaptiveWindow        = 100 * time.Millisecond
	DefaultAdaptiveMinSamples    = 10
	DefaultAdaptiveDrainInterval = 10 * time.Second
	DefaultAdaptiveBackoff       = 0.8
)

// A RetryBudget's defaults and bound.
const (
	DefaultRetryInterval = 10 * time.Second
	DefaultRetryBuckets  = 20
	MaxRetryRatio        = 100
)
