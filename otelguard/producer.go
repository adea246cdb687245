package otelguard

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/exported"
	"github.com/slidegate/slidegate/window"
)

// A Producer exports a guard's response-time histograms, cumulative. It is
// an external producer of the OpenTelemetry SDK's readers.
//
//	p, err := otelguard.NewProducer(g)
//	reader := sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithProducer(p))
//
// A Producer reads the guard's own bins when the reader collects: those
// [slidegate.Guard.ResponseTimeTotals] reads, of every resource once, and of
// [slidegate.InboundResource]. It hands the reader one
// cumulative histogram data point per resource. The request path does not
// change. The histograms bypass the MeterProvider: its views do not apply
// to them. They are cumulative whatever temporality the reader asks for.
//
// Its methods are safe for concurrent use.
type Producer struct {
	g        *slidegate.Guard
	attrs    []attribute.KeyValue // WithAttributes
	bounds   []float64            // seconds
	bucketOf [exported.Bins]int
	now      func() time.Time

	mu        sync.Mutex
	buf       window.SketchTotals
	resources reading[*series] // a resource's series is forgotten when the guard no longer keeps it
	inbound   *series          // the guard's inbound traffic as a whole
}

// seriesKey names one resource's series: its name as an attribute value,
// and its direction.
type seriesKey struct {
	resource string
	inbound  bool
}

// series is what a Producer remembers of a histogram between collections:
// its attributes, when it began counting, and its count then.
type series struct {
	attrs attribute.Set
	seen  bool // by a collection before
	start time.Time
	count uint64
}

// NewProducer returns a Producer of the guard's histograms. It returns an
// error naming the option refused ([WithBuckets], [WithAttributes]).
func NewProducer(g *slidegate.Guard, opts ...Option) (*Producer, error) {
	if g == nil {
		return nil, errors.New("otelguard: guard is nil")
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	p := &Producer{g: g, now: o.now, attrs: o.attrs, bounds: make([]float64, len(o.buckets))}
	for i, b := range o.buckets {
		p.bounds[i] = b.Seconds()
	}
	// Bin i counts in the bucket of the lowest bound at or above the
	// response time the guard reports for it, as a histogram recording
	// that response time would.
	for i := range p.bucketOf {
		v := exported.BinValue(i)
		p.bucketOf[i] = len(o.buckets)
		for k, b := range o.buckets {
			if v <= b {
				p.bucketOf[i] = k
				break
			}
		}
	}
	return p, nil
}

// Produce returns the guard's histograms, read now.
// slidegate.request.duration has one data point per resource the guard
// keeps. slidegate.inbound.request.duration has one for the guard's inbound
// traffic. It never fails.
func (p *Producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.resources.read(p.g, func(k seriesKey) *series {
		return &series{attrs: p.set(ResourceKey.String(k.resource), DirectionKey.String(direction(k.inbound)))}
	})
	var points []metricdata.HistogramDataPoint[float64] // nil for no resource, as before
	if n := len(p.resources.rows); n > 0 {
		points = make([]metricdata.HistogramDataPoint[float64], n)
	}
	for i := range p.resources.rows {
		r, s := &p.resources.rows[i], p.resources.entries[i].v
		r.Latency.TotalsInto(&p.buf)
		pt := &points[i]
		p.point(pt, r.sum(), s.attrs)
		for _, l := range r.more { // names that read the same as attribute values
			l.TotalsInto(&p.buf)
			p.add(pt)
		}
		pt.StartTime, pt.Time = s.restart(pt.Count, now), now
	}
	p.g.ResponseTimeTotals(slidegate.InboundResource, &p.buf)
	in, _ := p.g.Stats(slidegate.InboundResource)
	if p.inbound == nil {
		p.inbound = &series{attrs: p.set()}
	}
	var inbound metricdata.HistogramDataPoint[float64]
	p.point(&inbound, in.Totals.RT.Seconds(), p.inbound.attrs)
	inbound.StartTime, inbound.Time = p.inbound.restart(inbound.Count, now), now
	return []metricdata.ScopeMetrics{{
		Scope: instrumentation.Scope{Name: ScopeName},
		Metrics: []metricdata.Metrics{
			{
				Name:        "slidegate.request.duration",
				Description: "Response times of the requests to a resource that ended since the guard began keeping its statistics.",
				Unit:        "s",
				Data:        metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: points},
			},
			{
				Name:        "slidegate.inbound.request.duration",
				Description: "Response times of the requests entered inbound that ended.",
				Unit:        "s",
				Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality,
					DataPoints: []metricdata.HistogramDataPoint[float64]{inbound}},
			},
		},
	}}, nil
}

// point sets *pt to the histogram of the totals in p.buf, whose response
// times sum to sum seconds.
func (p *Producer) point(pt *metricdata.HistogramDataPoint[float64], sum float64, attrs attribute.Set) {
	*pt = metricdata.HistogramDataPoint[float64]{
		Attributes:   attrs,
		Bounds:       p.bounds,
		BucketCounts: make([]uint64, len(p.bounds)+1),
		Sum:          sum,
	}
	p.add(pt)
}

// add adds the counts of the totals in p.buf to pt's.
func (p *Producer) add(pt *metricdata.HistogramDataPoint[float64]) {
	for i, n := range p.buf.Bins {
		if n > 0 {
			pt.BucketCounts[p.bucketOf[i]] += uint64(n)
			pt.Count += uint64(n)
		}
	}
	if p.buf.Over > 0 {
		pt.BucketCounts[len(p.bounds)] += uint64(p.buf.Over)
		pt.Count += uint64(p.buf.Over)
	}
}

// set returns the attribute set of kv and the WithAttributes ones.
func (p *Producer) set(kv ...attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append(slices.Clip(p.attrs), kv...)...)
}

// restart returns the start time of the series, whose count is count
// now. A series begins when the Producer first reads it, or again when
// its count falls: the guard evicted the resource and began counting it
// afresh (the guard does not keep when a resource began). A resource
// evicted and back with more requests than before between two collections
// is not told apart.
func (s *series) restart(count uint64, now time.Time) time.Time {
	if !s.seen || count < s.count {
		s.start = now
	}
	s.seen, s.count = true, count
	return s.start
}
