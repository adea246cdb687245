package redisflow

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// blockSlots is the number of keys a KeyedLimiter remembers refusals of: a
// table of this many pointers (8 bytes each), each to at most one refusal
// of a key of at most 256 bytes (about 300 bytes).
const blockSlots = 256

// A blockCache remembers the keys a KeyedLimiter's Redis refused last, and
// until when: a key that keeps asking while it cannot fit is answered
// locally, not by a round trip, until then.
//
// It is a direct-mapped table: a key's slot is chosen by a hash seeded at
// random per cache, and a refusal takes the slot from whatever was there.
// Memory is bounded whatever the keys; keys that share a slot take it from
// each other, which costs round trips, never a wrong answer: a remembered
// refusal holds only until the key could fit, if nothing else were allowed
// meanwhile, so it never refuses what Redis would allow (but for the
// difference of the two clocks over that time).
//
// Its methods are safe for concurrent use; find allocates nothing.
type blockCache struct {
	seed  maphash.Seed
	slots [blockSlots]atomic.Pointer[keyBlock]
}

// A keyBlock is one refusal: the key's requests for need permits or more
// cannot fit any window before until (on the cluster's clock); window is the
// window that refused them.
type keyBlock struct {
	key    string
	until  int64
	need   int64
	window int
}

// init makes the cache empty, with a new seed.
func (b *blockCache) init() {
	b.seed = maphash.MakeSeed()
	for i := range b.slots {
		b.slots[i].Store(nil)
	}
}

func (b *blockCache) slot(key string) *atomic.Pointer[keyBlock] {
	return &b.slots[maphash.String(b.seed, key)%blockSlots]
}

// find returns the end of the refusal that holds for n permits of key at
// now, and the window that made it, if one does.
func (b *blockCache) find(key string, now, n int64) (until int64, window int, ok bool) {
	kb := b.slot(key).Load()
	if kb == nil || now >= kb.until || n < kb.need || kb.key != key {
		return 0, 0, false
	}
	return kb.until, kb.window, true
}

// add remembers that n permits of key, refused by window, cannot fit
// before until. The key is copied: the caller's string may share memory
// with a larger one (a request's header).
func (b *blockCache) add(key string, until, n int64, window int) {
	b.slot(key).Store(&keyBlock{key: strings.Clone(key), until: until, need: n, window: window})
}
