package window

import "time"

// A RollingWindow is go-zero's RollingWindow on slidegate's ring: an interval
// divided into buckets of a fixed width, each holding the sum and the count
// of the values added while it was current. It is what go-zero's adaptive
// breaker and load shedder are built on, with the same Add / Reduce API and
// semantics, but without a lock and with buckets aligned to multiples of the
// width on the clock. Unlike go-zero's constructor, which takes one bucket's
// width, NewRollingWindow takes the whole interval, as NewCounter does.
//
// Values are int64, as in go-zero's breaker: integer sums are exact, where a
// float64 sum drifts. Record durations in a fixed unit (microseconds, say).
// One bucket's sum saturates at MaxValue and MinValue.
//
// A RollingWindow is safe for concurrent use; Add and Reduce allocate nothing.
// Each of a bucket's two fields is exact, but a Reduce concurrent with an Add
// may see the Add's count before its sum.
//
// The zero RollingWindow is not usable; make one with NewRollingWindow.
type RollingWindow struct {
	r             *ring
	ignoreCurrent bool
}

// A Bucket is what a RollingWindow holds for one bucket: the sum of the values
// added and how many were added.
type Bucket struct {
	Sum   int64
	Count int64
}

const (
	rollingSum = iota
	rollingCount
)

var rollingKinds = []kind{rollingSum: kindSum, rollingCount: kindSum}

// IgnoreCurrentBucket makes a RollingWindow's Reduce leave out the current
// bucket, which has not yet lasted its full width, as go-zero's option of the
// same name does. It applies to a RollingWindow only.
func IgnoreCurrentBucket() Option {
	return func(o *options) { o.ignoreCurrent = true }
}

// NewRollingWindow returns a RollingWindow over interval divided into buckets
// buckets, each interval/buckets wide. As with NewCounter, and unlike
// go-zero's NewRollingWindow, the duration is the whole interval, not one
// bucket's width. buckets must be in [1, MaxBuckets] and interval divide
// into them in whole nanoseconds of at least MinWidth each; a bad argument
// or Option is a *ConfigError.
func NewRollingWindow(buckets int, interval time.Duration, opts ...Option) (*RollingWindow, error) {
	width, err := splitInterval(buckets, interval)
	if err != nil {
		return nil, err
	}
	o, err := buildOptions(opts, forRollingWindow)
	if err != nil {
		return nil, err
	}
	return &RollingWindow{
		r:             newRing(buckets, width, rollingKinds, o.clock),
		ignoreCurrent: o.ignoreCurrent,
	}, nil
}

// Add adds v to the current bucket: its sum grows by v and its count by one.
func (rw *RollingWindow) Add(v int64) { rw.AddAt(rw.r.clock.Now(), v) }

// AddAt adds v to the bucket holding time now. It reports false if that
// bucket has already been replaced by a later one; see Counter for how times
// that go backwards are handled.
func (rw *RollingWindow) AddAt(now int64, v int64) bool {
	r := rw.r
	ws := r.pick()
	b := r.bucketOf(now)
	s := r.slotOf(b)
	if !r.addIn(ws, b, s, rollingCount, 1) {
		return false
	}
	return r.addIn(ws, b, s, rollingSum, v)
}

// Reduce calls fn for each bucket of the window at the current time, oldest
// first. See ReduceAt.
func (rw *RollingWindow) Reduce(fn func(Bucket)) { rw.ReduceAt(rw.r.clock.Now(), fn) }

// ReduceAt calls fn for each bucket of the window at time now, oldest first:
// the buckets of the interval, the last of them the one holding now, or,
// with IgnoreCurrentBucket, all but that last one. A bucket nothing was
// added to is passed as a zero Bucket.
func (rw *RollingWindow) ReduceAt(now int64, fn func(Bucket)) {
	r := rw.r
	last := r.bucketOf(now)
	k := uint64(r.n)
	if rw.ignoreCurrent {
		last--
		k--
	}
	first := last - k + 1
	for b := first; b-first < k; b++ {
		s := r.slotOf(b)
		var bk Bucket
		bk.Sum, _ = r.read(b, s, rollingSum)
		bk.Count, _ = r.read(b, s, rollingCount)
		fn(bk)
	}
}

// Width returns the width of one bucket.
func (rw *RollingWindow) Width() time.Duration { return time.Duration(rw.r.width) }

// Interval returns the length of time the RollingWindow covers: its number of
// buckets times their width.
func (rw *RollingWindow) Interval() time.Duration { return time.Duration(rw.r.width * rw.r.n) }
