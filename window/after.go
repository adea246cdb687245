package window

import "github.com/slidegate/slidegate/internal/windowhook"

func init() { windowhook.OutcomesAfter = (*Counter).outcomesAfter }

// outcomesAfter returns [Succeeded] and [Failed] summed over the buckets of
// the interval at time now that come after the bucket holding time t, read
// from the ring as SumsAt reads them without the cache. An event the
// Counter does not record reads 0. A circuit breaker that shares its
// resource's counter reads it so, at each failure (see
// internal/windowhook): two words a bucket, not every event's.
func (c *Counter) outcomesAfter(now, t int64) (succeeded, failed int64) {
	r := c.r
	is, ifl := int(c.word[Succeeded]), int(c.word[Failed])
	first, last := r.first(now, c.k), r.bucketOf(now)
	if after := r.bucketOf(t) + 1; after > first {
		first = after
	}
	for b := first; b <= last; b++ {
		s := r.slotOf(b)
		for _, ws := range r.stripes() {
			if ws[s].Load() != b<<1 {
				continue
			}
			if is >= 0 {
				if w := ws[s+1+is].Load(); belongs(w, b) {
					succeeded += value(w)
				}
			}
			if ifl >= 0 {
				if w := ws[s+1+ifl].Load(); belongs(w, b) {
					failed += value(w)
				}
			}
		}
	}
	return succeeded, failed
}
