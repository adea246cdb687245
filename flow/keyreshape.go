package flow

// reshape puts cfg in force in shard id, at time now, in place of the
// shard's own: a window of the same interval and buckets keeps its counts
// and its sketch (widened if its new limit needs wider counters); a new
// window is seeded from the window in force of the longest interval up to
// its own, if any (carry); the keys with overrides take their entries.
// It allocates what the new windows need and takes the bytes whatever the
// budget has: windows come from the configuration, not from keys.
func (s *keyShard) reshape(q *KeyedQPS, id int, cfg *keyConfig, now int64) {
	old := s.cfg
	if s.sketch == nil {
		s.cfg = cfg
		if len(cfg.pins[id]) > 0 {
			s.init(q)
			s.pin(q, id, now)
		}
		return
	}
	from := cfg.match(old) // each new window's old one, or -1
	same := len(cfg.wins) == len(old.wins)
	for j := range cfg.wins {
		same = same && from[j] == j
	}
	// Every window of every entry, and every sketch, up to now first.
	for e := range s.hot {
		for j := range old.wins {
			hw, c := s.window(int32(e), j)
			hw.advance(c, old.wins[j].grid.Index(now), old.wins[j].k)
		}
	}
	for j := range old.wins {
		s.advanceSketch(q, j, now)
	}

	sketch := make([]keySketch, len(cfg.wins))
	var bytes int64 // the change
	for j := range old.wins {
		bytes -= s.sketch[j].bytes()
	}
	for j := range cfg.wins {
		w := &cfg.wins[j]
		switch src := carrySource(old, w); {
		case from[j] >= 0:
			sketch[j] = s.sketch[from[j]]
		case src >= 0:
			sketch[j] = s.sketch[src].carried(w, now)
		default:
			sketch[j] = newKeySketch(w.limit)
		}
		if need := widthFor(w.limit); need > sketch[j].shift {
			sketch[j] = sketch[j].widened(need)
		}
		sketch[j].forget() // its window may be another
		bytes += sketch[j].bytes()
	}
	if !same {
		n := cap(s.hot)
		bytes += cfg.entriesBytes(n) - old.entriesBytes(n)
		counts := make([]uint32, n*cfg.stride)
		state := make([]hotWindow, n*len(cfg.wins))
		for e := range s.hot {
			for j := range cfg.wins {
				w := &cfg.wins[j]
				hw := &state[e*len(cfg.wins)+j]
				c := counts[e*cfg.stride+w.off:][:w.k+1]
				if o := from[j]; o >= 0 {
					ohw, oc := s.window(int32(e), o)
					*hw = *ohw
					copy(c, oc)
				} else if src := carrySource(old, w); src >= 0 {
					ohw, oc := s.window(int32(e), src)
					carry(&old.wins[src], ohw, oc, w, hw, c, now)
				} else {
					hw.last = w.grid.Index(now)
				}
			}
			if from[0] != 0 {
				// Refusals are counted in the first window's generations.
				hk := &s.hot[e]
				hk.blocked, hk.blockAt, hk.overAt, hk.calm = [2]uint32{}, 0, 0, 0
			}
		}
		s.counts, s.state = counts, state
	}
	if bytes > 0 {
		q.acct.take(bytes)
	} else {
		q.acct.give(-bytes)
	}
	s.sketch, s.cfg = sketch, cfg
	s.pin(q, id, now)
}

// carrySource returns the window of old that a new window w is seeded
// from: of those no longer than it, the longest (the most it can know of
// a key's last interval), or -1.
func carrySource(old *keyConfig, w *keyWindow) int {
	src := -1
	for o := range old.wins {
		if iv := old.wins[o].interval; iv <= w.interval && (src < 0 || iv > old.wins[src].interval) {
			src = o
		}
	}
	return src
}

// carry seeds a new window (w, state hw, counts c) with a hot key's counts
// in window ow (state ohw, counts oc) at time now: each count at the end
// of its bucket, or at now if earlier, no earlier than it happened and
// never later than now; those that the new window no longer holds at now
// are left out.
func carry(ow *keyWindow, ohw *hotWindow, oc []uint32, w *keyWindow, hw *hotWindow, c []uint32, now int64) {
	b := w.grid.Index(now)
	*hw = hotWindow{last: b}
	for m := uint64(0); m <= ow.k && m <= ohw.last; m++ {
		x := ohw.last - m
		n := oc[x%(ow.k+1)]
		if n == 0 {
			continue
		}
		y := w.grid.Index(min(ow.grid.Start(x+1)-1, now))
		if y+w.k < b {
			continue
		}
		c[y%(w.k+1)] += n
		hw.sum += int64(n)
	}
}

// carried returns a sketch for a new window w, seeded at time now from
// this one: each pair of counters holds in w's current generation the sum
// of this one's two, so that a key's estimate there is at least what this
// sketch counted of it in both its generations, counted at now.
func (k *keySketch) carried(w *keyWindow, now int64) keySketch {
	n := *k
	n.cells = make([]uint64, len(k.cells))
	n.seen = newKeyCount()
	n.forget()
	n.gen = w.grid.Index(now) / w.k
	bits := uint(1) << k.shift
	top := k.top()
	slot := uint(n.gen&1) * bits
	for i, word := range k.cells {
		var out uint64
		for at := uint(0); at < 64; at += 2 * bits {
			out |= min(word>>at&top+word>>(at+bits)&top, top) << (at + slot)
		}
		n.cells[i] = out
	}
	return n
}
