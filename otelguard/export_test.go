package otelguard

import "time"

// WithNow makes a Producer read the time of its data points from now.
func WithNow(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// DefaultBuckets are the histograms' buckets unless WithBuckets says
// otherwise; MaxBuckets is the most it takes.
var DefaultBuckets = defaultBuckets

const MaxBuckets = maxBuckets
