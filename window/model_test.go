package window

// Reference-model tests. A brute-force model of the ring's specified
// behaviour (a log of accepted values plus, per physical slot, the latest
// bucket ever written to it) is driven with the same random operations as a
// Counter or a RollingWindow, and every read is compared with the model after
// every operation. The model shares no arithmetic with the implementation:
// buckets are floor divisions of the clamped time, slots are computed from
// the ring's offset (checked to be a whole number of buckets), and every sum,
// minimum and maximum is recomputed from the log.

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

var (
	modelSeed  = flag.Uint64("window.model.seed", 0x5eed, "first seed of the reference-model tests (each shape also runs seed+1)")
	modelSteps = flag.Int("window.model.steps", 2000, "operations per seed in the reference-model tests")
)

// ---- Arithmetic of the specification, written independently of ring.go ----

func refClampTime(t int64) int64 {
	if t > maxTime {
		return maxTime
	}
	if t < -maxTime {
		return -maxTime
	}
	return t
}

func refClampValue(v int64) int64 {
	if v > maxValue {
		return maxValue
	}
	if v < minValue {
		return minValue
	}
	return v
}

// refClampEvent clamps a single value given for event e: a summed event's to
// [minValue, maxValue]; a MinRT or MaxConcurrency strictly between the two,
// since the bounds mark a bucket with nothing recorded (see Counter).
func refClampEvent(e Event, v int64) int64 {
	if refKind(e) == kindSum {
		return refClampValue(v)
	}
	return min(max(v, minValue+1), maxValue-1)
}

// refFloorDiv returns floor(a / b) for b > 0, rounding towards -inf.
func refFloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// refSatAdd returns a + b, saturating at the int64 limits.
func refSatAdd(a, b int64) int64 {
	s := a + b
	if b > 0 && s < a {
		return math.MaxInt64
	}
	if b < 0 && s > a {
		return math.MinInt64
	}
	return s
}

// refSatMul returns a * b for a, b >= 0, saturating at math.MaxInt64.
func refSatMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// refKind is how the specification combines an event's values.
func refKind(e Event) kind {
	switch e {
	case MinRT:
		return kindMin
	case MaxConcurrency:
		return kindMax
	}
	return kindSum
}

// ---- The model ----

// refSlots models which bucket each physical slot holds. Buckets are numbered
// on the clock: bucket c covers [c*w, (c+1)*w).
type refSlots struct {
	w, n   int64
	p      int64   // number of physical slots: n
	shift  int64   // the ring numbers clock bucket c as c+shift internally
	latest []int64 // latest clock bucket written to each slot, if held
	held   []bool
	late   int64
}

func newRefSlots(t testing.TB, r *ring) refSlots {
	t.Helper()
	p := r.n
	if int64(r.slots.N()) != p {
		t.Fatalf("ring of %d buckets has %d slots, want %d", r.n, r.slots.N(), p)
	}
	if r.grid.Offset%r.width != 0 {
		t.Fatalf("ring offset %d is not a multiple of the width %d: bucket starts would not be multiples of the width", r.grid.Offset, r.width)
	}
	return refSlots{
		w: r.width, n: r.n, p: p, shift: r.grid.Offset / r.width,
		latest: make([]int64, p), held: make([]bool, p),
	}
}

func (m *refSlots) bucket(t int64) int64 { return refFloorDiv(refClampTime(t), m.w) }
func (m *refSlots) slot(c int64) int64   { return (c + m.shift) % m.p } // c+shift > 0

// holds reports whether bucket c is still the bucket its slot holds.
func (m *refSlots) holds(c int64) bool {
	s := m.slot(c)
	return m.held[s] && m.latest[s] == c
}

// accept applies the dropping rule to a write for bucket c: it reports
// whether the write is accepted, and whether it made the slot move on to c
// (which discards everything the slot held before).
func (m *refSlots) accept(c int64) (ok, moved bool) {
	s := m.slot(c)
	switch {
	case m.held[s] && m.latest[s] > c:
		m.late++
		return false, false
	case m.held[s] && m.latest[s] == c:
		return true, false
	}
	m.held[s], m.latest[s] = true, c
	return true, true
}

type refCounterRecord struct {
	c int64 // clock bucket
	e Event
	v int64 // as passed to AddAt, unclamped
}

// refCounter is the reference for Counter: the log of accepted values.
type refCounter struct {
	refSlots
	log  []refCounterRecord
	snap map[int64]refBucketVals // reused by snapshot
}

func (m *refCounter) add(t int64, e Event, v int64) bool {
	if e >= numEvents {
		return false // not an event: not recorded, not late
	}
	c := m.bucket(t)
	ok, moved := m.accept(c)
	if !ok {
		return false
	}
	if moved {
		// Records whose slot moved on can never be seen again; dropping them
		// only keeps the log short.
		m.log = slices.DeleteFunc(m.log, func(r refCounterRecord) bool { return !m.holds(r.c) })
	}
	m.log = append(m.log, refCounterRecord{c, e, v})
	return true
}

// refBucketVals is what one visible bucket holds, recomputed from the log.
type refBucketVals struct {
	val [numEvents]int64
	has [numEvents]bool // some value of the event was recorded
}

// snapshot folds the log into per-bucket values, in log order, for the
// buckets that are still held.
func (m *refCounter) snapshot() map[int64]refBucketVals {
	if m.snap == nil {
		m.snap = make(map[int64]refBucketVals)
	}
	snap := m.snap
	clear(snap)
	for _, r := range m.log {
		if !m.holds(r.c) {
			continue
		}
		b := snap[r.c]
		v := refClampEvent(r.e, r.v)
		switch old := b.val[r.e]; {
		case !b.has[r.e]:
			b.val[r.e] = v
		case refKind(r.e) == kindMin:
			b.val[r.e] = min(old, v)
		case refKind(r.e) == kindMax:
			b.val[r.e] = max(old, v)
		default:
			b.val[r.e] = refClampValue(old + v) // saturates after every add
		}
		b.has[r.e] = true
		snap[r.c] = b
	}
	return snap
}

// sum is a view of k buckets read at now: summed events add up the visible
// buckets, MinRT is the smallest and MaxConcurrency the largest value, and an
// event with no visible value reads 0.
func (m *refCounter) sum(snap map[int64]refBucketVals, now int64, k int64, e Event) int64 {
	cn := m.bucket(now)
	var acc int64
	found := false
	for c := cn - k + 1; c <= cn; c++ {
		b, ok := snap[c]
		if !ok || !b.has[e] {
			continue
		}
		switch {
		case !found:
			acc = b.val[e]
		case refKind(e) == kindMin:
			acc = min(acc, b.val[e])
		case refKind(e) == kindMax:
			acc = max(acc, b.val[e])
		default:
			acc += b.val[e] // a view's sum is not clamped, only each bucket
		}
		found = true
	}
	return acc
}

// maxBucket is the largest per-bucket value of e over a view of k buckets,
// a bucket without a value of e counting as 0. Implementation behaviour
// pinned here: the result is never below 0, even when every bucket of the view
// holds a negative value (meaningless for Counter's events anyway).
func (m *refCounter) maxBucket(snap map[int64]refBucketVals, now int64, k int64, e Event) int64 {
	cn := m.bucket(now)
	best := int64(0)
	for c := cn - k + 1; c <= cn; c++ {
		if b, ok := snap[c]; ok && b.has[e] {
			best = max(best, b.val[e])
		}
	}
	return best
}

type refRollingRecord struct{ c, v int64 }

// refRolling is the reference for RollingWindow.
type refRolling struct {
	refSlots
	log []refRollingRecord
}

func (m *refRolling) add(t, v int64) bool {
	c := m.bucket(t)
	ok, moved := m.accept(c)
	if !ok {
		return false
	}
	if moved {
		m.log = slices.DeleteFunc(m.log, func(r refRollingRecord) bool { return !m.holds(r.c) })
	}
	m.log = append(m.log, refRollingRecord{c, v})
	return true
}

// reduce returns the buckets ReduceAt(now) must pass, oldest first.
func (m *refRolling) reduce(now int64, ignoreCurrent bool) []Bucket {
	last, k := m.bucket(now), m.n
	if ignoreCurrent {
		last, k = last-1, k-1
	}
	first := last - k + 1
	out := make([]Bucket, k)
	for _, r := range m.log { // in log order, so saturation happens as it did
		if r.c >= first && r.c <= last && m.holds(r.c) {
			b := &out[r.c-first]
			b.Sum = refClampValue(b.Sum + refClampValue(r.v))
			b.Count = refClampValue(b.Count + 1)
		}
	}
	return out
}

// ---- Operation generator, shared by the random tests and the fuzz tests ----

// modelEntropy is what operations are drawn from: a *rand.Rand, or a byte string
// being fuzzed (fzBytes).
type modelEntropy interface {
	IntN(n int) int
	Uint64() uint64
}

// modelRand64 returns a value in [0, n), or 0 if n <= 0.
func modelRand64(src modelEntropy, n int64) int64 {
	if n <= 0 {
		return 0
	}
	if n <= 256 {
		return int64(src.IntN(int(n)))
	}
	return int64(src.Uint64() % uint64(n))
}

// modelTimeline moves the clock the way the tests need: not at all, within a
// bucket, by exactly a bucket, by several buckets, past the whole interval,
// backwards (within the interval and far back), and, when extremes is set,
// rarely to times near or beyond ±maxTime. Going back and going to an extreme
// are excursions: the clock soon returns to the present (the latest time it
// reached otherwise), as a late writer's clock would, so that most adds are
// accepted and the ring is exercised, not just its dropping of late values.
type modelTimeline struct {
	w, n, p  int64
	extremes bool
	cur      int64 // what the clock reads; may lie beyond ±maxTime
	front    int64 // the present: the latest clamped time reached other than by an extreme
	away     bool  // the clock jumped to an extreme and has not returned
}

func newModelTimeline(n int, w, start int64) modelTimeline {
	p := int64(1)
	for p < int64(n) {
		p <<= 1
	}
	return modelTimeline{w: w, n: int64(n), p: p, cur: start, front: refClampTime(start)}
}

func (tl *modelTimeline) extreme(src modelEntropy) int64 {
	switch src.IntN(12) {
	case 0:
		return maxTime
	case 1:
		return maxTime - 1
	case 2:
		return maxTime - modelRand64(src, 3*tl.w)
	case 3:
		return maxTime + 1
	case 4:
		return maxTime + modelRand64(src, 1<<62)
	case 5:
		return math.MaxInt64
	case 6:
		return -maxTime
	case 7:
		return -maxTime + modelRand64(src, 3*tl.w)
	case 8:
		return -maxTime - 1
	case 9:
		return -maxTime - modelRand64(src, 1<<62)
	case 10:
		return math.MinInt64
	}
	return int64(src.Uint64())
}

// rareExtreme reports whether to use an extreme time (one call in two, and
// only when extremes are enabled).
func (tl *modelTimeline) rareExtreme(src modelEntropy) bool { return tl.extremes && src.IntN(2) == 0 }

// move advances (or rewinds) the clock and says how, and from where.
func (tl *modelTimeline) move(src modelEntropy) (how string, from int64) {
	w, n, span := tl.w, tl.n, tl.n*tl.w
	from = tl.cur
	if (tl.away || refClampTime(tl.cur) < tl.front) && src.IntN(3) == 0 {
		tl.cur, tl.away = tl.front, false
		return "returns to the present", from
	}
	switch k := src.IntN(100); {
	case k < 15:
		how = "stays"
	case k < 35:
		how, tl.cur = "moves within a bucket", refSatAdd(tl.cur, 1+modelRand64(src, w-1))
	case k < 45:
		how, tl.cur = "moves one bucket", refSatAdd(tl.cur, w)
	case k < 53:
		how, tl.cur = "moves several buckets", refSatAdd(tl.cur, (2+modelRand64(src, n+1))*w+modelRand64(src, 2)*modelRand64(src, w))
	case k < 58:
		how, tl.cur = "moves past the interval", refSatAdd(tl.cur, (n+1+modelRand64(src, 4*n+1))*w+modelRand64(src, w))
	case k < 60:
		how, tl.cur = "moves far ahead", refSatAdd(tl.cur, refSatMul(span, 10+modelRand64(src, 1000)))
	case k < 68:
		how, tl.cur = "goes back within the interval", refSatAdd(tl.cur, -(1+modelRand64(src, span)))
	case k < 72:
		how, tl.cur = "goes back whole buckets", refSatAdd(tl.cur, -(1+modelRand64(src, n))*w)
	case k < 75:
		how, tl.cur = "goes far back", refSatAdd(tl.cur, -refSatAdd(refSatMul(span, 2+modelRand64(src, 50)), modelRand64(src, w)))
	case k < 77 && tl.rareExtreme(src):
		how, tl.cur, tl.away = "jumps to an extreme", tl.extreme(src), true
	default:
		how, tl.cur = "moves a little", refSatAdd(tl.cur, modelRand64(src, w/4+1))
	}
	if !tl.away {
		tl.front = max(tl.front, refClampTime(tl.cur))
	}
	return how, from
}

// addTime picks the time of an add: the clock's time (read through the clock
// or passed explicitly), the recent past (some of it already replaced), just
// around now, the far past, or rarely an extreme.
func (tl *modelTimeline) addTime(src modelEntropy) (at int64, viaClock bool) {
	switch k := src.IntN(100); {
	case k < 40:
		return tl.cur, true
	case k < 65:
		return tl.cur, false
	case k < 80:
		return refSatAdd(tl.cur, -modelRand64(src, (tl.p+2)*tl.w)), false
	case k < 92:
		return refSatAdd(tl.cur, modelRand64(src, 2*tl.w)-tl.w), false
	case k < 96:
		return refSatAdd(tl.cur, -modelRand64(src, refSatMul(100, tl.n*tl.w))), false
	case k < 97 && tl.rareExtreme(src):
		return tl.extreme(src), false
	}
	return tl.cur, true
}

// probe picks another time to read at (reads do not change anything).
func (tl *modelTimeline) probe(src modelEntropy) int64 {
	w, n := tl.w, tl.n
	switch k := src.IntN(20); {
	case k < 14:
		return refSatAdd(tl.cur, modelRand64(src, 2*(n+1)*w+1)-(n+1)*w)
	case k < 16:
		return refSatAdd(tl.cur, -tl.p*w)
	case k < 18:
		return tl.front
	}
	return tl.extreme(src)
}

var (
	modelHugeValues = []int64{maxValue, maxValue - 1, maxValue/2 + 1, maxValue / 3, maxValue + 1, 1 << 62, math.MaxInt64}
	modelHugeNegs   = []int64{minValue, minValue + 1, minValue/2 - 1, minValue - 1, -(1 << 62), math.MinInt64}
)

// value draws a value: 0, small, medium, small negative, huge (saturating)
// of either sign, or anything.
func modelValue(src modelEntropy) int64 {
	switch k := src.IntN(100); {
	case k < 10:
		return 0
	case k < 55:
		return 1 + modelRand64(src, 10)
	case k < 68:
		return modelRand64(src, 1_000_000)
	case k < 78:
		return -(1 + modelRand64(src, 10))
	case k < 90:
		return modelHugeValues[src.IntN(len(modelHugeValues))]
	case k < 97:
		return modelHugeNegs[src.IntN(len(modelHugeNegs))]
	}
	return int64(src.Uint64())
}

// ---- Harnesses ----

// modelRun is what the Counter and RollingWindow harnesses share: the clock, the
// modelTimeline, and a record of the last operations for failure messages.
type modelRun struct {
	t     testing.TB
	label string
	clk   *clock.Manual
	r     *ring // of the structure under test (the first one, for RollingWindow)
	tl    modelTimeline
	step  int
	adds  int         // adds of a value for an event (not of non-events)
	kept  int         // adds the model accepted
	hist  []modelNote // the last operations, formatted only on failure
}

type modelNote struct {
	step   int
	format string
	args   []any
}

func newModelRun(t testing.TB, label string, n int, w int64, start int64) modelRun {
	return modelRun{t: t, label: label, clk: clock.NewManual(start), tl: newModelTimeline(n, w, start)}
}

func (h *modelRun) note(format string, args ...any) {
	const keep = 16
	if len(h.hist) == keep {
		h.hist = append(h.hist[:0], h.hist[1:]...)
	}
	h.hist = append(h.hist, modelNote{h.step, format, args})
}

func (h *modelRun) fail(format string, args ...any) {
	h.t.Helper()
	var ops strings.Builder
	for _, o := range h.hist {
		fmt.Fprintf(&ops, "\n  step %d: %s", o.step, fmt.Sprintf(o.format, o.args...))
	}
	h.t.Fatalf("%s, step %d: %s\nlast operations, oldest first:%s", h.label, h.step, fmt.Sprintf(format, args...), ops.String())
}

// checkExercised fails if the operations did not exercise the ring: most adds
// must be kept, and some dropped as late.
func (h *modelRun) checkExercised() {
	h.t.Helper()
	if h.kept < h.adds/2 || h.kept == h.adds {
		h.t.Errorf("%s: the model kept %d of %d adds: the operations do not exercise the ring", h.label, h.kept, h.adds)
	}
}

// checkIndex checks the ring's bucket index of t against the specification.
func (h *modelRun) checkIndex(m *refSlots, t int64) {
	h.t.Helper()
	if got, want := int64(h.r.bucketOf(t)), m.bucket(t)+m.shift; got != want {
		h.fail("bucketOf(%d) = %d, want floor(clamp(t)/w) + offset/w = %d", t, got, want)
	}
}

type modelCounterHarness struct {
	modelRun
	c     *Counter
	views []*Counter // views[k-1] reads k buckets
	m     refCounter
}

func newModelCounterHarness(t testing.TB, label string, n int, w int64, start int64) *modelCounterHarness {
	t.Helper()
	h := &modelCounterHarness{modelRun: newModelRun(t, label, n, w, start)}
	c, err := NewCounter(n, time.Duration(int64(n)*w), WithClock(h.clk))
	if err != nil {
		t.Fatalf("NewCounter(%d, %v): %v", n, time.Duration(int64(n)*w), err)
	}
	h.c, h.r = c, c.r
	h.m = refCounter{refSlots: newRefSlots(t, c.r)}
	if c.width() != time.Duration(w) || c.duration() != time.Duration(int64(n)*w) {
		t.Fatalf("Width, Interval = %v, %v; want %v, %v", c.width(), c.duration(), time.Duration(w), time.Duration(int64(n)*w))
	}
	for k := 1; k <= n; k++ {
		v, err := c.View(time.Duration(int64(k) * w))
		if err != nil || v.duration() != time.Duration(int64(k)*w) {
			t.Fatalf("View(%v) = %v, %v", time.Duration(int64(k)*w), v.duration(), err)
		}
		h.views = append(h.views, v)
	}
	for _, d := range []int64{0, -w, w + 1, w - 1, int64(n+1) * w} {
		if _, err := c.View(time.Duration(d)); err == nil {
			t.Fatalf("View(%v) of a Counter of %d buckets of %v: no error", time.Duration(d), n, time.Duration(w))
		}
	}
	return h
}

func (h *modelCounterHarness) doStep(src modelEntropy) {
	h.t.Helper()
	h.step++
	how, from := h.tl.move(src)
	h.note("clock %s: %d -> %d", how, from, h.tl.cur)
	h.clk.Set(h.tl.cur)
	switch k := src.IntN(100); {
	case k < 85:
		e := Event(src.IntN(eventCount))
		v := modelValue(src)
		at, viaClock := h.tl.addTime(src)
		h.checkIndex(&h.m.refSlots, at)
		want := h.m.add(at, e, v)
		h.adds++
		if want {
			h.kept++
		}
		if viaClock {
			h.c.Add(e, v)
			h.note("Add(%v, %d) at clock %d (bucket %d): model accepts: %v", e, v, at, h.m.bucket(at), want)
		} else {
			got := h.c.AddAt(at, e, v)
			h.note("AddAt(%d, %v, %d) (bucket %d) = %v", at, e, v, h.m.bucket(at), got)
			if got != want {
				h.fail("AddAt(%d, %v, %d) = %v, want %v", at, e, v, got, want)
			}
		}
	case k < 88:
		e := Event(eventCount + src.IntN(256-eventCount))
		at, _ := h.tl.addTime(src)
		h.note("AddAt(%d, %v, 1)", at, e)
		if h.c.AddAt(at, e, 1) || h.m.add(at, e, 1) {
			h.fail("AddAt(%d, %v, 1) recorded a value for something that is not an event", at, e)
		}
	default:
		h.note("no add")
	}
	if got, want := h.c.r.late.Load(), h.m.late; got != want {
		h.fail("Late() = %d, want %d", got, want)
	}
	snap := h.m.snapshot()
	n := int(h.m.n)
	h.checkReads(snap, h.tl.cur, n, true)
	if n > 1 {
		h.checkReads(snap, h.tl.cur, 1+h.step%(n-1), true) // every shorter view in turn
	}
	probe := h.tl.probe(src)
	h.checkReads(snap, probe, n, false)
	if n > 1 {
		h.checkReads(snap, probe, 1+(7*h.step+3)%(n-1), false)
	}
}

// checkReads compares the reads of the view of k buckets at now with the
// model: SumAt, MaxBucketAt and SumsAt for every event, AvgRTAt, and RateAt
// for one event in turn. viaClock (now must be the clock's reading) also
// checks the methods that read the clock, each in turn, and the Counter's own
// methods when k is the whole interval. The reads that merely wrap others take
// turns to keep the test fast under the race detector.
func (h *modelCounterHarness) checkReads(snap map[int64]refBucketVals, now int64, k int, viaClock bool) {
	h.t.Helper()
	h.checkIndex(&h.m.refSlots, now)
	v, k64 := h.views[k-1], int64(k)
	var want Sums
	for e := Event(0); e < numEvents; e++ {
		want[e] = h.m.sum(snap, now, k64, e)
		if got := v.SumAt(now, e); got != want[e] {
			h.fail("view of %d buckets: SumAt(%d, %v) = %d, want %d", k, now, e, got, want[e])
		}
		if got, want := v.MaxBucketAt(now, e), h.m.maxBucket(snap, now, k64, e); got != want {
			h.fail("view of %d buckets: MaxBucketAt(%d, %v) = %d, want %d", k, now, e, got, want)
		}
	}
	if got := v.SumsAt(now); got != want {
		h.fail("view of %d buckets: SumsAt(%d) = %v, want %v", k, now, got, want)
	}
	wantAvg := 0.0
	if want[Succeeded] != 0 {
		wantAvg = float64(want[RT]) / float64(want[Succeeded])
	}
	if got := v.avgRTAt(now); got != wantAvg {
		h.fail("view of %d buckets: AvgRTAt(%d) = %g, want %g", k, now, got, wantAvg)
	}
	e := Event(h.step % eventCount)
	wantRate := float64(want[e]) / time.Duration(k64*h.m.w).Seconds()
	if got := v.rateAt(now, e); got != wantRate {
		h.fail("view of %d buckets: RateAt(%d, %v) = %g, want %g", k, now, e, got, wantRate)
	}
	if got := v.SumAt(now, numEvents+Event(h.step%3)); got != 0 {
		h.fail("view of %d buckets: SumAt(%d, %v) = %d, want 0", k, now, numEvents+Event(h.step%3), got)
	}
	if got := v.MaxBucketAt(now, numEvents); got != 0 {
		h.fail("view of %d buckets: MaxBucketAt(%d, %v) = %d, want 0", k, now, numEvents, got)
	}
	full := k == int(h.m.n)
	if full {
		if got := h.c.SumAt(now, e); got != want[e] {
			h.fail("Counter.SumAt(%d, %v) = %d, want %d", now, e, got, want[e])
		}
		var got Sums
		if h.step%2 == 0 {
			got = h.c.SumsAt(now)
		} else {
			got = h.c.SumsAt(now)
		}
		if got != want {
			h.fail("Counter.SumsAt(%d) (or All().SumsAt) = %v, want %v", now, got, want)
		}
	}
	if !viaClock {
		return
	}
	switch h.step % 6 {
	case 0:
		if got := v.Sum(e); got != want[e] {
			h.fail("view of %d buckets: Sum(%v) = %d, want %d", k, e, got, want[e])
		}
	case 1:
		if got, want := v.MaxBucket(e), h.m.maxBucket(snap, now, k64, e); got != want {
			h.fail("view of %d buckets: MaxBucket(%v) = %d, want %d", k, e, got, want)
		}
	case 2:
		if got := v.rate(e); got != wantRate {
			h.fail("view of %d buckets: Rate(%v) = %g, want %g", k, e, got, wantRate)
		}
	case 3:
		if got := v.Sums(); got != want {
			h.fail("view of %d buckets: Sums() = %v, want %v", k, got, want)
		}
	case 4:
		if got := v.avgRT(); got != wantAvg {
			h.fail("view of %d buckets: AvgRT() = %g, want %g", k, got, wantAvg)
		}
	case 5:
		if !full {
			break
		}
		if got := h.c.Sum(e); got != want[e] {
			h.fail("Counter.Sum(%v) = %d, want %d", e, got, want[e])
		}
		if got := h.c.Sums(); got != want {
			h.fail("Counter.Sums() = %v, want %v", got, want)
		}
	}
}

type modelRollingHarness struct {
	modelRun
	all, ign *RollingWindow // without and with IgnoreCurrentBucket
	m        refRolling
}

func newModelRollingHarness(t testing.TB, label string, n int, w int64, start int64) *modelRollingHarness {
	t.Helper()
	h := &modelRollingHarness{modelRun: newModelRun(t, label, n, w, start)}
	var err error
	if h.all, err = NewRollingWindow(n, time.Duration(int64(n)*w), WithClock(h.clk)); err != nil {
		t.Fatalf("NewRollingWindow(%d, %v): %v", n, time.Duration(int64(n)*w), err)
	}
	if h.ign, err = NewRollingWindow(n, time.Duration(int64(n)*w), WithClock(h.clk), IgnoreCurrentBucket()); err != nil {
		t.Fatalf("NewRollingWindow(%d, %v, IgnoreCurrentBucket()): %v", n, time.Duration(int64(n)*w), err)
	}
	for _, rw := range []*RollingWindow{h.all, h.ign} {
		if rw.interval() != time.Duration(int64(n)*w) || rw.width() != time.Duration(w) {
			t.Fatalf("Interval, Width = %v, %v; want %v, %v", rw.interval(), rw.width(), time.Duration(int64(n)*w), time.Duration(w))
		}
	}
	h.r = h.all.r
	h.m = refRolling{refSlots: newRefSlots(t, h.all.r)}
	return h
}

func (h *modelRollingHarness) doStep(src modelEntropy) {
	h.t.Helper()
	h.step++
	how, from := h.tl.move(src)
	h.note("clock %s: %d -> %d", how, from, h.tl.cur)
	h.clk.Set(h.tl.cur)
	if src.IntN(100) < 85 {
		v := modelValue(src)
		at, viaClock := h.tl.addTime(src)
		h.checkIndex(&h.m.refSlots, at)
		want := h.m.add(at, v)
		h.adds++
		if want {
			h.kept++
		}
		if viaClock {
			h.all.Add(v)
			h.ign.Add(v)
			h.note("Add(%d) at clock %d (bucket %d): model accepts: %v", v, at, h.m.bucket(at), want)
		} else {
			gotAll, gotIgn := h.all.AddAt(at, v), h.ign.AddAt(at, v)
			h.note("AddAt(%d, %d) (bucket %d) = %v", at, v, h.m.bucket(at), gotAll)
			if gotAll != want || gotIgn != want {
				h.fail("AddAt(%d, %d) = %v (IgnoreCurrentBucket: %v), want %v", at, v, gotAll, gotIgn, want)
			}
		}
	} else {
		h.note("no add")
	}
	for _, rw := range []*RollingWindow{h.all, h.ign} {
		if got := rw.r.late.Load(); got != h.m.late {
			h.fail("late = %d, want %d", got, h.m.late)
		}
	}
	h.checkReduce(h.tl.cur, true)
	h.checkReduce(h.tl.probe(src), false)
}

func (h *modelRollingHarness) checkReduce(now int64, viaClock bool) {
	h.t.Helper()
	h.checkIndex(&h.m.refSlots, now)
	for _, rw := range []*RollingWindow{h.all, h.ign} {
		want := h.m.reduce(now, rw.ignoreCurrent)
		got := []Bucket{}
		rw.ReduceAt(now, func(b Bucket) { got = append(got, b) })
		if !slices.Equal(got, want) {
			h.fail("IgnoreCurrentBucket=%v: ReduceAt(%d) (bucket %d) passed %v, want %v", rw.ignoreCurrent, now, h.m.bucket(now), got, want)
		}
		if viaClock && h.step%2 == 0 {
			got = got[:0]
			rw.Reduce(func(b Bucket) { got = append(got, b) })
			if !slices.Equal(got, want) {
				h.fail("IgnoreCurrentBucket=%v: Reduce() at %d passed %v, want %v", rw.ignoreCurrent, now, got, want)
			}
		}
	}
}

// ---- Tests ----

var (
	modelCounts = []int{1, 2, 3, 10, 16}
	modelWidths = []time.Duration{time.Microsecond, 7 * time.Microsecond, time.Millisecond, 500 * time.Millisecond}
)

// modelForEachShape runs body for every shape and two seeds: with the first the
// clock keeps to ordinary times, with the second it also visits, rarely and
// only in the last fifth of the run (a value written at +maxTime takes its
// slot for good), times near and beyond ±maxTime.
func modelForEachShape(t *testing.T, body func(t *testing.T, label string, n int, w int64, seed uint64, extremes bool)) {
	for _, n := range modelCounts {
		for _, w := range modelWidths {
			for i := uint64(0); i < 2; i++ {
				seed := *modelSeed + i
				name := fmt.Sprintf("n=%d/w=%v/seed=%d", n, w, seed)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					label := fmt.Sprintf("%s (rerun: go test -run '%s' -window.model.seed=%d ./window/)", t.Name(), t.Name(), *modelSeed)
					body(t, label, n, int64(w), seed, i == 1)
				})
			}
		}
	}
}

func modelStart(rng *rand.Rand, n int, w int64) int64 {
	span := int64(n) * w
	return rng.Int64N(6*span+1) - 3*span // around the clock's origin, so negative times are covered
}

// TestCounterMatchesReferenceModel drives a Counter and the reference model
// with the same random operations and checks every read after every one.
func TestCounterMatchesReferenceModel(t *testing.T) {
	modelForEachShape(t, func(t *testing.T, label string, n int, w int64, seed uint64, extremes bool) {
		rng := rand.New(rand.NewPCG(seed, uint64(n)<<32|uint64(w)))
		h := newModelCounterHarness(t, label, n, w, modelStart(rng, n, w))
		for h.step < *modelSteps {
			h.tl.extremes = extremes && h.step >= *modelSteps*4/5
			h.doStep(rng)
		}
		h.checkExercised()
	})
}

// TestRollingWindowMatchesReferenceModel drives two RollingWindows, one with
// IgnoreCurrentBucket, and the reference model with the same random
// operations, and checks after every one that Reduce passes exactly the
// model's buckets.
func TestRollingWindowMatchesReferenceModel(t *testing.T) {
	modelForEachShape(t, func(t *testing.T, label string, n int, w int64, seed uint64, extremes bool) {
		rng := rand.New(rand.NewPCG(seed, uint64(n)<<32|uint64(w)|1<<63))
		h := newModelRollingHarness(t, label, n, w, modelStart(rng, n, w))
		for h.step < *modelSteps {
			h.tl.extremes = extremes && h.step >= *modelSteps*4/5
			h.doStep(rng)
		}
		h.checkExercised()
	})
}

// TestReferenceModelAgreesWithWorkedExample checks the model (and the
// Counter) against values worked out by hand, so that the model tests cannot
// pass by the model sharing a mistake with the implementation.
func TestReferenceModelAgreesWithWorkedExample(t *testing.T) {
	const ms = int64(time.Millisecond)
	c, err := NewCounter(3, 3*time.Millisecond) // 3 buckets of 1 ms in 3 slots
	if err != nil {
		t.Fatal(err)
	}
	m := refCounter{refSlots: newRefSlots(t, c.r)}
	add := func(at int64, e Event, v int64, want bool) {
		t.Helper()
		if got := c.AddAt(at, e, v); got != want {
			t.Fatalf("Counter.AddAt(%d, %v, %d) = %v, want %v", at, e, v, got, want)
		}
		if got := m.add(at, e, v); got != want {
			t.Fatalf("model.add(%d, %v, %d) = %v, want %v", at, e, v, got, want)
		}
	}
	sum := func(k, now int64, e Event, want int64) {
		t.Helper()
		v := &Counter{r: c.r, word: c.word, l: c.l, k: k}
		if got := v.SumAt(now, e); got != want {
			t.Fatalf("Counter: view of %d buckets: SumAt(%d, %v) = %d, want %d", k, now, e, got, want)
		}
		if got := m.sum(m.snapshot(), now, k, e); got != want {
			t.Fatalf("model: view of %d buckets: sum(%d, %v) = %d, want %d", k, now, e, got, want)
		}
	}
	maxBucket := func(k, now int64, e Event, want int64) {
		t.Helper()
		v := &Counter{r: c.r, word: c.word, l: c.l, k: k}
		if got := v.MaxBucketAt(now, e); got != want {
			t.Fatalf("Counter: view of %d buckets: MaxBucketAt(%d, %v) = %d, want %d", k, now, e, got, want)
		}
		if got := m.maxBucket(m.snapshot(), now, k, e); got != want {
			t.Fatalf("model: view of %d buckets: maxBucket(%d, %v) = %d, want %d", k, now, e, got, want)
		}
	}
	late := func(want int64) {
		t.Helper()
		if c.r.late.Load() != want || m.late != want {
			t.Fatalf("Late() = %d, model late = %d, want %d", c.r.late.Load(), m.late, want)
		}
	}

	add(0, Allowed, 1, true)        // bucket 0
	add(ms-1, Allowed, 2, true)     // bucket 0
	add(ms, Allowed, 4, true)       // bucket 1
	add(-1, Allowed, 8, true)       // bucket -1: floor towards -inf
	sum(3, ms, Allowed, 1+2+4+8)    // buckets -1, 0, 1
	sum(3, 2*ms, Allowed, 1+2+4)    // buckets 0, 1, 2
	sum(1, ms-1, Allowed, 1+2)      // bucket 0
	sum(2, -ms, Allowed, 8)         // buckets -2, -1
	add(3*ms, Allowed, 16, true)    // bucket 3 takes the slot of bucket 0
	add(5, Allowed, 32, false)      // bucket 0 is gone: dropped, late
	late(1)                         //
	sum(3, ms, Allowed, 8+4)        // bucket 0 no longer counts
	sum(3, 3*ms, Allowed, 4+16)     // buckets 1, 2, 3
	maxBucket(3, 3*ms, Allowed, 16) //
	add(2*ms, Allowed, 0, true)     // bucket 2, a zero, takes the slot of bucket -1
	add(-1, Allowed, 1, false)      // bucket -1 is gone
	late(2)                         //
	add(4*ms+5, Allowed, 64, true)  // bucket 4 takes the slot of bucket 1
	sum(3, 2*ms, Allowed, 0)        // buckets 0 and 1 (gone), 2 (a zero)
	add(4*ms, MinRT, 5, true)       //
	add(4*ms, MinRT, 3, true)       //
	add(3*ms, MinRT, 7, true)       //
	sum(3, 4*ms, MinRT, 3)          // the smallest over buckets 2, 3, 4
	sum(1, 3*ms, MinRT, 7)          //
	sum(1, 2*ms, MinRT, 0)          // bucket 2 holds no MinRT
	maxBucket(3, 4*ms, MinRT, 7)    // largest of the per-bucket minima 0, 7, 3
	add(5*ms, Failed, maxValue, true)
	add(5*ms, Failed, 1, true)   // saturates at maxValue
	add(5*ms, Failed, -10, true) // from maxValue, not from maxValue+1
	sum(1, 5*ms, Failed, maxValue-10)
	add(5*ms, RT, math.MaxInt64, true) // a single value is clamped first
	add(5*ms, RT, -1, true)
	sum(1, 5*ms, RT, maxValue-1)
	add(math.MaxInt64, Allowed, 3, true) // clamped to maxTime
	add(maxTime+1, Allowed, 4, true)     //
	sum(1, maxTime, Allowed, 7)          //
	add(maxTime-3*ms, Allowed, 1, false) // 3 buckets earlier: same slot, replaced
	late(3)
	sum(3, math.MinInt64, Allowed, 0) // clamped to -maxTime: nothing there
}

// TestRollingWindowReduceAgreesWithWorkedExample pins ReduceAt on values
// worked out by hand, with and without IgnoreCurrentBucket.
func TestRollingWindowReduceAgreesWithWorkedExample(t *testing.T) {
	const ms = int64(time.Millisecond)
	rw, _ := NewRollingWindow(3, 3*time.Millisecond)
	ign, _ := NewRollingWindow(3, 3*time.Millisecond, IgnoreCurrentBucket())
	one, _ := NewRollingWindow(1, time.Millisecond, IgnoreCurrentBucket())
	for _, w := range []*RollingWindow{rw, ign, one} {
		w.AddAt(-1, 5)   // bucket -1
		w.AddAt(0, 1)    // bucket 0
		w.AddAt(ms, -2)  // bucket 1
		w.AddAt(ms, 10)  // bucket 1
		w.AddAt(ms+1, 0) // bucket 1
	}
	reduce := func(w *RollingWindow, now int64) []Bucket {
		out := []Bucket{}
		w.ReduceAt(now, func(b Bucket) { out = append(out, b) })
		return out
	}
	for _, tc := range []struct {
		w    *RollingWindow
		now  int64
		want []Bucket
	}{
		{rw, ms, []Bucket{{5, 1}, {1, 1}, {8, 3}}},
		{rw, 2 * ms, []Bucket{{1, 1}, {8, 3}, {}}},
		{rw, 5 * ms, []Bucket{{}, {}, {}}},
		{ign, ms, []Bucket{{5, 1}, {1, 1}}},
		{ign, 2 * ms, []Bucket{{1, 1}, {8, 3}}},
		{one, ms, []Bucket{}},
	} {
		if got := reduce(tc.w, tc.now); !slices.Equal(got, tc.want) {
			t.Errorf("interval %v, IgnoreCurrentBucket=%v: ReduceAt(%d) passed %v, want %v", tc.w.interval(), tc.w.ignoreCurrent, tc.now, got, tc.want)
		}
	}
}

// TestMinAndMaxEventsAtTheValueLimitsStillReadAsRecorded: MinRT keeps the
// smallest value recorded and MaxConcurrency the largest, and only a view with
// nothing recorded reads 0. An empty min word holds maxValue and an empty max
// word minValue, so a value at (or clamped to) those limits must not be
// stored as is: it would read as "nothing recorded", 0. Such values are
// clamped to lie strictly between minValue and maxValue.
func TestMinAndMaxEventsAtTheValueLimitsStillReadAsRecorded(t *testing.T) {
	for _, tc := range []struct {
		e    Event
		v    int64
		want int64
	}{
		{MinRT, maxValue, maxValue - 1},
		{MinRT, 1 << 62, maxValue - 1},
		{MinRT, minValue, minValue + 1},
		{MaxConcurrency, minValue, minValue + 1},
		{MaxConcurrency, math.MinInt64, minValue + 1},
		{MaxConcurrency, math.MaxInt64, maxValue - 1},
	} {
		c, _ := NewCounter(2, 2*time.Second)
		if !c.AddAt(0, tc.e, tc.v) {
			t.Fatalf("AddAt(0, %v, %d) = false", tc.e, tc.v)
		}
		if got := c.SumAt(0, tc.e); got != tc.want {
			t.Errorf("after AddAt(0, %v, %d): SumAt(0, %v) = %d, want %d", tc.e, tc.v, tc.e, got, tc.want)
		}
		if got := c.SumsAt(0)[tc.e]; got != tc.want {
			t.Errorf("after AddAt(0, %v, %d): SumsAt(0)[%v] = %d, want %d", tc.e, tc.v, tc.e, got, tc.want)
		}
		if got, want := c.MaxBucketAt(0, tc.e), max(tc.want, 0); got != want {
			t.Errorf("after AddAt(0, %v, %d): MaxBucketAt(0, %v) = %d, want %d", tc.e, tc.v, tc.e, got, want)
		}
	}
}
