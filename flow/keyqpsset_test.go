package flow

import (
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// overrides returns n overrides named prefix-0 … of the given limit.
func overrides(prefix string, n int, limit int64) map[string]int64 {
	o := make(map[string]int64, n)
	for i := range n {
		o[prefix+strconv.Itoa(i)] = limit
	}
	return o
}

// TestSetHoldsOneShardAtATime: a reload of 10,000 overrides holds one
// shard's mutex at a time, so that a decision waits at most for one
// shard's share of the reload, not for the whole of it: while Set holds a
// shard's, every other shard's is free.
func TestSetHoldsOneShardAtATime(t *testing.T) {
	c := clock.NewManual(0)
	w := KeyWindow{Limit: 10, Interval: time.Second, Overrides: overrides("a-", 10000, 50)}
	q := mustKeyed(t, c, w)
	for i := range 20000 { // hot entries and sketches in every shard
		q.AllowNAt(int64(i), "user-"+strconv.Itoa(i), 6)
	}
	held, seen := 0, map[int]bool{}
	reshaped = func(shard int) {
		seen[shard] = true
		for i := range q.shards {
			if i == shard {
				continue
			}
			if !q.shards[i].mu.TryLock() {
				held++
				continue
			}
			q.shards[i].mu.Unlock()
		}
	}
	defer func() { reshaped = nil }()
	for round := range 3 {
		w.Overrides = overrides("r"+strconv.Itoa(round)+"-", 10000, int64(round))
		w.Limit = int64(10 + round)
		if err := q.Set([]KeyWindow{w}); err != nil {
			t.Fatal(err)
		}
	}
	if held > 0 || len(seen) != keyShards {
		t.Fatalf("Set reshaped %d shards, and held %d other shards' mutexes while it did", len(seen), held)
	}
	for i := range 100 {
		if d, _ := q.AllowNAt(30000, "r2-"+strconv.Itoa(i), 3); d.Allowed {
			t.Fatalf("key %d allowed 3 under its override of 2", i)
		}
	}
}

// TestKeyedQPSSetAddsAWindowKeepingTheCounts: a reload that adds an hourly
// window to a per-second one keeps the second's counts: a key that used its
// 5 before the reload gets none more at the same instant.
func TestKeyedQPSSetAddsAWindowKeepingTheCounts(t *testing.T) {
	c := clock.NewManual(0)
	sec := KeyWindow{Limit: 5, Interval: time.Second}
	q := mustKeyed(t, c, sec)
	got := admissions{}
	ask := func(at int64, n int) {
		for range n {
			if d, _ := q.AllowNAt(at, "u", 1); d.Allowed {
				got.add("u", at, 1)
			}
		}
	}
	ask(100, 10)
	hour := KeyWindow{Limit: 7, Interval: time.Hour}
	if err := q.Set([]KeyWindow{sec, hour}); err != nil {
		t.Fatalf("Set adding a window: %v", err)
	}
	ask(100, 10)
	got.check(t, sec)
	if n := len(got["u"]); n != 5 {
		t.Fatalf("allowed %d at one instant across the reload, limit 5", n)
	}
	// The hourly window counts from the reload, with what the per-second
	// window held then: 5 of its 7 are used, 2 are left for the hour, and
	// none until the hour from the reload has passed.
	ask(int64(2*time.Second), 10)
	ask(int64(59*time.Minute), 10)
	if n := len(got["u"]); n != 7 {
		t.Fatalf("allowed %d in the hour from the reload, limit 7", n)
	}
}

// TestKeyedQPSSetRemovesAndReordersWindows: windows are matched by interval
// and buckets, whatever their order; a window removed stops counting, and
// the ones kept keep their counts under their new limits. Refusals name the
// window by its place in the new list.
func TestKeyedQPSSetRemovesAndReordersWindows(t *testing.T) {
	c := clock.NewManual(0)
	sec := KeyWindow{Limit: 3, Interval: time.Second}
	minute := KeyWindow{Limit: 4, Interval: time.Minute, Buckets: 6}
	day := KeyWindow{Limit: 1000, Interval: 24 * time.Hour}
	q := mustKeyed(t, c, sec, minute, day)
	for _, key := range []string{"a", "b"} {
		for range 3 {
			if d, j := q.AllowNAt(0, key, 1); !d.Allowed {
				t.Fatalf("key %s refused by window %d", key, j)
			}
		}
	}
	// The minute first, the day gone, a new hour; the second's limit
	// lowered to 2, the minute's raised to 5.
	hour := KeyWindow{Limit: 100, Interval: time.Hour}
	sec.Limit, minute.Limit = 2, 5
	if err := q.Set([]KeyWindow{minute, hour, sec}); err != nil {
		t.Fatalf("Set reordering windows: %v", err)
	}
	if d, j := q.AllowNAt(1, "a", 1); d.Allowed || j != 2 {
		t.Fatalf("a, 3 counted this second under a new limit of 2: %+v by window %d, want refused by window 2", d, j)
	}
	// A second later the second's counts are gone; the minute holds 3 of
	// 5: two more.
	later := int64(2 * time.Second)
	for i := range 2 {
		if d, j := q.AllowNAt(later+int64(i), "b", 1); !d.Allowed {
			t.Fatalf("b refused its request %d of the minute's 2 left, by window %d", i, j)
		}
	}
	if d, j := q.AllowNAt(later+2, "b", 1); d.Allowed || j != 0 {
		t.Fatalf("b, 5 counted this minute: %+v by window %d, want refused by window 0", d, j)
	}
	// Bad windows change nothing.
	if err := q.Set([]KeyWindow{{Limit: 1, Interval: time.Second, Buckets: 3}, {Limit: -1, Interval: time.Hour}}); err == nil {
		t.Fatal("Set accepted a limit of -1")
	}
	if d, _ := q.AllowNAt(later+3, "b", 1); d.Allowed {
		t.Fatal("a refused Set changed the limits")
	}
	// Two windows of one interval and buckets are matched in order: the
	// minute's counts stay with the first minute window, and the second,
	// new, is seeded from the minute in force.
	looser := minute
	looser.Limit = 100
	if err := q.Set([]KeyWindow{looser, minute}); err != nil {
		t.Fatal(err)
	}
	if d, j := q.AllowNAt(later+4, "b", 1); d.Allowed || j != 1 {
		t.Fatalf("b, 5 counted this minute: %+v by window %d, want refused by window 1, the new minute of 5, seeded with the 5", d, j)
	}
	if err := q.Set([]KeyWindow{minute, looser}); err != nil {
		t.Fatal(err)
	}
	if d, j := q.AllowNAt(later+5, "b", 1); d.Allowed || j != 0 {
		t.Fatalf("b: %+v by window %d, want refused by window 0, which kept the minute's counts", d, j)
	}
}

// TestKeyedQPSSetSeedsANewWindowFromTheSketch: a key counted in the sketch
// when a reload adds a window brings its counts into the new window's
// sketch: 2 used of a new hourly 3, 1 left.
func TestKeyedQPSSetSeedsANewWindowFromTheSketch(t *testing.T) {
	c := clock.NewManual(0)
	sec := KeyWindow{Limit: 6, Interval: time.Second}
	none, _ := NewKeyMemory(0) // the shard keeps its floor of entries
	q, err := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{sec}, Clock: c, KeyMemory: none})
	if err != nil {
		t.Fatal(err)
	}
	key := "u"
	// Keys of u's shard take every entry, each at 4 of 6: u, at 2, takes
	// none of them.
	for _, k := range keysInShard(q, q.hash(key)>>shardShift, floorRoom, "busy-") {
		for range 4 {
			if d, _ := q.AllowNAt(0, k, 1); !d.Allowed {
				t.Fatal("test setup: a busy key refused")
			}
		}
	}
	for range 2 {
		if d, _ := q.AllowNAt(1, key, 1); !d.Allowed {
			t.Fatal("u refused")
		}
	}
	if _, hot := q.shard(q.hash(key)).index.find(q.hash(key), q.shard(q.hash(key)).hot); hot {
		t.Fatal("test setup: u has an entry")
	}
	if err := q.Set([]KeyWindow{sec, {Limit: 3, Interval: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	allowed := 0
	for _, at := range []time.Duration{2 * time.Second, 10 * time.Minute, 50 * time.Minute} {
		for range 3 {
			if d, _ := q.AllowNAt(int64(at), key, 1); d.Allowed {
				allowed++
			}
		}
	}
	if allowed != 1 {
		t.Fatalf("u allowed %d more in the hour after the reload, with 2 of 3 counted before it", allowed)
	}
}
