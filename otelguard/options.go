package otelguard

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/slidegate/slidegate/internal/exported"
)

// An Option configures [Register] or [NewProducer].
type Option func(*options)

type options struct {
	attrs      []attribute.KeyValue
	buckets    []time.Duration
	bucketsSet bool
	now        func() time.Time
	err        error // the first option refused
}

// newOptions applies opts over the defaults, and returns the error of the
// first one refused.
func newOptions(opts []Option) (options, error) {
	o := options{buckets: defaultBuckets(), now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		return o, o.err
	}
	return o, checkBuckets(o.buckets)
}

// WithAttributes adds attrs to every data point. It tells apart the guards
// of one process that share a MeterProvider: give each guard's [Register]
// and [NewProducer] its own, such as attribute.String("guard", "api").
// Without it, two guards with a resource of the same name would observe the
// same series twice.
//
// A key must not be empty, nor in the namespace slidegate., which is the
// instruments' own. A key given twice keeps its last value. The slice is
// copied.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(o *options) {
		for i, kv := range attrs {
			switch k := string(kv.Key); {
			case k == "":
				o.refuse(fmt.Errorf("otelguard: attributes[%d]: the key is empty", i))
				return
			case k == "slidegate" || strings.HasPrefix(k, "slidegate."):
				o.refuse(fmt.Errorf("otelguard: attributes[%d] = %q: the namespace slidegate. is the instruments' own", i, k))
				return
			}
		}
		o.attrs = append(o.attrs, attrs...)
	}
}

// refuse records err unless an earlier option was refused.
func (o *options) refuse(err error) {
	if o.err == nil {
		o.err = err
	}
}

// defaultBuckets returns the upper bounds of the histograms' buckets
// unless WithBuckets says otherwise, as its doc states them. Each call
// returns a fresh slice.
func defaultBuckets() []time.Duration {
	return []time.Duration{
		5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
		50 * time.Millisecond, 75 * time.Millisecond, 100 * time.Millisecond,
		250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond,
		time.Second, 2500 * time.Millisecond, 5 * time.Second,
		7500 * time.Millisecond, 10 * time.Second,
	}
}

// maxBuckets is the most bounds WithBuckets takes.
const maxBuckets = 64

// WithBuckets sets the upper bounds of the [Producer]'s histograms'
// buckets. By default they are those the OpenTelemetry semantic
// conventions advise for http.server.request.duration: 5 ms, 10 ms, 25 ms,
// 50 ms, 75 ms, 100 ms, 250 ms, 500 ms, 750 ms, 1 s, 2.5 s, 5 s, 7.5 s and
// 10 s. Each bound must be:
//   - above zero.
//   - below 2^38 ns (about 4 min 35 s).
//   - above the one before.
//
// There may be at most 64 of them. None leaves only the bucket to
// +Inf. [NewProducer] refuses bounds that break these rules, naming the
// first. [Register], which makes no histogram, refuses the option. The
// slice is copied.
func WithBuckets(bounds ...time.Duration) Option {
	return func(o *options) { o.buckets, o.bucketsSet = slices.Clone(bounds), true }
}

// checkBuckets returns an error naming the first bound that WithBuckets
// does not take, and nil if they are sound.
func checkBuckets(bounds []time.Duration) error {
	if err := exported.CheckBounds(bounds, maxBuckets); err != nil {
		return fmt.Errorf("otelguard: %w", err)
	}
	return nil
}
