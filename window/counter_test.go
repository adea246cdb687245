package window

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
)

func newTestCounter(t *testing.T, buckets int, interval time.Duration) (*Counter, *clock.Manual) {
	t.Helper()
	c := clock.NewManual(0)
	ctr, err := NewCounter(buckets, interval, WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	return ctr, c
}

func TestCounterSlidesBucketByBucket(t *testing.T) {
	ctr, c := newTestCounter(t, 4, 400*time.Millisecond)
	for i := 0; i < 4; i++ { // 1, 2, 3, 4 allowed in the four buckets
		c.Set(int64(i) * int64(100*time.Millisecond))
		for j := 0; j <= i; j++ {
			ctr.Add(Allowed, 1)
		}
	}
	if got := ctr.Sum(Allowed); got != 10 {
		t.Fatalf("all four buckets: Sum = %d, want 10", got)
	}
	for i, want := range []int64{9, 7, 4, 0} { // the oldest bucket leaves first
		c.Advance(100 * time.Millisecond)
		if got := ctr.Sum(Allowed); got != want {
			t.Fatalf("after %d more buckets: Sum = %d, want %d", i+1, got, want)
		}
	}
}

func TestCounterBucketsAlignToMultiplesOfTheWidth(t *testing.T) {
	ctr, _ := newTestCounter(t, 4, 4*time.Second)
	ctr.AddAt(int64(999*time.Millisecond), Allowed, 1)  // bucket [0s, 1s)
	ctr.AddAt(int64(1000*time.Millisecond), Allowed, 1) // bucket [1s, 2s)
	ctr.AddAt(int64(-1), Allowed, 1)                    // bucket [-1s, 0s)
	one, _ := ctr.View(time.Second)
	if got := one.SumAt(int64(1500*time.Millisecond), Allowed); got != 1 {
		t.Fatalf("bucket [1s,2s) holds %d, want 1", got)
	}
	if got := one.SumAt(0, Allowed); got != 1 {
		t.Fatalf("bucket [0s,1s) holds %d, want 1", got)
	}
	if got := one.SumAt(int64(-1), Allowed); got != 1 {
		t.Fatalf("bucket [-1s,0s) holds %d, want 1", got)
	}
	if got := one.SumAt(int64(-1001*time.Millisecond), Allowed); got != 0 {
		t.Fatalf("bucket [-2s,-1s) holds %d, want 0", got)
	}
}

func TestViewReadsOnlyTheLastPartOfTheRing(t *testing.T) {
	ctr, c := newTestCounter(t, 100, 10*time.Second)
	for i := 0; i < 100; i++ { // one allowed per 100 ms for 10 s
		c.Set(int64(i) * int64(100*time.Millisecond))
		ctr.Add(Allowed, 1)
		ctr.Add(Succeeded, 1)
		ctr.Add(RT, int64(i))
	}
	v, err := ctr.View(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Sum(Allowed); got != 10 {
		t.Fatalf("1 s view: Sum = %d, want 10", got)
	}
	if got := v.rate(Allowed); got != 10 {
		t.Fatalf("1 s view: Rate = %v/s, want 10", got)
	}
	if got := ctr.rate(Allowed); got != 10 {
		t.Fatalf("10 s view: Rate = %v/s, want 10", got)
	}
	if got, want := v.avgRT(), float64(90+99)/2; got != want {
		t.Fatalf("1 s view: AvgRT = %v, want %v", got, want)
	}
	if got := v.duration(); got != time.Second {
		t.Fatalf("Duration = %v", got)
	}
	sums := v.Sums()
	for e := Event(0); e < numEvents; e++ {
		if sums[e] != v.Sum(e) {
			t.Fatalf("Sums()[%v] = %d, Sum = %d", e, sums[e], v.Sum(e))
		}
	}
}

func TestMinAndMaxEventsKeepExtremes(t *testing.T) {
	ctr, c := newTestCounter(t, 2, 2*time.Second)
	if got := ctr.Sum(MinRT); got != 0 {
		t.Fatalf("MinRT with nothing recorded = %d, want 0", got)
	}
	for _, rt := range []int64{30, 10, 20} {
		ctr.Add(MinRT, rt)
		ctr.Add(MaxConcurrency, rt)
	}
	c.Advance(time.Second)
	ctr.Add(MinRT, 15)
	ctr.Add(MaxConcurrency, 25)
	if got := ctr.Sum(MinRT); got != 10 {
		t.Fatalf("MinRT over both buckets = %d, want 10", got)
	}
	if got := ctr.Sum(MaxConcurrency); got != 30 {
		t.Fatalf("MaxConcurrency over both buckets = %d, want 30", got)
	}
	last, _ := ctr.View(time.Second)
	if got := last.Sum(MinRT); got != 15 {
		t.Fatalf("MinRT in the last bucket = %d, want 15", got)
	}
	if got := last.MaxBucket(MaxConcurrency); got != 25 {
		t.Fatalf("MaxBucket(MaxConcurrency) in the last bucket = %d, want 25", got)
	}
}

func TestMaxBucketFindsTheBusiestBucket(t *testing.T) {
	ctr, c := newTestCounter(t, 5, 5*time.Second)
	for i, n := range []int{3, 9, 1, 0, 4} {
		c.Set(int64(i) * int64(time.Second))
		for j := 0; j < n; j++ {
			ctr.Add(Blocked, 1)
		}
	}
	if got := ctr.MaxBucket(Blocked); got != 9 {
		t.Fatalf("MaxBucket = %d, want 9", got)
	}
	v, _ := ctr.View(2 * time.Second)
	if got := v.MaxBucket(Blocked); got != 4 {
		t.Fatalf("MaxBucket over the last two buckets = %d, want 4", got)
	}
}

func TestSumsSaturateInsteadOfWrapping(t *testing.T) {
	ctr, _ := newTestCounter(t, 1, time.Second)
	ctr.Add(RT, maxValue-1)
	ctr.Add(RT, 5)
	ctr.Add(RT, 1<<62) // beyond what a word holds: clamped first
	if got := ctr.Sum(RT); got != maxValue {
		t.Fatalf("Sum = %d, want maxValue %d", got, int64(maxValue))
	}
	ctr.Add(Failed, -(1 << 62))
	if got := ctr.Sum(Failed); got != minValue {
		t.Fatalf("Sum = %d, want minValue %d", got, int64(minValue))
	}
}

func TestOlderTimesAreRecordedWhileTheirBucketIsHeld(t *testing.T) {
	ctr, _ := newTestCounter(t, 4, 4*time.Second)
	sec := int64(time.Second)
	ctr.AddAt(10*sec, Allowed, 1)
	if !ctr.AddAt(8*sec, Allowed, 1) { // two buckets back: still in the ring
		t.Fatal("a value two buckets back was dropped")
	}
	if got := ctr.SumAt(10*sec, Allowed); got != 2 {
		t.Fatalf("Sum = %d, want 2", got)
	}
	// Bucket 14 s reuses the slot of bucket 10 s; a late value for 10 s is
	// dropped and counted, and never lands in bucket 14 s.
	ctr.AddAt(14*sec, Allowed, 1)
	if ctr.AddAt(10*sec, Allowed, 1) {
		t.Fatal("a value for a replaced bucket was recorded")
	}
	if got := ctr.r.late.Load(); got != 1 {
		t.Fatalf("Late = %d, want 1", got)
	}
	if got := ctr.SumAt(14*sec, Allowed); got != 1 {
		t.Fatalf("Sum at 14 s = %d, want 1", got)
	}
	// A read at an older time sees only the buckets still held.
	if got := ctr.SumAt(11*sec, Allowed); got != 1 {
		t.Fatalf("Sum at 11 s = %d, want 1 (bucket 8 s; bucket 10 s was replaced)", got)
	}
}

func TestTimeJumpingFarAheadClearsEverything(t *testing.T) {
	ctr, c := newTestCounter(t, 10, time.Second)
	for i := 0; i < 10; i++ {
		c.Advance(100 * time.Millisecond)
		ctr.Add(Allowed, 7)
	}
	c.Advance(1000 * time.Hour)
	if got := ctr.Sum(Allowed); got != 0 {
		t.Fatalf("after a jump far ahead Sum = %d, want 0", got)
	}
	ctr.Add(Allowed, 1)
	if got := ctr.Sum(Allowed); got != 1 {
		t.Fatalf("Sum = %d, want 1", got)
	}
}

func TestTimesBeyondTheRangeAreClamped(t *testing.T) {
	ctr, _ := newTestCounter(t, 2, 2*time.Second)
	const huge = int64(1<<63 - 1)
	ctr.AddAt(huge, Allowed, 1)
	ctr.AddAt(maxTime, Allowed, 1)
	if got := ctr.SumAt(huge, Allowed); got != 2 {
		t.Fatalf("Sum at MaxInt64 = %d, want 2 (both clamped to maxTime)", got)
	}
	ctr2, _ := newTestCounter(t, 2, 2*time.Second)
	ctr2.AddAt(-huge-1, Allowed, 1)
	if got := ctr2.SumAt(-maxTime, Allowed); got != 1 {
		t.Fatalf("Sum at -maxTime = %d, want 1", got)
	}
}

func TestUnknownEventsAreIgnored(t *testing.T) {
	ctr, _ := newTestCounter(t, 1, time.Second)
	if ctr.AddAt(0, Event(200), 1) {
		t.Fatal("AddAt accepted an unknown event")
	}
	if got := ctr.SumAt(0, Event(200)); got != 0 {
		t.Fatalf("Sum of an unknown event = %d", got)
	}
	if got := Event(200).String(); got != "event(200)" {
		t.Fatalf("String = %q", got)
	}
	if got := MinRT.String(); got != "min_rt" {
		t.Fatalf("String = %q", got)
	}
}

func TestInvalidShapesAreRejectedWithTheFieldAndValue(t *testing.T) {
	cases := []struct {
		buckets  int
		interval time.Duration
		mention  string
	}{
		{0, time.Second, "buckets = 0"},
		{-3, time.Second, "buckets = -3"},
		{maxBuckets + 1, time.Hour, "buckets = 65537"},
		{10, 0, "interval = 0s"},
		{10, -time.Second, "interval = -1s"},
		{3, time.Second + 1, "interval = 1.000000001s"},
		{10, 5 * time.Microsecond, "10 buckets of 500ns"},
		{2, 1 << 62, "interval"},
	}
	for _, tc := range cases {
		for name, build := range map[string]func() error{
			"Counter":   func() error { _, err := NewCounter(tc.buckets, tc.interval); return err },
			"Histogram": func() error { _, err := NewHistogram(tc.buckets, tc.interval); return err },
		} {
			err := build()
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("New%s(%d, %v): err = %v, want config.ErrInvalid", name, tc.buckets, tc.interval, err)
			}
			if !contains(err.Error(), tc.mention) {
				t.Fatalf("New%s(%d, %v): error %q does not mention %q", name, tc.buckets, tc.interval, err, tc.mention)
			}
		}
	}
	ctr, _ := NewCounter(10, time.Second)
	for _, d := range []time.Duration{0, -time.Second, 150 * time.Millisecond, 2 * time.Second} {
		if _, err := ctr.View(d); !errors.Is(err, config.ErrInvalid) || !contains(err.Error(), "view = "+d.String()) {
			t.Fatalf("View(%v): err = %v", d, err)
		}
	}
	if _, err := NewRollingWindow(0, time.Second); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("NewRollingWindow(0, 1s): err = %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestStaleWritersNeverLeakIntoALaterBucket races writers for a bucket
// against writers for the bucket one whole ring later, which reuses its slot.
// A writer that found the older bucket and lost the slot before its add
// landed must not count in the later bucket (Sentinel's and go-zero's rings
// let it), and no add to the later bucket may be lost to its slot's reset.
// Whatever the interleaving, the later bucket must hold exactly the adds
// accepted for it.
func TestStaleWritersNeverLeakIntoALaterBucket(t *testing.T) {
	const writers, perWriter = 8, 2000
	for round := 0; round < 20; round++ {
		ctr, err := NewCounter(4, 4*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		lap := int64(4 * time.Millisecond) // four slots of 1 ms: a whole ring
		t0 := int64(round) * int64(time.Millisecond)
		t1 := t0 + lap
		var accepted [2]atomic.Int64
		var start, wg sync.WaitGroup
		start.Add(1)
		for g := 0; g < writers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				for i := 0; i < perWriter; i++ {
					which := (g + i) % 2
					if i < perWriter/4 {
						which = 0 // start on the old bucket so the slot must move under them
					}
					ts := []int64{t0, t1}[which]
					if ctr.AddAt(ts, Allowed, 1) {
						accepted[which].Add(1)
					}
				}
			}()
		}
		start.Done()
		wg.Wait()
		total := accepted[0].Load() + accepted[1].Load() + ctr.r.late.Load()
		if total != writers*perWriter {
			t.Fatalf("round %d: accepted %d + late %d != %d attempts", round, accepted[0].Load()+accepted[1].Load(), ctr.r.late.Load(), writers*perWriter)
		}
		one, _ := ctr.View(time.Millisecond)
		if got, want := one.SumAt(t1, Allowed), accepted[1].Load(); got != want {
			t.Fatalf("round %d: later bucket holds %d, but %d adds were accepted for it", round, got, want)
		}
	}
}

// TestConcurrentWritersAndReadersOnAMovingClock runs writers and readers
// while another goroutine advances a manual clock across bucket edges and by
// whole rings. Reads must never see more than was written nor a negative
// count, and once the clock stops every accepted add must be counted.
func TestConcurrentWritersAndReadersOnAMovingClock(t *testing.T) {
	c := clock.NewManual(0)
	ctr, err := NewCounter(8, 8*time.Millisecond, WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	view, _ := ctr.View(2 * time.Millisecond)
	var written atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if ctr.AddAt(c.Now(), Allowed, 1) {
					written.Add(1)
				}
			}
		}()
	}
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := ctr.Sum(Allowed)
				v := view.Sum(Allowed)
				w := written.Load()
				if s < 0 || v < 0 || s > w+writersSlack || v > w+writersSlack {
					t.Errorf("read sum %d, view %d, with %d written", s, v, w)
					return
				}
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		switch i % 10 {
		case 0:
			c.Advance(8 * time.Millisecond) // a whole ring
		default:
			c.Advance(300 * time.Microsecond)
		}
		for j := 0; j < 10; j++ {
			_ = ctr.Sum(Allowed)
		}
	}
	close(stop)
	wg.Wait()
	// Quiet now: everything accepted in the current bucket is there.
	now := c.Now()
	before := ctr.SumAt(now, Allowed)
	for i := 0; i < 100; i++ {
		ctr.AddAt(now, Allowed, 1)
	}
	if got := ctr.SumAt(now, Allowed); got != before+100 {
		t.Fatalf("after the race: %d, want %d", got, before+100)
	}
}

// writersSlack allows for the adds that the ring holds but that their
// writers have not yet counted in written: one per writer.
const writersSlack = 4

// TestAddPairAtIsTwoAddAts records the same random values through AddPairAt
// into one Counter and through two AddAt calls into another, at times that
// move forward, stay, and fall behind the ring, and compares every read.
func TestAddPairAtIsTwoAddAts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	clk := clock.NewManual(0)
	pair, err := NewCounter(8, 800*time.Millisecond, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	two, _ := NewCounter(8, 800*time.Millisecond, WithClock(clk))
	now := int64(time.Hour)
	for i := range 20000 {
		now += int64(rng.IntN(int(300 * time.Millisecond)))
		at := now - int64(rng.IntN(int(2*time.Second))) // sometimes too late for the ring
		e1, e2 := Event(rng.IntN(eventCount)), Event(rng.IntN(eventCount))
		v1, v2 := rng.Int64N(1000)-100, rng.Int64N(1000)-100
		got := pair.AddPairAt(at, e1, v1, e2, v2)
		ok1 := two.AddAt(at, e1, v1)
		want := two.AddAt(at, e2, v2) && ok1
		if got != want {
			t.Fatalf("step %d: AddPairAt reported %v, the two AddAt %v", i, got, want)
		}
		if p, q := pair.SumsAt(now), two.SumsAt(now); p != q {
			t.Fatalf("step %d: sums %v after AddPairAt, %v after two AddAt", i, p, q)
		}
	}
	if pair.r.late.Load() != two.r.late.Load() {
		t.Fatalf("late: %d after AddPairAt, %d after two AddAt", pair.r.late.Load(), two.r.late.Load())
	}
}

// TestWithEventsRecordsOnlyThoseEvents checks a Counter made with
// WithEvents: it records and reads the events given exactly as a full
// Counter does, refuses the others, and takes one word per event.
func TestWithEventsRecordsOnlyThoseEvents(t *testing.T) {
	clk := clock.NewManual(0)
	few, err := NewCounter(10, 10*time.Second, WithClock(clk), WithEvents(Failed, MinRT, Allowed))
	if err != nil {
		t.Fatal(err)
	}
	all, _ := NewCounter(10, 10*time.Second, WithClock(clk))
	rng := rand.New(rand.NewPCG(9, 10))
	kept := map[Event]bool{Failed: true, MinRT: true, Allowed: true}
	for i := range 5000 {
		e, v := Event(rng.IntN(eventCount)), rng.Int64N(100)
		if got := few.AddAt(clk.Now(), e, v); got != kept[e] {
			t.Fatalf("step %d: AddAt(%v) reported %v", i, e, got)
		}
		if kept[e] {
			all.Add(e, v)
		}
		if rng.IntN(50) == 0 {
			clk.Advance(time.Duration(rng.Int64N(int64(3 * time.Second))))
		}
		if a, b := few.Sums(), all.Sums(); a != b {
			t.Fatalf("step %d: sums %v, want %v", i, a, b)
		}
		if few.AddPairAt(clk.Now(), Allowed, 1, Failed, 2) != all.AddPairAt(clk.Now(), Allowed, 1, Failed, 2) {
			t.Fatalf("step %d: AddPairAt differs", i)
		}
	}
	if got, want := len(few.r.words), 10*4; got != want {
		t.Fatalf("%d words, want 10 slots of a state word and 3 events: %d", got, want)
	}
	for _, bad := range [][]Event{{}, {Allowed, Allowed}, {Event(eventCount)}} {
		_, err := NewCounter(10, 10*time.Second, WithEvents(bad...))
		if !errors.Is(err, config.ErrInvalid) || !contains(err.Error(), "events = ") {
			t.Errorf("WithEvents(%v): %v, want an error naming events", bad, err)
		}
	}
	if _, err := NewHistogram(4, 4*time.Second, WithEvents(Allowed)); err == nil {
		t.Error("WithEvents given to a Histogram: no error")
	}
}

// eventCount is the number of events, as an int.
const eventCount = int(numEvents)

// A view reads within the Counter it was made from, shares its buckets both
// ways, and the view of the whole interval is the Counter itself.
func TestAViewSharesItsCountersBucketsAndReadsWithinIt(t *testing.T) {
	ctr, c := newTestCounter(t, 10, 10*time.Second)
	if v, err := ctr.View(10 * time.Second); err != nil || v != ctr {
		t.Fatalf("View(10s) = %p, %v; want the Counter itself, %p", v, err, ctr)
	}
	three, err := ctr.View(3 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := three.View(4 * time.Second); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("View(4s) of a 3 s view: err = %v, want an config.ErrInvalid", err)
	}
	one, err := three.View(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // one allowed a second, every other one through the view
		c.Set(int64(i) * int64(time.Second))
		if i%2 == 0 {
			ctr.Add(Allowed, 1)
		} else {
			three.Add(Allowed, 1)
		}
	}
	if got := ctr.Sum(Allowed); got != 10 {
		t.Fatalf("Counter reads %d, want 10", got)
	}
	if got := three.Sum(Allowed); got != 3 {
		t.Fatalf("3 s view reads %d, want 3", got)
	}
	if got := one.Sum(Allowed); got != 1 {
		t.Fatalf("1 s view reads %d, want 1", got)
	}
}

// A view shorter than the interval of a Counter made CachedSums reads the
// ring, not the cache of the whole interval.
func TestAShortViewOfACachedCounterReadsOnlyItsBuckets(t *testing.T) {
	c := clock.NewManual(0)
	ctr, err := NewCounter(10, 10*time.Second, WithClock(c), CachedSums())
	if err != nil {
		t.Fatal(err)
	}
	two, _ := ctr.View(2 * time.Second)
	for range 10 {
		ctr.Add(Failed, 1)
		c.Advance(time.Second)
	}
	c.Advance(-time.Second)
	if got := ctr.Sum(Failed); got != 10 {
		t.Fatalf("Counter reads %d, want 10", got)
	}
	if got := two.Sum(Failed); got != 2 {
		t.Fatalf("2 s view reads %d, want 2", got)
	}
}
