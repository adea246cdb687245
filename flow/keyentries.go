package flow

import (
	"math"

	"github.com/slidegate/slidegate/internal/flowlimits"
)

// The entries of a shard, and who gets one. An entry costs what a key
// loses when it has none. In the sketch a key is allowed while its two
// generations hold at most its limit, which a key paced evenly above half
// its limit overruns; a key at half its limit or below loses nothing there
// (but for collisions). A key refused in its entry is over a limit, and is
// owed nothing more than what the sketch allows it. So a newcomer takes,
// in this order:
//
//   - a free entry, even at its first request, so that a key that will be
//     busy starts exact, with nothing seeded from the sketch;
//   - one whose key was refused in its first window's current or last
//     generation (not for counts its entry was seeded with): one of the
//     last few marked so, or one found among a few entries looked at from
//     a cursor that goes round, as is one that counts nothing;
//   - if the sketch allows its request, a new entry, while the budget has
//     the bytes: while the entries take less than a sixty-fourth of the
//     budget, or less than half for a key over half its limit;
//   - if the sketch allows its request and it is over half its limit
//     there, the least used entry of those looked at whose key is below
//     half its limit.
//
// An entry of a key that is within its limit and at half of it or more is
// never taken. A search that finds nothing spares the newcomers that come
// next and that it speaks for (spared): 16 of them after one such search,
// twice as many after each next one, up to maxSkip, until a search finds
// an entry; so that a flood of distinct keys, which finds none, pays for
// few searches.
const (
	victimLook = 8
	maxSkip    = 1024
	halfShare  = 512 // half a limit, in 1/1024ths
)

// share is count as a share of limit, in 1/1024ths.
func share(count, limit int64) int64 {
	if limit == 0 {
		return 1 << 40
	}
	return count << 10 / limit
}

// promote gives key (hash h) an entry seeded from its estimates, if the
// shard has one to give it, and reports whether it did. est and at are the
// key's estimates and buckets per window; n is what it asks.
func (s *keyShard) promote(q *KeyedQPS, h uint64, key string, now int64, n int64, est *[flowlimits.MaxKeyWindows][2]int64, at *[flowlimits.MaxKeyWindows]uint64) (int32, bool) {
	var e int32
	switch {
	case len(s.hot) < cap(s.hot):
		e = s.take(h, key)
	case s.overN > 0 && s.lastOver(now, &e):
		e = s.displace(q, e, h, key, now)
	case s.skip > 0 && s.spared(est, n):
		s.skip--
		return 0, false
	default:
		cfg := s.cfg
		need, refusing := int64(0), false
		for j := range cfg.wins {
			c := est[j][0] + est[j][1] + n
			need = max(need, share(c, cfg.wins[j].limit))
			refusing = refusing || c > cfg.wins[j].limit
		}
		v, worth := s.victim(now)
		switch {
		case worth <= 0:
			e = s.displace(q, v, h, key, now)
		case !refusing && s.mayGrow(q, need) && s.grow(q):
			e = s.take(h, key)
		case !refusing && need > halfShare && worth < halfShare && worth < need:
			e = s.displace(q, v, h, key, now)
		default:
			// A newcomer the sketch refuses may take only refused and idle
			// entries, which the search did not find: it speaks for the
			// like of it. One it allows speaks for those that need no more.
			if s.missed == 0 {
				s.skipNeed = -1
			}
			if !refusing {
				s.skipNeed = max(s.skipNeed, need)
			}
			s.missed = min(max(2*s.missed, 16), maxSkip)
			s.skip = s.missed
			return 0, false
		}
		s.missed = 0
	}
	// Refusals owed to the seed do not mark the key over its limit.
	hk := &s.hot[e]
	hk.calm = s.seed(e, est, at)
	hk.seeded = [2]uint32{clampCount(est[0][0]), clampCount(est[0][1])}
	hk.seedAt = at[0]
	return e, true
}

// spared reports whether the searches that found nothing since the last
// that found an entry speak for a newcomer with estimates est, asking n:
// it is refused by the sketch, or needs no more of any limit than one
// allowed by it whose search found nothing (skipNeed, -1 for none).
func (s *keyShard) spared(est *[flowlimits.MaxKeyWindows][2]int64, n int64) bool {
	within := true
	for j := range s.cfg.wins {
		c, l := est[j][0]+est[j][1]+n, s.cfg.wins[j].limit
		if c > l {
			return true
		}
		within = within && c<<10 < (s.skipNeed+1)*l // share(c, l) <= skipNeed
	}
	return within
}

// lastOver pops the entries last marked over a limit until one still is
// at time now, and reports whether it found one, in e: an entry may have
// changed hands, or moved, since it was marked.
func (s *keyShard) lastOver(now int64, e *int32) bool {
	w := &s.cfg.wins[0]
	g := w.grid.Index(now) / w.k
	for s.overN > 0 {
		s.overN--
		x := s.over[s.overN]
		if int(x) < len(s.hot) && s.hot[x].pin == nil && s.hot[x].overAt+1 >= g {
			*e = x
			return true
		}
	}
	return false
}

// displace gives key (hash h) entry v, whose key's counts go back to the
// sketch, and returns it.
func (s *keyShard) displace(q *KeyedQPS, v int32, h uint64, key string, now int64) int32 {
	s.evict(q, v, now)
	s.fill(v, h, key)
	return v
}

// victim looks at victimLook entries from the cursor, and returns the one
// least worth keeping that has no override, and its worth: -1 for a key
// over a limit (the first found), 0 for one its windows count nothing of,
// otherwise the largest share of a limit it asked in a window, at least 1;
// MaxInt64 if all it looked at have overrides.
func (s *keyShard) victim(now int64) (int32, int64) {
	cfg := s.cfg
	var b [flowlimits.MaxKeyWindows]uint64
	for j := range cfg.wins {
		b[j] = cfg.wins[j].grid.Index(now)
	}
	g := b[0] / cfg.wins[0].k
	nw := len(cfg.wins)
	best, least := int32(-1), int64(math.MaxInt64)
	for range victimLook {
		e := int32(s.cursor % len(s.hot))
		s.cursor++
		hk := &s.hot[e]
		if hk.pin != nil {
			continue
		}
		if hk.overAt+1 >= g {
			return e, -1
		}
		// What the key asked: what its windows count, and in the first,
		// what was refused in its current and last generation; at least 1
		// if it asked anything, however far below its limit.
		worth := int64(0)
		for j := range cfg.wins {
			if hw := &s.state[int(e)*nw+j]; hw.sum > 0 && hw.last+cfg.wins[j].k >= b[j] {
				asked := hw.sum
				if j == 0 && hk.blockAt+1 >= g {
					asked += int64(hk.blocked[0]) + int64(hk.blocked[1])
				}
				worth = max(worth, share(asked, cfg.wins[j].limit), 1)
			}
		}
		if worth < least {
			best, least = e, worth
		}
	}
	return best, least
}

// mayGrow reports whether the shard's entries may grow for a newcomer that
// needs the given share of its limit: while they take less than a
// sixty-fourth of the shard's share of the budget, or, for a newcomer
// over half its limit, less than half of it; the rest is the sketch's.
func (s *keyShard) mayGrow(q *KeyedQPS, need int64) bool {
	b := s.cfg.entriesBytes(cap(s.hot)) * keyShards
	return b < q.acct.mem.limit/64 || need > halfShare && b < q.acct.mem.limit/2
}

// trim halves the entries hot keys may take, at time now, if fewer than a
// quarter of them count anything: the entries of idle keys go, and their
// bytes back to the budget. Once a generation, so that entries a flood
// grew go back a step at a time when it has passed.
func (s *keyShard) trim(q *KeyedQPS, now int64) {
	if s.room <= floorRoom || s.busy(now) >= s.room/4 {
		return
	}
	for e := int32(len(s.hot) - 1); e >= 0 && len(s.hot) > s.room/2+s.pins; e-- {
		if s.hot[e].pin == nil && s.idle(e, now) {
			s.drop(q, e, now)
		}
	}
	if len(s.hot) <= s.room/2+s.pins {
		s.room /= 2
		s.resize(q, s.room+s.pins, true)
	}
}

// busy returns how many entries without overrides count something at time
// now.
func (s *keyShard) busy(now int64) int {
	n := 0
	for e := range s.hot {
		if s.hot[e].pin == nil && !s.idle(int32(e), now) {
			n++
		}
	}
	return n
}

// idle reports whether entry e counts nothing in any window at time now.
func (s *keyShard) idle(e int32, now int64) bool {
	nw := len(s.cfg.wins)
	for j := range s.cfg.wins {
		w := &s.cfg.wins[j]
		if hw := &s.state[int(e)*nw+j]; hw.sum > 0 && hw.last+w.k >= w.grid.Index(now) {
			return false
		}
	}
	return true
}

// grow doubles the entries hot keys may take, if the budget has the bytes,
// and reports whether it did.
func (s *keyShard) grow(q *KeyedQPS) bool {
	if n := 2*s.room + s.pins; n > cap(s.hot) && !s.resize(q, n, false) {
		return false
	}
	s.room *= 2
	return true
}

// entriesBytes is the heap of n entries and their index.
func (c *keyConfig) entriesBytes(n int) int64 {
	return int64(n)*c.entryBytes() + keyIndexBytes(n)
}

// resize allocates exactly n entries, keeping those in use (at most n),
// and their index. A floor takes the bytes whatever the budget has;
// otherwise resize reports false, and changes nothing, if the budget lacks
// them.
func (s *keyShard) resize(q *KeyedQPS, n int, floor bool) bool {
	cfg := s.cfg
	have := cap(s.hot)
	if n == have {
		return true
	}
	switch d := cfg.entriesBytes(n) - cfg.entriesBytes(have); {
	case d < 0:
		q.acct.give(-d)
	case floor:
		q.acct.take(d)
	case !q.acct.grow(d):
		return false
	}
	nw := len(cfg.wins)
	hot := make([]hotKey, len(s.hot), n)
	copy(hot, s.hot)
	counts := make([]uint32, n*cfg.stride)
	copy(counts, s.counts[:len(s.hot)*cfg.stride])
	state := make([]hotWindow, n*nw)
	copy(state, s.state[:len(s.hot)*nw])
	names := make([]byte, n*flowlimits.MaxShownKeyLength)
	copy(names, s.names[:len(s.hot)*flowlimits.MaxShownKeyLength])
	s.hot, s.counts, s.state, s.names = hot, counts, state, names
	s.index = newKeyIndex(n)
	for e := range s.hot {
		s.index.put(s.hot[e].hash, int32(e), s.hot)
	}
	return true
}

// take gives key (hash h) a free entry, empty, and returns it.
func (s *keyShard) take(h uint64, key string) int32 {
	e := int32(len(s.hot))
	s.hot = s.hot[:e+1]
	s.fill(e, h, key)
	return e
}

// fill makes entry e key's, with empty windows.
func (s *keyShard) fill(e int32, h uint64, key string) {
	cfg := s.cfg
	name := key[:min(len(key), flowlimits.MaxShownKeyLength)]
	copy(s.names[int(e)*flowlimits.MaxShownKeyLength:], name)
	s.hot[e] = hotKey{hash: h, keyLen: uint8(len(name))}
	clear(s.counts[int(e)*cfg.stride : int(e+1)*cfg.stride])
	clear(s.state[int(e)*len(cfg.wins) : int(e+1)*len(cfg.wins)])
	s.index.put(h, e, s.hot)
}

// evict takes hot entry e from its key, handing the key's counts back to
// the sketch: in each window, each generation's counters of the key are
// raised to at least what the entry counted in that generation's buckets.
// Buckets the window no longer holds at time now are left out: what they
// counted happened an interval or more before now, and no interval ending
// now or later holds it.
func (s *keyShard) evict(q *KeyedQPS, e int32, now int64) {
	hk := &s.hot[e]
	for j := range s.cfg.wins {
		w := &s.cfg.wins[j]
		hw, c := s.window(e, j)
		// The sketch moves on to the entry's newest bucket if a caller's
		// time is earlier (a caller that read the clock, then stalled):
		// every count of the entry then lies in one of its generations.
		s.advanceSketch(q, j, max(now, w.grid.Start(hw.last)))
		k := &s.sketch[j]
		b := w.grid.Index(now)
		var sum [2]int64 // previous and current generation
		for m := uint64(0); m <= w.k && m <= hw.last && hw.last-m+w.k >= b; m++ {
			x := hw.last - m
			switch x / w.k {
			case k.gen:
				sum[1] += int64(c[x%(w.k+1)])
			case k.gen - 1:
				sum[0] += int64(c[x%(w.k+1)])
			}
		}
		sl := k.slots(hk.hash)
		k.raise(&sl, k.gen-1, sum[0])
		k.raise(&sl, k.gen, sum[1])
	}
	s.index.remove(hk.hash, e, s.hot)
}

// drop evicts hot entry e, and gives its place to the last entry, so that
// the entries in use stay the first len(hot).
func (s *keyShard) drop(q *KeyedQPS, e int32, now int64) {
	s.evict(q, e, now)
	last := int32(len(s.hot) - 1)
	if e != last {
		cfg := s.cfg
		s.hot[e] = s.hot[last]
		nw := len(cfg.wins)
		copy(s.counts[int(e)*cfg.stride:int(e+1)*cfg.stride], s.counts[int(last)*cfg.stride:])
		copy(s.state[int(e)*nw:int(e+1)*nw], s.state[int(last)*nw:])
		copy(s.names[int(e)*flowlimits.MaxShownKeyLength:int(e+1)*flowlimits.MaxShownKeyLength], s.names[int(last)*flowlimits.MaxShownKeyLength:])
		s.index.put(s.hot[e].hash, e, s.hot)
	}
	s.hot = s.hot[:last]
}

// pin gives the keys with overrides of shard id in the shard's
// configuration their entries: each takes the one it has, or a new one
// seeded from the sketch, for good. A key no longer pinned keeps its entry
// as any hot key does, but for the entries hot keys may take: the surplus
// goes back to the sketch, idle keys first, so that overrides that change
// at every reload do not grow the entries. The entries are allocated anew
// only when they do not fit, or take over twice what they need.
func (s *keyShard) pin(q *KeyedQPS, id int, now int64) {
	pins := s.cfg.pins[id]
	missing := 0
	for e := range s.hot {
		s.hot[e].pin = nil
	}
	for x := range pins {
		if _, ok := s.index.find(pins[x].hash, s.hot); !ok {
			missing++
		}
	}
	s.pins = len(pins)
	if need := len(s.hot) + missing; need > cap(s.hot) {
		s.resize(q, need, true)
	}
	for x := range pins {
		p := &pins[x]
		e, ok := s.index.find(p.hash, s.hot)
		if !ok {
			// A cold key until now: its counts in the sketch come along.
			var est [flowlimits.MaxKeyWindows][2]int64
			var at [flowlimits.MaxKeyWindows]uint64
			s.estimates(q, p.hash, now, &est, &at)
			e = s.take(p.hash, p.key)
			s.seed(e, &est, &at)
		}
		s.hot[e].pin = p
	}
	want := s.room + s.pins
	for _, idleOnly := range []bool{true, false} {
		for e := int32(len(s.hot) - 1); e >= 0 && len(s.hot) > want; e-- {
			if s.hot[e].pin == nil && (!idleOnly || s.idle(e, now)) {
				s.drop(q, e, now)
			}
		}
	}
	if cap(s.hot) < want || cap(s.hot) > 2*want {
		s.resize(q, want, true)
	}
}
