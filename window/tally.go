package window

import (
	"sync/atomic"
	"time"
)

// A Tally is a [Counter] whose sums over the whole interval cost O(1) to
// read, not one load per bucket. It suits a reader that wants the whole
// interval on every request, as a breaker does. It records exactly as a
// Counter does, into a ring of its own.
//
// The sums at time now are a base plus the bucket holding now. The base
// holds the buckets before the one holding now. It is computed once per
// bucket width, by the first reader to see the new bucket. A reader that
// finds the base being written reads the whole interval from the ring, as
// a Counter does. Readers never wait.
//
// The base is what the ring held when it was computed. A value added after
// that for a time before the current bucket is in the ring at once. It
// shows in the Tally's sums only from the next bucket on. Such a value
// comes from a writer that read the clock just before the bucket changed,
// or from an AddAt with an older time. A value added for a time in the
// current bucket shows at once.
//
// A Tally is safe for concurrent use. Adding and reading allocate nothing.
// The zero Tally is not usable. Make one with [NewTally].
type Tally struct {
	c    Counter
	seq  atomic.Uint64
	base [numEvents]atomic.Int64 // each event combined over the base's buckets, empty values unmapped (see finish)
}

// NewTally returns a Tally over interval divided into buckets buckets. It
// takes the arguments and options of [NewCounter].
func NewTally(buckets int, interval time.Duration, opts ...Option) (*Tally, error) {
	c, err := NewCounter(buckets, interval, opts...)
	if err != nil {
		return nil, err
	}
	return &Tally{c: *c}, nil
}

// Add records v for event e at the current time, as [Counter.Add] does.
func (t *Tally) Add(e Event, v int64) { t.c.Add(e, v) }

// AddAt records v for event e at time now, as [Counter.AddAt] does. It
// reports false if the value was not recorded.
func (t *Tally) AddAt(now int64, e Event, v int64) bool { return t.c.AddAt(now, e, v) }

// Sum returns event e over the whole interval at the current time.
func (t *Tally) Sum(e Event) int64 { return t.SumAt(t.c.r.clock.Now(), e) }

// SumAt returns event e over the whole interval at time now, in constant
// time. An e that is not an [Event] reads 0.
func (t *Tally) SumAt(now int64, e Event) int64 {
	if e >= numEvents {
		return 0
	}
	return t.SumsAt(now)[e]
}

// Sums returns every event over the whole interval at the current time.
func (t *Tally) Sums() Sums { return t.SumsAt(t.c.r.clock.Now()) }

// SumsAt returns every event over the whole interval at time now, in
// constant time. It answers as [Counter.SumsAt] does, with one difference:
// a late value shows from the next bucket on (see [Tally]).
func (t *Tally) SumsAt(now int64) Sums {
	r := t.c.r
	b := r.bucketOf(now)
	want := b << 1
	var out Sums
	switch q := t.seq.Load(); {
	case q == want:
		for e := range out {
			out[e] = t.base[e].Load()
		}
		if t.seq.Load() != want {
			return t.c.SumsAt(now)
		}
	case q>>1 < b && q&1 == 0 && t.seq.CompareAndSwap(q, want|1):
		out = t.before(b)
		for e := range out {
			t.base[e].Store(out[e])
		}
		t.seq.Store(want)
	default:
		return t.c.SumsAt(now)
	}
	r.mergeInto(t.c.l, &out, b)
	for e := range out {
		out[e] = finish(Event(e).kind(), out[e])
	}
	return out
}

// before combines every event over the buckets of the interval before bucket
// b, leaving empty minimums and maximums unmapped so that the current bucket
// can still be merged in. It computes a Tally's base.
//
// The totals at time now are a base, the buckets before the one holding now
// combined, plus the bucket holding now read from the ring. The base changes
// only when the current bucket does, so it is computed once per bucket width,
// by the first reader to see the new bucket, and kept.
//
// The base is published under a sequence word, seq, and follows this
// protocol:
//
//   - seq holds b<<1 once the base of bucket b (the buckets before b within
//     the interval) is written, and b<<1|1 while a reader is writing it.
//   - A reader moves seq only from a written base of an older bucket to
//     b<<1|1, by compare-and-swap, so the bucket in seq only grows, a value
//     of seq never repeats, and exactly one reader writes the base of b: the
//     one whose swap succeeded. It stores seq = b<<1 when done.
//   - A reader at a time in bucket b takes the base if seq reads b<<1 both
//     before and after it loads the base's words; the second read proves no
//     writer started on a later base meanwhile. A reader that finds the base
//     being written, or written for a later bucket than its own (its now is
//     older than another reader's), reads the whole interval from the ring
//     instead, as a Counter does. Readers never wait.
func (t *Tally) before(b uint64) Sums {
	r := t.c.r
	var out Sums
	for e := range out {
		out[e] = Event(e).kind().empty()
	}
	for x := b - uint64(r.n) + 1; x != b; x++ {
		r.mergeInto(t.c.l, &out, x)
	}
	return out
}

// Counter returns the Counter the Tally records into. It serves views of
// part of the interval, the bucket width and the count of late values.
// Reading the whole interval through it costs one load per bucket.
func (t *Tally) Counter() *Counter { return &t.c }
