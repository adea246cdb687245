package flow

import (
	"math"
	"sync"
	"time"
)

// A keyShard is one of a KeyedQPS's 64 shards: the keys whose hash falls in
// it, under one mutex. Everything here is called with mu held.
type keyShard struct {
	mu     sync.Mutex
	index  map[uint64]int32 // hash → hot entry
	hot    []hotKey
	counts []uint32    // hot entry e's counts at [e*stride, (e+1)*stride)
	state  []hotWindow // hot entry e's windows at [e*len(wins), ...)
	names  []byte      // hot entry e's key, cut, at [e*MaxShownKeyLength, ...): copied without allocating
	sketch []keySketch // one per window
	cursor int         // where the search for an entry to displace goes on
	room   int         // the entries its hot keys may have: hotPerShard, doubling up to maxRoom
	pins   int         // the entries its pinned keys have, besides
	// floor is the heat of the least hot entry the last failed search
	// found; until floorUntil, a newcomer no hotter does not search.
	floor, floorUntil int64
	_                 [112]byte // shards side by side share no mutex's cache line
}

// A hotKey is a key with exact windows.
type hotKey struct {
	hash    uint64
	keyLen  uint8   // the bytes of its key in names, cut to MaxShownKeyLength, for Top
	limits  []int64 // an override per window, -1 for none; nil without overrides
	blocked [2]uint32
	blockAt uint64 // first window's generation blocked[blockAt&1] counts
}

// A hotWindow is a hot key's state in one window: the newest bucket it
// counted in and the sum of its counts, which cover that bucket and the k
// before it.
type hotWindow struct {
	last uint64
	sum  int64
}

// init allocates the shard's tables on first use: room for its pinned keys
// and hotPerShard more.
func (s *keyShard) init(q *KeyedQPS) {
	if s.index != nil {
		return
	}
	n := hotPerShard
	for key := range q.pinned {
		if q.shard(q.hash(key)) == s {
			n++
		}
	}
	s.index = make(map[uint64]int32, n)
	s.hot = make([]hotKey, 0, n)
	s.counts = make([]uint32, n*q.stride)
	s.state = make([]hotWindow, n*len(q.wins))
	s.names = make([]byte, n*MaxShownKeyLength)
	s.sketch = make([]keySketch, len(q.wins))
	s.room = hotPerShard
}

// maxRoom is the most entries a shard's hot keys may have: 8 MiB of
// entries per window in all the shards, and at least hotPerShard.
func (q *KeyedQPS) maxRoom() int {
	return max(hotPerShard, hotBytesPerWindow*len(q.wins)/keyShards/hotEntryBytes(len(q.wins), q.stride))
}

// take gives key (hash h) a hot entry, empty, and returns it; the caller
// fills it. The shard must have a free entry or one to displace (see
// promote).
func (s *keyShard) take(q *KeyedQPS, h uint64, key string) int32 {
	e := int32(len(s.hot))
	s.hot = append(s.hot, hotKey{})
	if n := cap(s.hot); len(s.state) < n*len(q.wins) {
		// The entries grew, or a key was pinned after they were made.
		s.counts = append(s.counts, make([]uint32, n*q.stride-len(s.counts))...)
		s.state = append(s.state, make([]hotWindow, n*len(q.wins)-len(s.state))...)
		s.names = append(s.names, make([]byte, n*MaxShownKeyLength-len(s.names))...)
	}
	s.fill(q, e, h, key)
	return e
}

// fill makes entry e key's, with empty windows.
func (s *keyShard) fill(q *KeyedQPS, e int32, h uint64, key string) {
	name := key[:min(len(key), MaxShownKeyLength)]
	copy(s.names[int(e)*MaxShownKeyLength:], name)
	s.hot[e] = hotKey{hash: h, keyLen: uint8(len(name))}
	clear(s.counts[int(e)*q.stride : int(e+1)*q.stride])
	clear(s.state[int(e)*len(q.wins) : int(e+1)*len(q.wins)])
	s.index[h] = e
}

// decide is KeyedQPS.AllowNAt for a key of this shard.
func (s *keyShard) decide(q *KeyedQPS, h uint64, key string, now int64, n int64) (Decision, int) {
	if s.index == nil {
		s.init(q)
	}
	if e, ok := s.index[h]; ok {
		return s.decideHot(q, e, now, n)
	}
	// A cold key: estimate it in every window, and promote it if it uses
	// more than half a window's limit.
	est, at := s.estimates(q, h, now) // per window: previous and current generation
	promote := false
	for j := range q.wins {
		if w := &q.wins[j]; w.limit > 0 && 2*(est[j][0]+est[j][1]+n) > w.limit {
			promote = true
		}
	}
	if promote {
		if e, ok := s.promote(q, h, key, now, &est, &at); ok {
			return s.decideHot(q, e, now, n)
		}
	}
	for j := range q.wins {
		w := &q.wins[j]
		if n > w.limit {
			return Decision{Reason: ExceedsLimit}, j
		}
		if est[j][0]+est[j][1]+n > w.limit {
			// The previous generation leaves the window when the next one
			// opens; if the current one is already too full, the one after.
			g := at[j]/w.k + 1
			if est[j][1]+n > w.limit {
				g++
			}
			return Decision{Reason: RateLimited, RetryAfter: time.Duration(max(w.grid.Start(g*w.k)-now, 1))}, j
		}
	}
	for j := range q.wins {
		s.sketch[j].add(h, est[j][1]+n)
	}
	return allowed, -1
}

// decideHot decides for hot entry e, and counts the requests in every
// window if each allows them.
func (s *keyShard) decideHot(q *KeyedQPS, e int32, now int64, n int64) (Decision, int) {
	hk := &s.hot[e]
	nw := len(q.wins)
	for j := range q.wins {
		w := &q.wins[j]
		hw, c := s.window(q, e, j)
		hw.advance(c, w.grid.Index(now), w.k)
		limit := w.limit
		if hk.limits != nil && hk.limits[j] >= 0 {
			limit = hk.limits[j]
		}
		if n > limit {
			s.blocked(q, hk, now, n)
			return Decision{Reason: ExceedsLimit}, j
		}
		if hw.sum+n > limit {
			s.blocked(q, hk, now, n)
			return Decision{Reason: RateLimited, RetryAfter: hw.retryAfter(c, w, hw.sum+n-limit, now)}, j
		}
	}
	for j := 0; j < nw; j++ {
		hw, c := s.window(q, e, j)
		c[hw.last%uint64(len(c))] += uint32(n)
		hw.sum += n
	}
	return allowed, -1
}

// window returns hot entry e's state and counts in window j.
func (s *keyShard) window(q *KeyedQPS, e int32, j int) (*hotWindow, []uint32) {
	w := &q.wins[j]
	base := int(e)*q.stride + w.off
	return &s.state[int(e)*len(q.wins)+j], s.counts[base : base+int(w.k)+1]
}

// blocked counts n requests of hot key hk refused at time now.
func (s *keyShard) blocked(q *KeyedQPS, hk *hotKey, now int64, n int64) {
	w := &q.wins[0]
	g := w.grid.Index(now) / w.k
	switch {
	case g == hk.blockAt+1:
		hk.blocked[g&1] = 0
	case g > hk.blockAt+1:
		hk.blocked = [2]uint32{}
	}
	if g > hk.blockAt {
		hk.blockAt = g
	}
	hk.blocked[hk.blockAt&1] = clampCount(int64(hk.blocked[hk.blockAt&1]) + n)
}

// stat is what Top says of hot entry e at time now.
func (s *keyShard) stat(q *KeyedQPS, e int32, now int64) KeyStat {
	hk := &s.hot[e]
	w := &q.wins[0]
	hw, c := s.window(q, e, 0)
	hw.advance(c, w.grid.Index(now), w.k)
	st := KeyStat{Key: string(s.names[int(e)*MaxShownKeyLength:][:hk.keyLen]), Allowed: hw.sum}
	if g := w.grid.Index(now) / w.k; g <= hk.blockAt+1 {
		st.Blocked = int64(hk.blocked[hk.blockAt&1])
		if g == hk.blockAt {
			st.Blocked += int64(hk.blocked[(hk.blockAt+1)&1])
		}
	}
	return st
}

// advance moves the window on to bucket b, dropping the counts of the
// buckets that leave it; a bucket before the newest it counted in counts
// as that one.
func (hw *hotWindow) advance(c []uint32, b uint64, k uint64) {
	if b <= hw.last {
		return
	}
	if b-hw.last > k {
		clear(c)
		hw.sum = 0
	} else {
		for x := hw.last + 1; x <= b; x++ {
			p := x % (k + 1)
			hw.sum -= int64(c[p])
			c[p] = 0
		}
	}
	hw.last = b
}

// retryAfter is how long from now until the window, which holds over
// more than its limit with the request, has let enough of its oldest
// buckets go.
func (hw *hotWindow) retryAfter(c []uint32, w *keyWindow, over int64, now int64) time.Duration {
	var freed int64
	for m := uint64(0); m <= w.k; m++ {
		x := hw.last - w.k + m // bucket x leaves when bucket x+k+1 opens
		freed += int64(c[x%(w.k+1)])
		if freed >= over {
			return time.Duration(max(w.grid.Start(x+w.k+1)-now, 1))
		}
	}
	return time.Duration(max(w.grid.Start(hw.last+w.k+1)-now, 1))
}

// promote gives key (hash h) a hot entry seeded from its estimates, if the
// shard has a free one or one whose key is less hot, and reports whether
// it did. est and at are the key's estimates and buckets per window.
func (s *keyShard) promote(q *KeyedQPS, h uint64, key string, now int64, est *[MaxKeyWindows][2]int64, at *[MaxKeyWindows]uint64) (int32, bool) {
	var e int32
	if len(s.hot) < s.room+s.pins {
		e = s.take(q, h, key)
	} else {
		heat := int64(0)
		for j := range q.wins {
			heat = max(heat, share(est[j][0]+est[j][1], q.wins[j].limit))
		}
		// Every entry hotter than the newcomer, when last looked at: a
		// search would fail again, until a bucket later entries cool.
		if heat <= s.floor && now < s.floorUntil {
			return 0, false
		}
		v, least := s.victim(q, now)
		switch {
		case least < heat:
			s.evict(q, v, now)
			e = v
			s.fill(q, e, h, key)
		case s.room < q.maxRoom():
			// Every entry looked at is as hot as the newcomer: more keys
			// use over half their limits than the shard has room for, so
			// it makes more, up to its bound.
			s.room = min(2*s.room, q.maxRoom())
			e = s.take(q, h, key)
		default:
			s.floor, s.floorUntil = least, now+q.wins[0].grid.Width
			return 0, false
		}
	}
	s.seed(q, e, est, at)
	return e, true
}

// seed fills hot entry e's windows, empty, with the key's estimates in the
// sketch; est and at are the estimates and the buckets they count in, per
// window.
func (s *keyShard) seed(q *KeyedQPS, e int32, est *[MaxKeyWindows][2]int64, at *[MaxKeyWindows]uint64) {
	for j := range q.wins {
		w := &q.wins[j]
		hw, c := s.window(q, e, j)
		b := at[j]
		hw.last = b
		c[b%(w.k+1)] = clampCount(est[j][1])
		// The previous generation's count goes in its last bucket, which
		// lies in the window: b/k*k - 1 >= b - k.
		if first := b / w.k * w.k; est[j][0] > 0 && first > 0 {
			c[(first-1)%(w.k+1)] = clampCount(est[j][0])
		}
		hw.sum = est[j][0] + est[j][1]
	}
}

// estimates returns the key's estimates in the sketch of every window, and
// the buckets they count in, at time now.
func (s *keyShard) estimates(q *KeyedQPS, h uint64, now int64) (est [MaxKeyWindows][2]int64, at [MaxKeyWindows]uint64) {
	for j := range q.wins {
		k := &s.sketch[j]
		at[j] = k.advance(&q.wins[j], now)
		est[j] = k.estimate(h)
	}
	return est, at
}

// share is count as a share of limit, in 1/1024ths.
func share(count, limit int64) int64 {
	if limit == 0 {
		return 1 << 40
	}
	return count << 10 / limit
}

// victim looks at a few entries, from where the last search stopped, and
// returns the least hot one that is not pinned, and its heat (the share of
// a limit it uses, the most over its windows); a heat of MaxInt64 if all
// it looked at are pinned.
func (s *keyShard) victim(q *KeyedQPS, now int64) (int32, int64) {
	const look = 8
	best, bestHeat := int32(-1), int64(math.MaxInt64)
	for range look {
		e := int32(s.cursor % len(s.hot))
		s.cursor++
		if s.hot[e].limits != nil {
			continue
		}
		h := int64(0)
		for j := range q.wins {
			w := &q.wins[j]
			hw, c := s.window(q, e, j)
			hw.advance(c, w.grid.Index(now), w.k)
			h = max(h, share(hw.sum, w.limit))
		}
		if h < bestHeat {
			best, bestHeat = e, h
		}
	}
	return best, bestHeat
}

// evict takes hot entry e from its key, handing the key's counts back to
// the sketch: in each window, each generation's counters of the key are
// raised to at least what the entry counted in that generation's buckets.
func (s *keyShard) evict(q *KeyedQPS, e int32, now int64) {
	hk := &s.hot[e]
	for j := range q.wins {
		w := &q.wins[j]
		k := &s.sketch[j]
		hw, c := s.window(q, e, j)
		// The sketch moves on to the entry's newest bucket if a caller's
		// time is earlier (a caller that read the clock, then stalled):
		// every count of the entry then lies in one of its generations.
		k.advance(w, max(now, w.grid.Start(hw.last)))
		var sum [2]int64 // previous and current generation
		for m := uint64(0); m <= w.k; m++ {
			if m > hw.last {
				break
			}
			x := hw.last - m
			switch x / w.k {
			case k.gen:
				sum[1] += int64(c[x%(w.k+1)])
			case k.gen - 1:
				sum[0] += int64(c[x%(w.k+1)])
			}
		}
		k.raise(hk.hash, k.gen-1, sum[0])
		k.raise(hk.hash, k.gen, sum[1])
	}
	delete(s.index, hk.hash)
}

// drop evicts hot entry e, and gives its place to the last entry, so that
// the entries in use stay the first len(hot).
func (s *keyShard) drop(q *KeyedQPS, e int32, now int64) {
	s.evict(q, e, now)
	last := int32(len(s.hot) - 1)
	if e != last {
		s.hot[e] = s.hot[last]
		nw := len(q.wins)
		copy(s.counts[int(e)*q.stride:int(e+1)*q.stride], s.counts[int(last)*q.stride:])
		copy(s.state[int(e)*nw:int(e+1)*nw], s.state[int(last)*nw:])
		copy(s.names[int(e)*MaxShownKeyLength:int(e+1)*MaxShownKeyLength], s.names[int(last)*MaxShownKeyLength:])
		s.index[s.hot[e].hash] = e
	}
	s.hot = s.hot[:last]
}
