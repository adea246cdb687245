package metrics

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/window"

	"github.com/slidegate/slidegate/internal/exported"
)

// defaultBuckets returns the upper bounds of the classic buckets of the
// request-duration histograms unless WithBuckets says otherwise, as its doc
// states them. Each call returns a fresh slice.
func defaultBuckets() []time.Duration {
	return []time.Duration{
		time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
		10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
	}
}

// maxBuckets is the most classic buckets WithBuckets takes. Each is a
// series per resource in every scrape in the text format.
const maxBuckets = 64

// WithBuckets sets the upper bounds of the classic buckets of the
// request-duration histograms. By default they are 1 ms to 10 s in steps
// of 1, 2.5 and 5, thirteen of them. They suit a service's routes and the
// calls it makes. Each bound must be:
//   - above zero.
//   - below 2^38 ns (about 4 min 35 s).
//   - above the one before.
//
// There may be at most 64 of them. Bounds out of order, or out of
// range, make registering the Collector fail with the first wrong one.
//
// No bound leaves only the +Inf bucket, with _sum and _count. The scrape
// then costs three series per resource in the text format. The native
// buckets are all there in the protobuf format. The slice is copied.
func WithBuckets(bounds ...time.Duration) Option {
	return func(o *options) { o.buckets = slices.Clone(bounds); o.bucketsSet = true }
}

// checkBuckets returns an error naming the first bound of bounds that
// WithBuckets does not take, and nil if they are sound.
func checkBuckets(bounds []time.Duration) error {
	if err := exported.CheckBounds(bounds, maxBuckets); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// nativeSchema is the schema of the native buckets: 8 to a power of two of
// seconds, as the guard's bins are 8 to a power of two of nanoseconds.
const nativeSchema = 3

// nativeZeroThreshold is the native zero bucket's bound, in seconds: the
// guard's first bin, response times below 256 ns.
var nativeZeroThreshold = exported.BinLow(1).Seconds()

// nativeIndex returns the native bucket of schema 3 that holds v seconds,
// v > 0: the i with 2^((i-1)/8) < v ≤ 2^(i/8).
func nativeIndex(v float64) int {
	i := int(math.Ceil(8 * math.Log2(v)))
	// Log2 may round across an edge by an ulp: settle it on the edges.
	for v > math.Exp2(float64(i)/8) {
		i++
	}
	for v <= math.Exp2(float64(i-1)/8) {
		i--
	}
	return i
}

// nativeOf is the native bucket of each of the guard's bins (see
// binning); bin 0 goes to the zero bucket and has none. nativeOver is the
// bucket of the response times of 2^38 ns (exported.BinRange) and more.
var (
	nativeOf = func() (t [exported.Bins]int) {
		for i := 1; i < exported.Bins; i++ {
			t[i] = nativeIndex(exported.BinValue(i).Seconds())
		}
		return t
	}()
	nativeOver = nativeIndex(exported.BinRange.Seconds())
)

// A binning maps the guard's response-time bins to the classic buckets of a
// Collector's bounds: bin i is counted in the bucket of the lowest bound
// at or above the latency the guard reports for it (exported.BinValue),
// classicOf[i], or in +Inf only (len(bounds)).
type binning struct {
	bounds    []float64 // seconds
	classicOf [exported.Bins]int
}

func newBinning(bounds []time.Duration) *binning {
	b := &binning{bounds: make([]float64, len(bounds))}
	for i, d := range bounds {
		b.bounds[i] = d.Seconds()
	}
	for i := range b.classicOf {
		v := exported.BinValue(i)
		b.classicOf[i] = len(bounds)
		for k, d := range bounds {
			if v <= d {
				b.classicOf[i] = k
				break
			}
		}
	}
	return b
}

// durations are a resource's response times since its statistics began,
// as a histogram exports them: per classic bucket, not cumulative, the last
// +Inf; per native bucket; in the zero bucket; their number and sum.
type durations struct {
	ok      bool // the guard had them: the resource was not evicted meanwhile
	classic []uint64
	native  map[int]int64
	zero    uint64
	count   uint64
	sum     float64 // seconds
}

// read returns the durations in t, whose sum is sum.
func (b *binning) read(t *window.SketchTotals, sum time.Duration) durations {
	d := durations{ok: true, classic: make([]uint64, len(b.bounds)+1), native: map[int]int64{}, sum: sum.Seconds()}
	for i, n := range t.Bins {
		if n == 0 {
			continue
		}
		d.classic[b.classicOf[i]] += uint64(n)
		if i == 0 {
			d.zero += uint64(n)
		} else {
			d.native[nativeOf[i]] += n
		}
		d.count += uint64(n)
	}
	if t.Over > 0 {
		d.classic[len(b.bounds)] += uint64(t.Over)
		d.native[nativeOver] += t.Over
		d.count += uint64(t.Over)
	}
	return d
}

// add adds o, durations of a resource whose name reads the same as a label
// value, to d.
func (d *durations) add(o durations) {
	if !o.ok {
		return
	}
	if !d.ok {
		*d = durations{ok: true, classic: make([]uint64, len(o.classic)), native: map[int]int64{}}
	}
	for k, n := range o.classic {
		d.classic[k] += n
	}
	for k, n := range o.native {
		d.native[k] += n
	}
	d.zero += o.zero
	d.count += o.count
	d.sum += o.sum
}

// resourceDurations returns the durations of the resource called name,
// whose summed response time is rt, reading the guard into buf; none (not
// ok) if the guard no longer keeps the resource.
func (b *binning) resourceDurations(g *slidegate.Guard, buf *window.SketchTotals, name string, rt time.Duration) durations {
	if !g.ResponseTimeTotals(name, buf) {
		return durations{}
	}
	return b.read(buf, rt)
}

// histogram sends d as a histogram of desc with labelValues: classic
// buckets of b's bounds, which the text format shows, and native buckets of
// schema 3, which a scrape in the protobuf format carries as well.
func (b *binning) histogram(ch chan<- prometheus.Metric, desc *prometheus.Desc, d durations, labelValues ...string) {
	native, err := prometheus.NewConstNativeHistogram(desc, d.count, d.sum, d.native, nil, d.zero,
		nativeSchema, nativeZeroThreshold, time.Time{}, labelValues...)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(desc, err)
		return
	}
	// Four allocations, not three per bucket; the bounds are the
	// binning's, which no one writes.
	buckets := make([]*dto.Bucket, len(b.bounds))
	cells := make([]dto.Bucket, len(b.bounds))
	cums := make([]uint64, len(b.bounds))
	var cum uint64
	for k := range b.bounds {
		cum += d.classic[k]
		cums[k] = cum
		cells[k].CumulativeCount, cells[k].UpperBound = &cums[k], &b.bounds[k]
		buckets[k] = &cells[k]
	}
	ch <- &bothHistogram{Metric: native, buckets: buckets}
}

// A bothHistogram is a native histogram with classic buckets too: the
// client library makes one or the other from constant values, and a
// histogram may carry both, for the scrapers that read either.
type bothHistogram struct {
	prometheus.Metric
	buckets []*dto.Bucket
}

// Write writes the native histogram with the classic buckets, and without
// a created timestamp: the guard does not keep when a resource's
// statistics began, and the zero time the library writes would read as a
// counter started in year 1.
func (h *bothHistogram) Write(out *dto.Metric) error {
	if err := h.Metric.Write(out); err != nil {
		return err
	}
	out.Histogram.Bucket = h.buckets
	out.Histogram.CreatedTimestamp = nil
	return nil
}
