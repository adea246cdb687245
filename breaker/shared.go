package breaker

import (
	"fmt"
	"math"

	"github.com/slidegate/slidegate/internal/breakerlimits"
	"github.com/slidegate/slidegate/internal/timegrid"
	"github.com/slidegate/slidegate/internal/windowhook"
	"github.com/slidegate/slidegate/window"
)

// A circuit made with the shared option (through internal/breakerhook, for
// the guard) keeps no window of its own: it reads the counter of the
// resource it protects, which counts every request's outcome in buckets of
// the same shape. What it counts stays what a window of its own would hold
// (closedWindow), though the resource counts more, and elsewhere:
//
//   - It counts from when it last closed. The closing notes the time, from,
//     and the circuit reads the resource's buckets after the one holding
//     from; what it counts in that bucket goes to the cell, its own two
//     words. A closing publishes the new window first, with from unset,
//     then reads the clock for from: a request that the resource counted
//     before the new window could be seen ended no later, in a bucket the
//     new window does not read. Until from is set, the window reads empty.
//   - The resource counts outcomes that the circuit does not: a request
//     that ended with context.Canceled (a failure to the resource, ignored
//     by the circuit), one allowed in an earlier generation (before the
//     circuit opened, say) or as a probe, and one allowed before the
//     circuit was given the counter. The circuit is told of each before the
//     resource counts it, and adds it to x, what to take away (a taken,
//     the default window's Succeeded and Failed in 10 buckets, kept in the
//     window's own bytes): a reader in between counts less, not more. What the circuit adds (the cell, a batch's one at served) it
//     adds after the resource counted, for the same reason.
//   - The resource counts a batch (a request entered as n) n times, at the
//     time the request exited; the circuit counts it once, at the time it
//     was served (exited less the time it paused). x holds the difference.
//
// Two differences remain, each small:
//
//   - A failure is checked against the strategy over the window as of the
//     exit, from the resource's ring, in which a later request (an Enter
//     is enough) reuses the slot of the oldest bucket. An exit timed
//     (ExitAt) before the latest bucket the resource wrote, or two exits
//     racing across a bucket's end, miss the oldest bucket's outcomes: a
//     window of its own, moved by outcomes only, holds them. It reads
//     fewer failures, never more (an error ratio: that of the rest).
//   - A request the circuit allowed but served in a bucket before from's
//     (entered at a time given before the closing, or one that read the
//     clock before the closing did) counts in the cell, from's bucket: it
//     leaves the window as many buckets later as from's bucket is after
//     its own, where a window of its own drops it at once if older than
//     the window.
//
// It reads every bucket at each failure, two words a bucket and x's state
// word (its two words too once written in the window): not through
// the cache of window.CachedSums, so a value added late for an older bucket
// shows at once, not from the next bucket on.
//
// Most requests need none of it: one the circuit counts, alone, that ends
// in a bucket after from and did not pause across a bucket's end is counted
// by the resource as the circuit would, and the circuit writes nothing.
// Only the default window shares (the resource's), and only the strategies
// that read outcomes: a slow-call ratio times requests, which the
// resource's counter does not count apart.

// unset is from before the closing has read the clock.
const unset = math.MinInt64

// sharedGrid numbers the buckets of the window a circuit shares: the
// default one, the resource's.
var sharedGrid = timegrid.New(breakerlimits.DefaultInterval/breakerlimits.DefaultCircuitBuckets, breakerlimits.DefaultCircuitBuckets)

var outcomesAfter = windowhook.OutcomesAfter.(func(*window.Counter, int64, int64) (int64, int64))

// uncached is the option of a circuit whose window of its own reads every
// bucket, without the cache of window.CachedSums, whose reads of a value
// added late for an older bucket lag by a bucket: tests hold a shared
// circuit, which reads its resource's counter so, to one.
func uncached() Option { return func(s *settings) { s.uncached = true } }

// shared is the option of a circuit that shares its resource's counter.
func shared() Option { return func(s *settings) { s.shared = true; s.mark(optShared) } }

// canShare reports why a circuit of strategy s and settings st cannot
// share its resource's counter, or nil if it can.
func canShare(s Strategy, st settings) error {
	switch {
	case s.kind != errorRatio && s.kind != errorCount && s.kind != consecutiveFailures:
		return fmt.Errorf("%w: a shared window reads outcomes only: not a %v strategy", errInvalidConfig, s.kind)
	case st.interval != breakerlimits.DefaultInterval || st.buckets != breakerlimits.DefaultCircuitBuckets:
		return fmt.Errorf("%w: window = %d buckets over %v: only the default window is shared", errInvalidConfig, st.buckets, st.interval)
	case st.outcomeOf != nil:
		return fmt.Errorf("%w: WithOutcomeOf: a shared window takes the resource's outcomes", errInvalidConfig)
	}
	return nil
}

// share gives c, made shared, the counter of its resource, if it has none
// yet (see internal/breakerhook's Share).
func (c *Circuit) share(ctr *window.Counter, publish func()) {
	if !c.shared {
		panic("breaker: Share of a circuit not made Shared")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats.Load() != nil {
		publish()
		return
	}
	w := &closedWindow{t: ctr}
	w.from.Store(unset)
	c.stats.Store(w)
	publish()
	w.from.Store(c.clock.Now())
}

// unshare gives c, made shared and given no counter, a window of its own
// (see internal/breakerhook's Unshare).
func (c *Circuit) unshare() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.shared || c.stats.Load() != nil {
		panic("breaker: Unshare of a circuit not made Shared, or given its counter")
	}
	w, err := newClosedWindow(int(c.buckets), c.interval, c.clock, c.timed, c.uncached)
	if err != nil {
		panic("breaker: a window that NewCircuit made cannot be made again: " + err.Error())
	}
	c.shared = false
	c.stats.Store(w)
}

// shares reports whether c, made shared, was given its counter.
func (c *Circuit) shares() bool { return c.shared && c.stats.Load() != nil }

// restart begins the window of a shared circuit that closes at time now,
// with the mutex held, before the state word says Closed (see the doc
// above for the order).
func (c *Circuit) restart(now int64) {
	w := &closedWindow{t: c.stats.Load().t}
	w.from.Store(unset)
	c.stats.Store(w)
	w.from.Store(max(now, timegrid.Clamp(c.clock.Now())))
}

// sharedSumsAt returns the outcomes a shared circuit counted in the window
// at time now: the resource's after from's bucket, less x, and the cell
// while from's bucket is in the window.
func (w *closedWindow) sharedSumsAt(now int64) window.Sums {
	var out window.Sums
	from := w.from.Load()
	if from == unset {
		return out
	}
	out[window.Succeeded], out[window.Failed] = outcomesAfter(w.t, now, from)
	succ, fail := w.x.sumsAfter(now, from)
	out[window.Succeeded] -= succ
	out[window.Failed] -= fail
	if bf, bn := sharedGrid.Index(from), sharedGrid.Index(now); bf <= bn && bn-bf < breakerlimits.DefaultCircuitBuckets {
		out[window.Succeeded] += w.cell[Success].Load()
		out[window.Failed] += w.cell[Failure].Load()
	}
	// What is taken away before the resource counts it reads short a
	// moment: never below none.
	out[window.Succeeded], out[window.Failed] = max(out[window.Succeeded], 0), max(out[window.Failed], 0)
	return out
}

// after reports whether time t is in a bucket the window reads from its
// resource: after from's, or any while from is unset.
func (w *closedWindow) after(t int64) bool {
	from := w.from.Load()
	return from == unset || sharedGrid.Index(t) > sharedGrid.Index(from)
}

// take adds v of event e at time at to what the window takes away from
// its resource's counts, x.
func (w *closedWindow) take(at int64, e window.Event, v int64) { w.x.addAt(at, e, v) }

// eventOf is the event the resource counted for a request that failed or
// not.
func eventOf(failed bool) window.Event {
	if failed {
		return window.Failed
	}
	return window.Succeeded
}

// uncounted takes away from c's window n requests its resource is about
// to count at time exited that c does not count, and returns the window it
// took from last, for uncountedAfter (see internal/breakerhook's
// Uncounted).
func (c *Circuit) uncounted(exited int64, failed bool, n int64) any {
	return c.takeFrom(c.stats.Load(), timegrid.Clamp(exited), eventOf(failed), n)
}

// uncountedAfter takes the requests of uncounted, now counted by the
// resource, away from each window that replaced w since.
func (c *Circuit) uncountedAfter(w any, exited int64, failed bool, n int64) {
	if next := c.stats.Load(); next != w {
		c.takeFrom(next, timegrid.Clamp(exited), eventOf(failed), n)
	}
}

// takeFrom takes n of event e at time exited away from window w, and from
// each window that replaced it since, and returns the last: a request the
// resource counts before a closing whose clock read it did not precede is
// read by the new window too.
func (c *Circuit) takeFrom(w *closedWindow, exited int64, e window.Event, n int64) *closedWindow {
	for w != nil {
		if w.after(exited) {
			w.take(exited, e, n)
		}
		next := c.stats.Load()
		if next == w {
			return w
		}
		w = next
	}
	return nil
}

// What settleShared has to do of a request takeShared found counted, in
// the bits of its second result: add it to the cell, add it where it was
// served, count a failure.
const (
	addCell = 1 << iota
	addServed
	addFailure
)

// takeShared does, before the resource counts p's request (n at time
// exited, failed unless o is Success), what of settling it with p's shared
// circuit takes away: what the circuit will not count of it, a success's
// end of the run of failures. A reader in between counts less, never
// more. It returns the window it took from last, for settleShared, and
// what settleShared has to add; none if it has only to look for a window
// published since, which reads exited's bucket only if exited is later
// than the clock at the publishing (see internal/breakerhook's
// TakeShared).
func (p Promise) takeShared(served, exited int64, o Outcome, n int64) (any, int) {
	r, ok := p.rec.(*circuitRecorder)
	if !ok || !r.shared || o > Ignored {
		return nil, 0
	}
	c := (*Circuit)(r)
	served, exited = timegrid.Clamp(served), timegrid.Clamp(exited)
	e := eventOf(o != Success)
	if p.token&probeBit != 0 {
		c.settleProbe(p.token&^probeBit, p.start, served, o)
		return c.takeFrom(c.stats.Load(), exited, e, n), 0
	}
	w := c.stats.Load() // before the state word: see Circuit.stats
	if o == Ignored || c.state.Load() != p.token {
		return c.takeFrom(w, exited, e, n), 0
	}
	// Counted: one of o at served, where the resource counts n of e at
	// exited; served's bucket is from's at the earliest.
	from := w.from.Load() // set: the state word is stored after it
	bf, be := sharedGrid.Index(from), sharedGrid.Index(exited)
	bs := be
	if served != exited || be < bf {
		bs = sharedGrid.Index(max(served, from))
	}
	add := 0
	switch {
	case bs == bf:
		add = addCell
		if be > bf {
			w.take(exited, e, n)
		}
	case bs == be:
		if n > 1 {
			w.take(exited, e, n-1)
		}
	default:
		add = addServed
		if be > bf {
			w.take(exited, e, n)
		}
	}
	if o == Success {
		if w.run.Load() != 0 {
			w.run.Store(0)
		}
	} else {
		add |= addFailure
	}
	return w, add
}

// settleShared ends takeShared once the resource has counted p's request:
// t and add are what takeShared returned (see internal/breakerhook's
// SettleShared).
func (p Promise) settleShared(t any, add int, served, exited int64, o Outcome, n int64) {
	r, ok := p.rec.(*circuitRecorder)
	if !ok || !r.shared || o > Ignored {
		return
	}
	c := (*Circuit)(r)
	w, _ := t.(*closedWindow)
	served, exited = timegrid.Clamp(served), timegrid.Clamp(exited)
	if add&addCell != 0 {
		w.cell[o].Add(1)
	}
	if add&addServed != 0 {
		w.take(served, eventOf(o != Success), -1)
	}
	if add&addFailure != 0 {
		w.run.Add(1)
		// Read as of the exit: where the request paused across a
		// bucket's end, the resource, which counted it at its exit, may
		// have reused the slot of the oldest bucket as of served.
		th := c.th.Load()
		if s := w.statsAt(max(served, exited), true); th.strategy.meets(s, th.minRequests) {
			c.transition(p.token, Open, served, tripped, s, th)
		}
	}
	// Closed again since w was loaded: the new window does not count the
	// request, and may read where the resource counted it.
	if next := c.stats.Load(); next != w {
		c.takeFrom(next, exited, eventOf(o != Success), n)
	}
}

// String names a strategy's kind in errors.
func (k strategyKind) String() string {
	switch k {
	case errorRatio:
		return "error ratio"
	case errorCount:
		return "error count"
	case slowRatio:
		return "slow ratio"
	case consecutiveFailures:
		return "consecutive failures"
	case tripWhen:
		return "TripWhen"
	}
	return "zero"
}
