package slidegate

import (
	"iter"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/stripe"
	"github.com/slidegate/slidegate/internal/windowhook"
	"github.com/slidegate/slidegate/window"
)

// Every resource's statistics cover the last statsInterval in statsBuckets
// buckets.
const (
	statsInterval = 10 * time.Second
	statsBuckets  = 10
	statsWidth    = statsInterval / statsBuckets
)

// The events a resource counts in each bucket.
var resourceEvents = window.WithEvents(window.Allowed, window.Blocked, window.Succeeded, window.Failed, window.RT)

// ResourceBytes bounds the memory a resource takes, rules aside, while one core
// at a time uses it and its response times fall within one power of two of
// nanoseconds (such as 2.1 to 4.1 ms), measured by
// TestResourceBytesIsWhatAResourceTakes with a name of 17 bytes: its name
// and its place in the guard's table; the counts of its 10 buckets; the
// summary of its response times, over the last 10 seconds and by bin since
// it began (ResponseTimeTotals, 64 of the bytes), which takes 192 bytes
// more for each further power of two they reach (times from 1 to 16 ms,
// five of them, take 768 more; at most 5.1 KiB more, for times from 2 µs
// to 4 minutes); and its totals. The bytes for a new power of two are allocated by the
// Exit that first reaches it, and a resource's stripes by the request that
// first finds contention: once each.
//
// A resource that several cores use at once adds a stripe of its counts,
// response times and totals for each core (GOMAXPROCS rounded up to a
// power of two, at most 64), each a little smaller than the resource: a hot
// resource on 8 cores takes up to about 8 × ResourceBytes. Rules add their
// own state: a QPS rule and an error-ratio breaker, with their defaults,
// about 1.3 KB more (at most 1,350 bytes): the breaker reads the resource's
// counts, and keeps beside them, in the same bytes, what it sets apart
// from them (a request canceled, batched or paused across a bucket's end).
const ResourceBytes = 1800

// OtherResource is the name under which a guard counts the traffic of
// resources it has no room for (see WithMaxResources), and of names longer
// than 256.
const OtherResource = "(other)"

// A resource is a name and its statistics.
type resource struct {
	name    string
	stats   *window.Counter
	lat     *window.Sketch // response times over the last 5 to 10 s
	blocked *blockedTotals // the first stripe: written on every block, so apart
	more    stripe.Set[blockedTotals]
	lastUse atomic.Int64 // roughly: updated at most once a second
	pinned  atomic.Bool  // a rule names it: never evicted
	inbound atomic.Bool  // a request entered it with Inbound: sticky
	evicted atomic.Bool  // taken out of the table: a Resource handle holding it looks the name up again
	// shared is the breaker rule whose circuit reads the resource's
	// counter, if one does: Exit tells it of every request (see
	// breakerRule.exited).
	shared atomic.Pointer[breakerRule]
}

func newResource(name string, c clock.Clock) *resource {
	ctr, err := window.NewCounter(statsBuckets, statsInterval, window.WithClock(c), resourceEvents, window.WithTotals())
	if err != nil {
		panic("slidegate: resource statistics: " + err.Error())
	}
	lat, err := window.NewSketch(statsInterval, window.WithClock(c))
	if err != nil {
		panic("slidegate: resource latencies: " + err.Error())
	}
	r := &resource{name: name, stats: ctr, lat: lat, blocked: new(blockedTotals)}
	r.lastUse.Store(c.Now())
	return r
}

// markInbound notes that a request entered the resource with Inbound. It
// loads before it stores, so that the requests after the first pay one load
// of a word no one writes, not a store that would take the cache line from
// the other cores reading it.
func (r *resource) markInbound() {
	if !r.inbound.Load() {
		r.inbound.Store(true)
	}
}

// allow counts n requests allowed at time now. It returns the mark of the
// bucket it counted in, for exit (see internal/windowhook).
func (r *resource) allow(now, n int64) mark {
	b, s := enterAt(r.stats, now, window.Allowed, n)
	return mark{b: b, s: int32(s)}
}

// A mark is the bucket of a resource's counter that a request was counted
// in as it entered, and that bucket's slot: exit counts the request's
// outcome there without looking the bucket up while the bucket still holds
// the time. The zero mark holds no time.
type mark struct {
	b uint64
	s int32
}

// The resource's counter's two counts of a request, the second reusing the
// bucket the first found (internal/windowhook).
var (
	enterAt = windowhook.EnterAt.(func(*window.Counter, int64, window.Event, int64) (uint64, int))
	exitAt  = windowhook.ExitAt.(func(*window.Counter, uint64, int, int64, window.Event, int64, window.Event, int64) bool)
)

// block counts n requests blocked at time now for reason.
func (r *resource) block(now int64, reason flow.Reason, n int64) {
	r.stats.AddAt(now, window.Blocked, n)
	if !casTotal(&r.blockedHere().by[reason%numReasons], n) {
		r.contended()
	}
}

// wouldBlock counts n requests that a shadow rule would have blocked for
// reason, and let through.
func (r *resource) wouldBlock(reason flow.Reason, n int64) {
	if !casTotal(&r.blockedHere().wouldBy[reason%numReasons], n) {
		r.contended()
	}
}

// exit counts n requests that ended at time now after d nanoseconds, with an
// error or not; m is what allow returned for them, or the zero mark.
func (r *resource) exit(m mark, now, d, n int64, failed bool) {
	ev := window.Succeeded
	if failed {
		ev = window.Failed
	}
	rt := d // the batch's summed response time, at most math.MaxInt64
	if n > 1 {
		rt = math.MaxInt64
		if d <= math.MaxInt64/n {
			rt = d * n
		}
	}
	// Rounded to the nearest microsecond, so that the total (Totals.RT)
	// is off by at most half a microsecond per request either way, not
	// short by up to one.
	exitAt(r.stats, m.b, int(m.s), now, ev, n, window.RT, rt/int64(time.Microsecond)+min(rt%int64(time.Microsecond)/500, 1))
	r.lat.RecordBatchAt(now, time.Duration(d), n)
}

// addTotal adds v ≥ 0 to a total that saturates at math.MaxInt64: a total
// that would wrap is put back at the maximum, so that it never goes
// backwards (a Prometheus counter that went down would read as a restart).
// Readers clamp the moment between the wrap and the repair (readTotal).
func addTotal(t *atomic.Int64, v int64) {
	if t.Add(v) < 0 {
		t.Store(math.MaxInt64)
	}
}

// casTotal is addTotal with one compare-and-swap first: it reports false if
// the swap failed, another core having changed the total, and adds v anyway.
func casTotal(t *atomic.Int64, v int64) bool {
	old := t.Load()
	if nv := old + v; nv >= 0 && t.CompareAndSwap(old, nv) {
		return true
	}
	addTotal(t, v)
	return false
}

// blockedHere returns the stripe of the blocked totals the caller writes
// to: the only one until the resource has found contention.
func (r *resource) blockedHere() *blockedTotals { return r.more.Pick(r.blocked, stripe.Hint) }

// contended adds the blocked totals' stripes, once, as a window.Counter
// adds its own: a compare-and-swap on one has failed, another core having
// written it. Counts written meanwhile to the first stripe stay there.
func (r *resource) contended() {
	r.more.Grow(r.blocked, stripe.Count(), func() *blockedTotals { return &new(paddedBlockedTotals).blockedTotals })
}

// readTotal reads a total that addTotal writes.
func readTotal(t *atomic.Int64) int64 {
	if v := t.Load(); v >= 0 {
		return v
	}
	return math.MaxInt64
}

// blockedBy returns the requests blocked for each reason since the
// resource was made, every stripe added up, saturating at math.MaxInt64.
func (r *resource) blockedBy() [numReasons]int64 {
	return r.sumBy(func(t *blockedTotals) *[numReasons]atomic.Int64 { return &t.by })
}

// wouldBlockBy returns the requests shadow rules would have blocked, as
// blockedBy does.
func (r *resource) wouldBlockBy() [numReasons]int64 {
	return r.sumBy(func(t *blockedTotals) *[numReasons]atomic.Int64 { return &t.wouldBy })
}

// sumBy adds up, over every stripe, the totals by reason that field picks.
func (r *resource) sumBy(field func(*blockedTotals) *[numReasons]atomic.Int64) [numReasons]int64 {
	var out [numReasons]int64
	stripes := r.more.Stripes()
	if stripes == nil {
		stripes = []*blockedTotals{r.blocked}
	}
	for _, t := range stripes {
		by := field(t)
		for i := range out {
			if out[i] += readTotal(&by[i]); out[i] < 0 {
				out[i] = math.MaxInt64
			}
		}
	}
	return out
}

// inFlight returns how many requests have entered and not exited, from
// totals t: those allowed less those ended.
func inFlight(t window.Sums) int64 {
	return max(t[window.Allowed]-t[window.Succeeded]-t[window.Failed], 0)
}

// touch notes that the resource was used at time now.
func (r *resource) touch(now int64) {
	if now-r.lastUse.Load() > int64(time.Second) {
		r.lastUse.Store(now)
	}
}

// A resourceTable holds a guard's resources, at most max of them besides
// those its rules name. When it is full, a new name evicts resources idle for
// a whole statistics window (whose statistics are all zero by then); if none
// is idle, the new name's traffic is counted under OtherResource, and the
// table looks for idle resources again only a bucket width later, so that a
// flood of new names costs one scan per bucket width, not one per request.
//
// n counts the resources in m, and bounds them exactly: a new name takes its
// place in n (a compare-and-swap below max) before it is stored, and gives
// it back if another caller stored the same name first. Eviction and pinning
// both hold mu, so a resource that a rule pins is never evicted between the
// eviction's check and its delete.
type resourceTable struct {
	clock     clock.Clock
	max       int64
	m         sync.Map // string → *resource
	n         atomic.Int64
	mu        sync.Mutex // held to evict and to pin
	nextScan  atomic.Int64
	other     *resource
	evictions atomic.Int64
	// full, if set, is told when the table has no room for a new name:
	// how many resources it evicted, and whether it counted the name as
	// OtherResource.
	full func(now, evicted int64, overflowed bool)
}

// evictHook, when set by a test, runs during an eviction, between deciding
// what to evict and evicting it.
var evictHook func()

func newResourceTable(max int, c clock.Clock) *resourceTable {
	return &resourceTable{clock: c, max: int64(max), other: newResource(OtherResource, c)}
}

// get returns the resource called name, making it if there is room.
func (t *resourceTable) get(name string, now int64) *resource {
	if name == OtherResource { // Enter maps names over 256 here too
		t.other.touch(now)
		return t.other
	}
	if v, ok := t.m.Load(name); ok {
		r := v.(*resource)
		r.touch(now)
		return r
	}
	if r := t.store(name); r != nil {
		return r
	}
	return t.insertFull(name, now)
}

// store makes the resource called name if the table has room for it, and
// returns nil if it has none: it takes its place in n with a
// compare-and-swap below max before storing, and gives it back if another
// caller stored the name first.
func (t *resourceTable) store(name string) *resource {
	for {
		n := t.n.Load()
		if n >= t.max {
			return nil
		}
		if t.n.CompareAndSwap(n, n+1) {
			break
		}
	}
	v, loaded := t.m.LoadOrStore(name, newResource(name, t.clock))
	if loaded {
		t.n.Add(-1)
	}
	return v.(*resource)
}

// insertFull makes the resource called name in a full table if evicting
// idle resources makes room, and returns OtherResource otherwise.
func (t *resourceTable) insertFull(name string, now int64) *resource {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m.Load(name); ok {
		return v.(*resource)
	}
	// Room made by evicting may be taken first by concurrent inserts (which
	// do not take mu): they, too, only store within the bound.
	before := t.evictions.Load()
	if t.evict(now) {
		if r := t.store(name); r != nil {
			if t.full != nil && t.evictions.Load() > before {
				t.full(now, t.evictions.Load()-before, false)
			}
			return r
		}
	}
	if t.full != nil {
		t.full(now, t.evictions.Load()-before, true)
	}
	t.other.touch(now)
	return t.other
}

// evict removes the resources idle for a whole window that no rule names,
// and reports whether there is room now. The table's mutex is held.
func (t *resourceTable) evict(now int64) bool {
	if t.n.Load() < t.max {
		return true
	}
	if now < t.nextScan.Load() {
		return false
	}
	// In flight is read from totals loaded one after another, so a request
	// entering and exiting meanwhile can make it read low; but such a
	// request marked the resource used first (touch comes before allow),
	// which the check of lastUse, after it, sees.
	idle := func(r *resource) bool {
		return !r.pinned.Load() && inFlight(r.stats.Totals()) == 0 && now-r.lastUse.Load() >= int64(statsInterval+time.Second)
	}
	var evict []*resource
	t.m.Range(func(_, v any) bool {
		if r := v.(*resource); idle(r) {
			evict = append(evict, r)
		}
		return true
	})
	if evictHook != nil {
		evictHook()
	}
	for _, r := range evict {
		// Pinning holds mu too, so a resource unpinned above still is; a
		// request that came meanwhile has made it busy again, unless it
		// looked the resource up but has not counted yet: its counts then go
		// to the evicted copy, lost with it (a resource idle for a whole
		// window, so a request or two).
		if idle(r) && t.m.CompareAndDelete(r.name, r) {
			r.evicted.Store(true)
			t.n.Add(-1)
			t.evictions.Add(1)
		}
	}
	if t.n.Load() < t.max {
		return true
	}
	t.nextScan.Store(now + int64(statsWidth))
	return false
}

// pin returns the resource called name, making it whatever the table holds:
// rules name it. Pinned resources are never evicted.
func (t *resourceTable) pin(name string) *resource { return t.pinMade(name, t.made(name)) }

// made returns the resource called name in the table, or a new one, not
// in it: what pinMade pins. It may be called from several goroutines.
func (t *resourceTable) made(name string) *resource {
	if v, ok := t.m.Load(name); ok { // made by a request already
		return v.(*resource)
	}
	return newResource(name, t.clock)
}

// pinMade is pin, given made, the resource made (made) for name: kept if
// the table has none of that name by now.
func (t *resourceTable) pinMade(name string, made *resource) *resource {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, loaded := t.m.LoadOrStore(name, made)
	if !loaded {
		t.n.Add(1)
	}
	r := v.(*resource)
	r.pinned.Store(true)
	return r
}

// unpin lets the resources called by the names of gone be evicted again,
// as unpinAllBut does those it does not keep: gone are the names the rules
// in force no longer pin, so that a reload need not read the whole table.
func (t *resourceTable) unpin(gone iter.Seq[string], now int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name := range gone {
		if v, ok := t.m.Load(name); ok {
			if r := v.(*resource); r.pinned.Load() {
				r.lastUse.Store(now)
				r.pinned.Store(false)
			}
		}
	}
}

// unpinAllBut lets resources that the rules no longer name be evicted again,
// once idle: a resource a rule named was never marked used (Enter does not
// touch it), so it counts as used at time now, when it is unpinned.
func (t *resourceTable) unpinAllBut(keep map[string]*binding, refs map[string]bool, now int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m.Range(func(k, v any) bool {
		name, r := k.(string), v.(*resource)
		var shared *breakerRule
		if b := keep[name]; b != nil {
			shared = b.shared
		}
		if r.shared.Load() != shared {
			r.shared.Store(shared)
		}
		if keep[name] == nil && !refs[name] && r.pinned.Load() {
			r.lastUse.Store(now)
			r.pinned.Store(false)
		}
		return true
	})
}

// blockedTotals count a resource's blocked requests by reason since it was
// made, in stripes (see contended); the window.Counter keeps the other
// totals. The first stripe is kept apart from the resource's other fields,
// which are read on every request, so that writing it does not make other
// cores read those again.
type blockedTotals struct {
	by [numReasons]atomic.Int64
	// wouldBy counts, by reason, the requests a shadow rule would have
	// blocked (FlowRule.Shadow, BreakerRule.Shadow, Rules.Shadow).
	wouldBy [numReasons]atomic.Int64
}

// A paddedBlockedTotals is a stripe made under contention, 128 bytes: a
// size the allocator aligns to 128, so that no two stripes share a cache
// line (nor the pair of lines some processors fetch together).
type paddedBlockedTotals struct {
	// First, not last: a last field of size 0 (the totals filling 128
	// bytes) would make the struct larger.
	_ [128 - unsafe.Sizeof(blockedTotals{})]byte
	blockedTotals
}
