package flow

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// A keyConfig is what a KeyedQPS enforces: its windows and the keys with
// overrides. It never changes once made: Set makes a new one and gives it
// to the shards one at a time (keyShard.reshape), each under its own mutex,
// so that a reload stalls a decision for at most one shard's share of it.
type keyConfig struct {
	wins   []keyWindow
	stride int // counts per hot entry: the windows' k+1 counts, end to end
	// pinned are the keys with overrides: their limits per window, -1 for
	// the window's own limit; pins are the same, by shard and with their
	// hashes, made before any shard is locked.
	pinned map[string][]int64
	pins   [keyShards][]keyPin
}

// A keyPin is a key with overrides, as a hot entry points to it.
type keyPin struct {
	hash   uint64
	key    string
	limits []int64 // per window, -1 for the window's own
}

type keyWindow struct {
	limit    int64
	k        uint64 // buckets per interval
	grid     timegrid.Grid
	off      int // where the window's counts start in an entry's
	interval time.Duration
}

// limitOf is the limit of window j for the hot key with the given pin.
func (c *keyConfig) limitOf(p *keyPin, j int) int64 {
	if p != nil && p.limits[j] >= 0 {
		return p.limits[j]
	}
	return c.wins[j].limit
}

// match returns, for each window of c, the window of old it keeps the
// counts of: the window of the same interval and buckets, the second of a
// shape matched with the second, and so on; or -1.
func (c *keyConfig) match(old *keyConfig) []int {
	from := make([]int, len(c.wins))
	for j := range c.wins {
		from[j] = -1
		nth := 0
		for i := range j {
			if c.wins[i].interval == c.wins[j].interval && c.wins[i].k == c.wins[j].k {
				nth++
			}
		}
		for o := range old.wins {
			if old.wins[o].interval == c.wins[j].interval && old.wins[o].k == c.wins[j].k {
				if nth == 0 {
					from[j] = o
					break
				}
				nth--
			}
		}
	}
	return from
}

// entryBytes is the heap of one hot entry besides its index: its hotKey,
// its key as Top shows it, its windows' states and counts.
func (c *keyConfig) entryBytes() int64 {
	return hotKeyBytes + flowlimits.MaxShownKeyLength + int64(len(c.wins))*hotWindowBytes + int64(c.stride)*4
}

const (
	hotKeyBytes    = 72
	hotWindowBytes = 16
)

// newConfig checks windows and returns them as a keyConfig; a bad one is a
// *configError naming it.
func (q *KeyedQPS) newConfig(windows []KeyWindow) (*keyConfig, error) {
	if len(windows) == 0 || len(windows) > flowlimits.MaxKeyWindows {
		return nil, &configError{Pkg: "flow", Field: "windows", Value: len(windows), Detail: fmt.Sprintf("must be between 1 and %d", flowlimits.MaxKeyWindows)}
	}
	c := &keyConfig{wins: make([]keyWindow, len(windows))}
	for j, w := range windows {
		at := func(field string) string { return fmt.Sprintf("windows[%d].%s", j, field) }
		if w.Limit < 0 || w.Limit > maxLimit {
			return nil, &configError{Pkg: "flow", Field: at("limit"), Value: w.Limit, Detail: fmt.Sprintf("must be between 0 and %d", int64(maxLimit))}
		}
		k := w.Buckets
		if k == 0 {
			k = flowlimits.DefaultKeyBuckets
		}
		if k > flowlimits.MaxKeyBuckets {
			return nil, &configError{Pkg: "flow", Field: at("buckets"), Value: k, Detail: fmt.Sprintf("must be at most %d", flowlimits.MaxKeyBuckets)}
		}
		if we := timegrid.CheckWindow(w.Interval, k); we != nil {
			return nil, &configError{Pkg: "flow", Field: at(we.Arg), Value: we.Value, Detail: we.Detail}
		}
		c.wins[j] = keyWindow{limit: w.Limit, k: uint64(k), grid: alignedGrid(w.Interval, k), off: c.stride, interval: w.Interval}
		c.stride += k + 1
	}
	for j, w := range windows {
		for key, limit := range w.Overrides {
			if limit < 0 || limit > maxLimit {
				return nil, &configError{Pkg: "flow", Field: fmt.Sprintf("windows[%d].overrides", j), Value: fmt.Sprintf("%q: %d", key, limit), Detail: fmt.Sprintf("must be between 0 and %d", int64(maxLimit))}
			}
			if c.pinned == nil {
				c.pinned = make(map[string][]int64, len(w.Overrides))
			}
			l := c.pinned[key]
			if l == nil {
				l = slices.Repeat([]int64{-1}, len(windows))
				c.pinned[key] = l
			}
			l[j] = limit
		}
	}
	all := make([]keyPin, 0, len(c.pinned))
	var n [keyShards]int
	for key, limits := range c.pinned {
		h := q.hash(key)
		all = append(all, keyPin{hash: h, key: key, limits: limits})
		n[h>>shardShift]++
	}
	for i := range c.pins {
		c.pins[i] = make([]keyPin, 0, n[i])
	}
	for _, p := range all {
		c.pins[p.hash>>shardShift] = append(c.pins[p.hash>>shardShift], p)
	}
	return c, nil
}

// alignedGrid returns the grid of the window's buckets, numbered so that
// a generation of the sketch, k buckets from a multiple of k, starts at a
// multiple of the interval on the clock.
func alignedGrid(interval time.Duration, k int) timegrid.Grid {
	w := int64(interval) / int64(k)
	spare := 2 * int64(k)
	spare += (int64(k) - (timegrid.MaxTime/w+2+spare)%int64(k)) % int64(k)
	return timegrid.New(time.Duration(w), spare)
}

// same reports whether c enforces what d does.
func (c *keyConfig) same(d *keyConfig) bool {
	if len(c.wins) != len(d.wins) {
		return false
	}
	for j := range c.wins {
		if c.wins[j].limit != d.wins[j].limit || c.wins[j].interval != d.wins[j].interval || c.wins[j].k != d.wins[j].k {
			return false
		}
	}
	return maps.EqualFunc(c.pinned, d.pinned, slices.Equal)
}

// Set gives the limiter new windows, limits and overrides. A window of the
// same interval and buckets as one in force keeps its counts, under its
// new limit. A window gone stops counting. A new window starts from what
// the kept window of the longest interval up to its own counted. A key
// that loses its override keeps its counts. A bad window is a
// configuration error, and changes nothing.
//
// Set takes the shards' mutexes one at a time, so that a decision waits
// at most for one shard's share of the reload. It reads the clock as it
// takes each.
func (q *KeyedQPS) Set(windows []KeyWindow) error { return q.set(windows, 0, false) }

// SetAt is [KeyedQPS.Set] at time now, for every shard.
func (q *KeyedQPS) SetAt(now int64, windows []KeyWindow) error { return q.set(windows, now, true) }

// set is Set at time now if timed, or else at the clock's time as it
// takes each shard.
func (q *KeyedQPS) set(windows []KeyWindow, now int64, timed bool) error {
	q.setMu.Lock()
	defer q.setMu.Unlock()
	cfg, err := q.newConfig(windows)
	if err != nil {
		return err
	}
	if cfg.same(q.cfg) {
		return nil // a reload that changes nothing here stalls no decision
	}
	q.cfg = cfg
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		if !timed {
			now = q.clock.Now()
		}
		s.reshape(q, i, cfg, now)
		if reshaped != nil {
			reshaped(i)
		}
		s.mu.Unlock()
	}
	return nil
}

// reshaped, if not nil, is called by Set with each shard's mutex held,
// after the shard took the new configuration: tests watch Set with it.
var reshaped func(shard int)
