package otelguard

import "time"

// WithNow makes a Producer read the time of its data points from now.
func WithNow(now func() time.Time) ProducerOption {
	return func(o *producerOptions) { o.now = now }
}
