package breaker

import (
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/timegrid"
	"github.com/slidegate/slidegate/window"
)

// counts are a breaker's window totals.
type counts struct {
	successes, failures, rejected, slow int64
}

// A tally is a window.Counter of a breaker's outcomes whose whole-window
// totals cost O(1) to read, since the adaptive breaker reads them on every
// request it may drop. The totals are a base, the sums of the buckets before
// the current one, computed once per bucket by the first reader to see the
// bucket, plus the current bucket read from the ring.
//
// The base is published under a sequence word: base bucket b reads b<<1, and
// b<<1|1 while a reader is writing the base for b. Readers that find the base
// for their bucket take it if the word is unchanged after reading it; readers
// that find it being written, or written for a later bucket than theirs,
// read the whole window from the ring instead.
//
// An outcome recorded at a time before the current bucket (by a goroutine
// that read the clock just before the boundary, or through RecordAt with an
// old time) is in the ring at once but in the totals only from the next
// bucket on, when the base is computed again.
type tally struct {
	c      *window.Counter
	grid   timegrid.Grid // the Counter's bucket boundaries: multiples of the width
	before window.View   // the buckets before the current one (zero View when there are none)
	cur    window.View   // the current bucket
	seq    atomic.Uint64
	base   [4]atomic.Int64 // successes, failures, rejected, slow over before
}

func newTally(interval time.Duration, buckets int, c clock.Clock) *tally {
	ctr, err := window.NewCounter(buckets, interval, window.WithClock(c))
	if err != nil {
		panic("breaker: window settings passed validation but not window: " + err.Error())
	}
	width := interval / time.Duration(buckets)
	t := &tally{c: ctr, grid: timegrid.New(width, int64(buckets))}
	t.cur, _ = ctr.View(width)
	if buckets > 1 {
		t.before, _ = ctr.View(interval - width)
	}
	return t
}

func (t *tally) add(now int64, e window.Event) { t.c.AddAt(now, e, 1) }

// at returns the window's totals at time now.
func (t *tally) at(now int64) counts {
	b := t.grid.Index(now)
	want := b << 1
	var base counts
	switch q := t.seq.Load(); {
	case q == want:
		base = counts{t.base[0].Load(), t.base[1].Load(), t.base[2].Load(), t.base[3].Load()}
		if t.seq.Load() != want {
			return t.full(now)
		}
	case q>>1 < b && q&1 == 0 && t.seq.CompareAndSwap(q, want|1):
		base = sumsOf(t.before.SumsAt(t.grid.Start(b) - 1))
		t.base[0].Store(base.successes)
		t.base[1].Store(base.failures)
		t.base[2].Store(base.rejected)
		t.base[3].Store(base.slow)
		t.seq.Store(want)
	default:
		return t.full(now)
	}
	c := sumsOf(t.cur.SumsAt(now))
	return counts{base.successes + c.successes, base.failures + c.failures, base.rejected + c.rejected, base.slow + c.slow}
}

// full reads the totals from the ring: the slow path.
func (t *tally) full(now int64) counts { return sumsOf(t.c.SumsAt(now)) }

func sumsOf(s window.Sums) counts {
	return counts{s[window.Succeeded], s[window.Failed], s[window.Blocked], s[window.Slow]}
}
