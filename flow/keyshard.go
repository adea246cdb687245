package flow

import (
	"sync"
	"time"

	"github.com/slidegate/slidegate/internal/flowlimits"
)

// A keyShard is one of a KeyedQPS's 64 shards: the keys whose hash falls in
// it, under one mutex. Everything here is called with mu held.
//
// The bound, whatever happens to a key. Call a record of a key's
// admissions faithful if it counts every admission at a time no earlier
// than the one it happened at and no later than now. An interval of a
// window's length ending at a decision lies within the open bucket and the
// k before it, and within the sketch's two generations; a decision counts
// everything faithfully recorded there, so an allowed request leaves no
// interval over the limit. The records stay faithful through every move
// between them:
//
//   - a key given an entry has its windows seeded from the sketch: the
//     current generation's estimate counted in the open bucket, the
//     previous generation's in the last bucket of that generation, each at
//     least the key's true count, moved no earlier than it happened;
//   - a key losing its entry raises its counters in the sketch, for each
//     generation, to at least the sum of its exact counts in that
//     generation's buckets;
//   - a sketch generation is cleared only once it has left every window;
//     a sketch doubles by copying, halves by taking the larger of two
//     counters, widens by taking its block's largest: no estimate falls;
//   - a reload moves a kept window's counts as they are, and seeds a new
//     window from one in force before it, each count at the end of the
//     bucket it was in, or at the reload, whichever is earlier (no earlier
//     than it happened, and never later than now); a sketch's two
//     generations go, summed, into the new sketch's current one.
type keyShard struct {
	mu     sync.Mutex
	cfg    *keyConfig
	index  keyIndex
	hot    []hotKey    // the entries in use; cap(hot) are allocated
	counts []uint32    // entry e's counts at [e*stride, (e+1)*stride)
	state  []hotWindow // entry e's windows at [e*len(wins), ...)
	names  []byte      // entry e's key, cut, at [e*flowlimits.MaxShownKeyLength, ...): copied without allocating
	sketch []keySketch // one per window
	room   int         // the entries hot keys may take: floorRoom, doubling
	pins   int         // the entries the keys with overrides take, besides
	cursor int         // where the search for an entry to take goes on
	// After a search found no entry to take, the next skip newcomers it
	// speaks for (spared, by skipNeed) do not search; missed is how many
	// the last skip spared, 0 after a search that found one.
	skip, missed int
	skipNeed     int64
	// over are the entries last marked over a limit, newest last: the
	// next newcomers take them without a search.
	over  [8]int32
	overN int
	// saturated counts the decisions whose key's first sketch block began
	// with a word of saturated counters.
	saturated uint64
	_         [64]byte // shards side by side share no mutex's cache line
}

// A hotKey is a key with an entry.
type hotKey struct {
	hash    uint64
	pin     *keyPin // its overrides; nil for none
	blocked [2]uint32
	blockAt uint64 // first window's generation blocked[blockAt&1] counts
	// overAt is the first window's generation of the key's last refusal
	// that shows it over a limit: not one owed to the counts its entry was
	// seeded with from the sketch (seeded, the previous and the current
	// generation's, counted in the first window's buckets before seedAt
	// and at it; calm is when the last seed leaves any window).
	overAt uint64
	calm   int64
	seeded [2]uint32
	seedAt uint64
	keyLen uint8 // the bytes of its key in names, for Top
}

// A hotWindow is a hot key's state in one window: the newest bucket it
// counted in and the sum of its counts, which cover that bucket and the k
// before it.
type hotWindow struct {
	last uint64
	sum  int64
}

// init allocates the shard's tables on first use, taken whatever the
// budget has: floorRoom entries (pin makes room for the keys with
// overrides), and the sketches at their smallest.
func (s *keyShard) init(q *KeyedQPS) {
	if s.sketch != nil {
		return
	}
	s.sketch = make([]keySketch, len(s.cfg.wins))
	var b int64
	for j := range s.sketch {
		s.sketch[j] = newKeySketch(s.cfg.wins[j].limit)
		b += s.sketch[j].bytes()
	}
	s.room = floorRoom
	q.acct.take(b)
	s.resize(q, floorRoom, true)
}

// decide is KeyedQPS.AllowNAt for a key of this shard.
func (s *keyShard) decide(q *KeyedQPS, h uint64, key string, now int64, n int64) (Decision, int) {
	if s.sketch == nil {
		s.init(q)
	}
	// The key's block of the first sketch, read before the index: a key
	// without an entry (most, among many keys) waits for the one while
	// the processor looks in the other. (The read is kept by a test that
	// a block's first word is never all ones, but in a saturated sketch
	// of 4-bit counters, which counts it and is otherwise harmless.)
	k := &s.sketch[0]
	if k.cells[int(h&k.mask)*blockWords] == ^uint64(0) {
		s.saturated++
	}
	if e, ok := s.index.find(h, s.hot); ok {
		return s.decideHot(e, now, n)
	}
	var est [flowlimits.MaxKeyWindows][2]int64 // per window: previous and current generation
	var at [flowlimits.MaxKeyWindows]uint64
	sl0 := s.estimates(q, h, now, &est, &at)
	if len(s.hot) == cap(s.hot) && s.overN == 0 && s.skip > 0 && s.spared(&est, n) {
		// promote's first two cases cannot apply, and its third does: the
		// last search that found nothing speaks for the key (most
		// newcomers in a flood).
		s.skip--
	} else if e, ok := s.promote(q, h, key, now, n, &est, &at); ok {
		return s.decideHot(e, now, n)
	}
	cfg := s.cfg
	for j := range cfg.wins {
		w := &cfg.wins[j]
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
	for j := range cfg.wins {
		sl := &sl0
		if j > 0 || sl0.mask != s.sketch[0].mask {
			x := s.sketch[j].slots(h)
			sl = &x
		}
		k := &s.sketch[j]
		k.raise(sl, k.gen, est[j][1]+n)
		if h>>38&(keySample-1) == 0 && k.sampled(h) {
			s.growSketch(q, j)
		}
	}
	return allowed, -1
}

// decideHot decides for hot entry e, and counts the requests in every
// window if each allows them.
func (s *keyShard) decideHot(e int32, now int64, n int64) (Decision, int) {
	hk := &s.hot[e]
	cfg := s.cfg
	for j := range cfg.wins {
		w := &cfg.wins[j]
		hw, c := s.window(e, j)
		hw.advance(c, w.grid.Index(now), w.k)
		limit := cfg.limitOf(hk.pin, j)
		if n > limit {
			s.blocked(e, j, hw, now, n, limit)
			return Decision{Reason: ExceedsLimit}, j
		}
		if hw.sum+n > limit {
			s.blocked(e, j, hw, now, n, limit)
			return Decision{Reason: RateLimited, RetryAfter: hw.retryAfter(c, w, hw.sum+n-limit, now)}, j
		}
	}
	for j := range cfg.wins {
		hw, c := s.window(e, j)
		c[hw.last%uint64(len(c))] += uint32(n)
		hw.sum += n
	}
	return allowed, -1
}

// window returns hot entry e's state and counts in window j.
func (s *keyShard) window(e int32, j int) (*hotWindow, []uint32) {
	cfg := s.cfg
	w := &cfg.wins[j]
	base := int(e)*cfg.stride + w.off
	return &s.state[int(e)*len(cfg.wins)+j], s.counts[base : base+int(w.k)+1]
}

// blocked counts n requests of hot entry e refused at time now by window j
// (state hw, limit limit), and marks the key over its limit unless the
// refusal may be owed to its seed: in the first window, if what it asked
// since it took its entry fits the limit; in another, until calm.
func (s *keyShard) blocked(e int32, j int, hw *hotWindow, now int64, n int64, limit int64) {
	hk := &s.hot[e]
	w := &s.cfg.wins[0]
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
	over := now >= hk.calm
	if !over && j == 0 {
		// What the key asked since it took its entry, within the span of
		// its seed (at most k+1 buckets): its own requests the window
		// counts, and those refused, these with them.
		asked := hw.sum + int64(hk.blocked[0]) + int64(hk.blocked[1])
		if hw.last <= hk.seedAt+w.k {
			asked -= int64(hk.seeded[1])
		}
		if first := hk.seedAt / w.k * w.k; hw.last < first+w.k {
			asked -= int64(hk.seeded[0])
		}
		over = asked > limit
	}
	if over {
		if hk.overAt+1 < g && hk.pin == nil && s.overN < len(s.over) {
			s.over[s.overN] = e
			s.overN++
		}
		hk.overAt = max(hk.overAt, g)
	}
}

// stat is what Top says of hot entry e at time now.
func (s *keyShard) stat(e int32, now int64) keyStat {
	hk := &s.hot[e]
	w := &s.cfg.wins[0]
	hw, c := s.window(e, 0)
	hw.advance(c, w.grid.Index(now), w.k)
	st := keyStat{Key: string(s.names[int(e)*flowlimits.MaxShownKeyLength:][:hk.keyLen]), Allowed: hw.sum}
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

// seed fills hot entry e's windows, empty, with the key's estimates in the
// sketch; est and at are the estimates and the buckets they count in, per
// window. It returns the time until which the counts it placed may make
// the key refused: when the last of them leaves its window.
func (s *keyShard) seed(e int32, est *[flowlimits.MaxKeyWindows][2]int64, at *[flowlimits.MaxKeyWindows]uint64) int64 {
	var calm int64
	for j := range s.cfg.wins {
		w := &s.cfg.wins[j]
		hw, c := s.window(e, j)
		b := at[j]
		hw.last = b
		c[b%(w.k+1)] = clampCount(est[j][1])
		// The previous generation's count goes in its last bucket, which
		// lies in the window: b/k*k - 1 >= b - k.
		if first := b / w.k * w.k; est[j][0] > 0 && first > 0 {
			c[(first-1)%(w.k+1)] = clampCount(est[j][0])
		}
		hw.sum = est[j][0] + est[j][1]
		if hw.sum > 0 {
			calm = max(calm, w.grid.Start(b+w.k+1))
		}
	}
	return calm
}

// estimates puts in est and at the key's estimates in the sketch of every
// window and the buckets they count in, at time now, and returns its
// slots in the first.
func (s *keyShard) estimates(q *KeyedQPS, h uint64, now int64, est *[flowlimits.MaxKeyWindows][2]int64, at *[flowlimits.MaxKeyWindows]uint64) keySlots {
	var sl0, sl keySlots
	for j := range s.cfg.wins {
		k := &s.sketch[j]
		if now >= k.from && now < k.to {
			at[j] = k.bucket // the bucket of the last decision: nothing moves
		} else {
			at[j] = s.advanceSketchTo(q, j, now)
		}
		if j == 0 {
			est[j] = k.look(h, &sl0)
		} else {
			est[j] = k.look(h, &sl)
		}
	}
	return sl0
}

// advanceSketch moves sketch j on to time now (keySketch.advance), and
// halves it if its last generation had few keys.
func (s *keyShard) advanceSketch(q *KeyedQPS, j int, now int64) uint64 {
	if k := &s.sketch[j]; now >= k.from && now < k.to {
		return k.bucket
	}
	return s.advanceSketchTo(q, j, now)
}

// advanceSketchTo is advanceSketch for a time outside the sketch's last
// bucket.
func (s *keyShard) advanceSketchTo(q *KeyedQPS, j int, now int64) uint64 {
	k := &s.sketch[j]
	gen := k.gen
	b, quiet := k.advance(&s.cfg.wins[j], now)
	if quiet {
		blocks := int64(k.mask + 1)
		*k = k.folded()
		q.acct.give(sketchBytes(blocks) - sketchBytes(blocks/2))
	}
	if j == 0 && k.gen != gen {
		s.trim(q, now)
	}
	return b
}

// growSketch doubles sketch j, if the budget has the bytes; if not, it
// tries again in the next generation.
func (s *keyShard) growSketch(q *KeyedQPS, j int) {
	k := &s.sketch[j]
	blocks := int64(k.mask + 1)
	if q.acct.grow(sketchBytes(2*blocks) - sketchBytes(blocks)) {
		*k = k.grown()
		return
	}
	k.full = true
}

// sketchBytes is the heap of a sketch of the given blocks, beside its
// keySketch.
func sketchBytes(blocks int64) int64 { return blocks * blockBytes }
