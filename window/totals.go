package window

import (
	"math"
	"runtime"
	"sync/atomic"
)

// Totals. A Counter made WithTotals also answers, for each summed event,
// the total of every value recorded since it was made: what a metrics
// scrape wants (a counter that only grows), at no cost to the writers. A
// total is the values the ring still holds plus those its buckets held
// before their slots were reused (retired) plus those dropped as late. The
// writer that resets a slot for a new bucket swaps each data word for the
// new bucket's empty one and adds the value it took out to the retired
// sums: a write lands either before the swap, and is in the value taken
// out, or after it, when its compare-and-swap fails on the new tag and the
// write finds itself late, and is added to the retired sums as late values
// are. No value is counted twice or lost.
//
// Readers add up the retired sums and every slot of every stripe. A slot
// being reset would be read half moved, so resets announce themselves:
// resetting counts the resets in progress up then down, and the generation
// up once done; a reader that finds a reset in progress (counted, or a slot
// whose state word says so: the writer takes the slot before it counts
// itself), or the generation changed when it is done, reads again. Resets
// happen once per bucket width per slot, so readers rarely read twice.
type totals struct {
	retired []atomic.Int64 // per data word; only summed words are used
	active  atomic.Int64   // resets in progress
	gen     atomic.Uint64  // resets done
}

// WithTotals makes a [Counter] keep the total of each summed event since it
// was made (see [Counter.Totals]). It applies to a Counter only.
func WithTotals() Option {
	return func(o *options) { o.totals = true }
}

// retire resets the slot at s in stripe ws, which held bucket old, for
// bucket b, adding the values it held to the retired sums.
func (t *totals) retire(r *ring, ws []atomic.Uint64, s int, old, b uint64) {
	t.active.Add(1)
	for i, k := range r.kinds {
		w := ws[s+1+i].Swap(pack(b, k.empty()))
		if k == kindSum && old != 0 && belongs(w, old) {
			t.add(i, value(w))
		}
	}
	t.gen.Add(1)
	t.active.Add(-1)
}

// add adds v to the retired sum of data word i, saturating at the bounds of
// an int64.
func (t *totals) add(i int, v int64) {
	if v == 0 {
		return
	}
	n := t.retired[i].Add(v)
	switch {
	case v > 0 && n < n-v: // wrapped upwards
		t.retired[i].Store(math.MaxInt64)
	case v < 0 && n > n-v:
		t.retired[i].Store(math.MinInt64)
	}
}

// Totals returns, for each summed event the Counter records, the sum of
// every value recorded since the Counter was made. Values dropped as late
// are included. Minimums, maximums and events not recorded read 0. A
// Counter not made [WithTotals] returns zeros. A view's totals are those
// of the Counter it views. Totals saturate at the
// bounds of an int64.
//
// Reading costs a load per word of the ring. Unlike other reads, Totals
// yields while a slot is being reset. It reads again if a slot was reset
// meanwhile, which is rare.
func (c *Counter) Totals() Sums {
	var out Sums
	t := c.r.tot
	if t == nil {
		return out
	}
	for {
		g := t.gen.Load()
		if t.active.Load() != 0 {
			runtime.Gosched() // a reset, a few swaps away
			continue
		}
		out, whole := c.readTotals()
		if whole && t.active.Load() == 0 && t.gen.Load() == g {
			return out
		}
		if !whole {
			runtime.Gosched() // a writer between taking a slot and counting itself
		}
	}
}

// readTotals adds up the retired sums and every slot of every stripe. It
// reports false if it found a slot being reset, which it could not read.
func (c *Counter) readTotals() (Sums, bool) {
	r, t, l := c.r, c.r.tot, c.l
	var acc [numEvents]float64 // to detect saturation without overflow
	var out Sums
	for i, e := range l.events {
		if l.kinds[i] == kindSum {
			acc[e] = float64(t.retired[i].Load())
			out[e] = t.retired[i].Load()
		}
	}
	for _, ws := range r.stripes() {
		for s := 0; s < len(ws); s += r.stride {
			st := ws[s].Load()
			switch {
			case st&1 != 0:
				return out, false // being reset
			case st == 0:
				continue // never written
			}
			b := st >> 1
			for i, e := range l.events {
				if l.kinds[i] != kindSum {
					continue
				}
				if w := ws[s+1+i].Load(); belongs(w, b) {
					v := value(w)
					acc[e] += float64(v)
					out[e] += v
				}
			}
		}
	}
	for e, a := range acc {
		switch {
		case a >= math.MaxInt64:
			out[e] = math.MaxInt64
		case a <= math.MinInt64:
			out[e] = math.MinInt64
		}
	}
	return out, true
}
