package window

import "time"

// A RollingWindow is go-zero's RollingWindow on slidegate's ring. Its
// interval is divided into buckets of one width. Each bucket holds the sum
// and the count of the values added while it was current. Add and Reduce
// work as go-zero's, with three differences:
//
//   - [NewRollingWindow] takes the whole interval, as [NewCounter] does.
//     go-zero's takes one bucket's width.
//   - Buckets are aligned to multiples of the width on the clock. go-zero's
//     are aligned to the time the window was made.
//   - [RollingWindow.Reduce] passes every bucket of the interval, a bucket
//     nothing was added to as a zero [Bucket]. After whole widths with
//     nothing added, go-zero's passes only the buckets up to the last one
//     written, and none once that one has left the window. So a reducer
//     here always sees the same number of buckets, each a slot of time
//     ending now, and a rate per bucket stays right after idle time. Sums
//     are the same.
//
// Values are int64, as in go-zero's breaker: integer sums are exact, where a
// float64 sum drifts. Record durations in a fixed unit (microseconds, say).
// One bucket's sum saturates at ±2^39, about ±5.5 × 10^11.
//
// A RollingWindow is safe for concurrent use, and it takes no lock. Add and
// Reduce allocate nothing. Each of a bucket's two fields is exact, but a
// Reduce concurrent with an Add may see the Add's count before its sum.
//
// The zero RollingWindow is not usable; make one with [NewRollingWindow].
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
// bucket's width. buckets must be in [1, 65536] and interval divide
// into them in whole nanoseconds of at least 1 µs each; a bad argument
// or Option is a *configError.
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

// ReduceAt calls fn for each bucket of the window at time now, oldest
// first: the buckets of the interval, the last of them the one holding now.
// With [IgnoreCurrentBucket], that last one is left out. A bucket nothing
// was added to is passed as a zero [Bucket], so fn is always called as many
// times (see [RollingWindow] for go-zero's difference).
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
