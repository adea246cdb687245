package flow

import (
	"math"

	"github.com/slidegate/slidegate/internal/flowlimits"
)

// leftAt is how many more requests the key may have at time now before a
// window refuses it, as decide would judge them: in the key's hot entry if
// it has one, else in the sketches. It counts nothing; it moves the
// windows on to now, as a decision at now would.
func (q *KeyedQPS) leftAt(now int64, key string) int64 {
	h := q.hash(key)
	s := q.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := s.cfg
	left := int64(math.MaxInt64)
	if s.sketch == nil { // nothing counted in this shard yet, and no key pinned
		for j := range cfg.wins {
			left = min(left, cfg.wins[j].limit)
		}
		return left
	}
	if e, ok := s.index.find(h, s.hot); ok {
		for j := range cfg.wins {
			w := &cfg.wins[j]
			hw, c := s.window(e, j)
			hw.advance(c, w.grid.Index(now), w.k)
			left = min(left, cfg.limitOf(s.hot[e].pin, j)-hw.sum)
		}
		return max(left, 0)
	}
	var est [flowlimits.MaxKeyWindows][2]int64
	var at [flowlimits.MaxKeyWindows]uint64
	s.estimates(q, h, now, &est, &at)
	for j := range cfg.wins {
		left = min(left, cfg.wins[j].limit-est[j][0]-est[j][1])
	}
	return max(left, 0)
}
