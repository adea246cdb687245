package metrics

// The defaults and bounds the tests check, unexported.
const (
	DefaultTopKeys = defaultTopKeys
	MaxBuckets     = maxBuckets
)

// DefaultBuckets are the classic buckets unless WithBuckets says otherwise.
var DefaultBuckets = defaultBuckets
