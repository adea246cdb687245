package compare

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	sapi "github.com/alibaba/sentinel-golang/api"
	sutil "github.com/alibaba/sentinel-golang/util"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
)

// The per-key memory measurement: the heap a per-key limit takes for many
// distinct keys arriving within one interval, each with one request, in
// slidegate's guard and in sentinel's hotspot rule.
//
// The heap is read (heapAfterGC) after the limiter is made and has seen one
// key, so that what it makes on first use is not counted, and again after
// the keys; everything stays reachable until then. The keys' names are made
// one at a time and let go, so that a key is counted only where a limiter
// keeps it.
//
// Afterwards each limiter is probed for what it remembers: a key that it
// remembers has one request counted, and is allowed at most limit − 1 more
// in the same interval; a key it forgot is allowed limit more.

// KeyMemoryKeys is the number of distinct keys of cmd/keytable's memory
// table.
const KeyMemoryKeys = 1_000_000

// keyProbes is how many keys the slidegate probe tries, spread over all of
// them.
const keyProbes = 1000

// A KeyMemory is what one limiter took for the keys.
type KeyMemory struct {
	Library string
	Keys    int // distinct keys entered, one request each, within one interval
	// Bytes is the heap after the keys less the heap before them, and
	// PerKey that over Keys.
	Bytes  int64
	PerKey float64
	// Remembered is how many keys the limiter still counts after the last
	// one: all of them for slidegate (checked on Probed keys spread over
	// all of them, none of which may be allowed its whole limit again),
	// the most recent ones for sentinel (counted from the last key back to
	// the first it forgot, which is allowed its whole limit again).
	Remembered int
	Probed     int
	// Note says what the limiter keeps for the keys.
	Note string
}

// MeasureKeyMemory measures, for slidegate's guard and sentinel's hotspot
// rule, the heap that keys distinct keys take within one interval under one
// per-key limit of limit per KeyInterval. progress, if not nil, is told how
// long each measurement took.
func MeasureKeyMemory(keys int, limit int64, progress io.Writer) ([]KeyMemory, error) {
	if keys < 2 || limit < 2 {
		return nil, fmt.Errorf("keys %d, limit %d: want at least 2 of each", keys, limit)
	}
	var out []KeyMemory
	for _, m := range []func(int, int64) (KeyMemory, error){guardKeyMemory, hotspotKeyMemory} {
		start := time.Now()
		r, err := m(keys, limit)
		if err != nil {
			return nil, err
		}
		if progress != nil {
			fmt.Fprintf(progress, "keytable: memory, %s, %d keys: %v\n", r.Library, keys, time.Since(start).Round(time.Millisecond))
		}
		out = append(out, r)
	}
	return out, nil
}

// guardKeyMemory enters keys distinct keys on a guard with one per-key rule,
// spread evenly over one interval of a manual clock.
func guardKeyMemory(keys int, limit int64) (KeyMemory, error) {
	c := clock.NewManual(keySimStart)
	g, err := slidegate.New(slidegate.WithClock(c))
	if err != nil {
		return KeyMemory{}, err
	}
	const res = "keyed"
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: res, Limit: limit, Interval: slidegate.Duration(KeyInterval), PerKey: true,
	}}}); err != nil {
		return KeyMemory{}, err
	}
	ctx := context.Background()
	enter := func(key string) bool {
		e, err := g.Enter(ctx, res, slidegate.WithKey(key))
		if err != nil {
			return false
		}
		e.Exit(nil)
		return true
	}
	// The first key makes the rule's tables (the shard it falls in); it
	// is not counted.
	if !enter("first") {
		return KeyMemory{}, fmt.Errorf("slidegate: the first key was refused")
	}
	before := heapAfterGC()
	step := int64(KeyInterval) / int64(keys)
	for i := range keys {
		c.Set(keySimStart + int64(i)*step)
		if !enter(keyName(uint32(i + 1))) {
			return KeyMemory{}, fmt.Errorf("slidegate: key %d of %d, its first request, was refused", i+1, keys)
		}
	}
	after := heapAfterGC()
	r := KeyMemory{Library: "slidegate per-key rule", Keys: keys, Bytes: int64(after) - int64(before),
		Note: "a count for every key in a count-min sketch that grows with the keys, within the budget of the guard's per-key rules (64 MiB by default), and exact windows for the hot keys (none here)"}
	r.PerKey = float64(r.Bytes) / float64(keys)
	// Probe: within the same interval, no key may be allowed its whole
	// limit again.
	probes := min(keyProbes, keys)
	for p := range probes {
		key := keyName(uint32(p*(keys/probes) + 1))
		var allowed int64
		for range limit {
			if enter(key) {
				allowed++
			}
		}
		if allowed >= limit {
			return r, fmt.Errorf("slidegate: %s was allowed %d more in the interval of its first request, limit %d", key, allowed, limit)
		}
	}
	r.Remembered, r.Probed = keys, probes
	runtime.KeepAlive(g)
	return r, nil
}

// hotspotKeyMemory enters keys distinct keys on sentinel's hotspot rule,
// spread evenly over one interval of simulated time.
func hotspotKeyMemory(keys int, limit int64) (KeyMemory, error) {
	prev := sutil.CurrentClock()
	c := new(simClock)
	c.set(simEpoch)
	sutil.SetClock(c)
	defer sutil.SetClock(prev)
	res, unload, err := loadHotspotRule(limit, KeyInterval)
	if err != nil {
		return KeyMemory{}, err
	}
	defer unload()
	enter := func(key string) bool {
		e, blocked := sapi.Entry(res, sapi.WithArgs(key))
		if blocked != nil {
			return false
		}
		e.Exit()
		return true
	}
	// The first key makes the resource's statistics and the rule's
	// caches' first entries; it is not counted.
	if !enter("first") {
		return KeyMemory{}, fmt.Errorf("sentinel: the first key was refused")
	}
	before := heapAfterGC()
	step := int64(KeyInterval) / int64(keys)
	for i := range keys {
		c.set(simEpoch + int64(i)*step)
		if !enter(keyName(uint32(i + 1))) {
			return KeyMemory{}, fmt.Errorf("sentinel: key %d of %d, its first request, was refused", i+1, keys)
		}
	}
	after := heapAfterGC()
	r := KeyMemory{Library: "sentinel hotspot rule", Keys: keys, Bytes: int64(after) - int64(before)}
	r.PerKey = float64(r.Bytes) / float64(keys)
	// Probe from the last key back: each remembered key is allowed at
	// most limit − 1 more, and touching it forgets none of the others (the
	// caches move it to the front); the first key allowed its whole limit
	// again had been forgotten, and so had every key before it, as the
	// caches forget the least recently used first.
	for i := keys; i >= 1; i-- {
		var allowed int64
		for range limit {
			if enter(keyName(uint32(i))) {
				allowed++
			}
		}
		if allowed >= limit {
			break
		}
		r.Remembered++
	}
	r.Probed = r.Remembered + 1
	r.Note = fmt.Sprintf("two LRU caches (when tokens were last added, tokens left) of %s keys each: per key and cache a map entry, a list element, the key boxed in an interface and an *int64; the %s keys before the last %s forgotten",
		thousands(hotspotCapacity(KeyInterval)), thousands(keys-r.Remembered), thousands(r.Remembered))
	return r, nil
}

// WriteKeyMemory writes the per-key memory measurements as a markdown
// table.
func WriteKeyMemory(w io.Writer, rows []KeyMemory) error {
	if _, err := fmt.Fprintf(w, "| limiter | distinct keys in one interval | heap | per key entered | keys it still counts | per key it counts | what it keeps |\n|---|--:|--:|--:|--:|--:|---|\n"); err != nil {
		return err
	}
	for _, r := range rows {
		perCounted := "–"
		if r.Remembered > 0 {
			perCounted = fmt.Sprintf("%.0f B", float64(r.Bytes)/float64(r.Remembered))
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %.1f MiB | %.1f B | %s | %s | %s |\n", r.Library, thousands(r.Keys),
			float64(r.Bytes)/(1<<20), r.PerKey, thousands(r.Remembered), perCounted, r.Note); err != nil {
			return err
		}
	}
	return nil
}
