package flow

import (
	"cmp"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/internal/topn"
)

// A KeyedQPS holds each key to its own sliding-window limits. A key is a
// user, a tenant or a client address. For every key and every window, at
// most the window's limit is allowed in any interval of its length,
// however many keys there are. One request is decided against all the
// windows of its key together, say 5 a second and 100 a minute. A request
// one window refuses counts in none.
//
// A key has an exact window of its own, a hot entry, when one is free.
// Otherwise it is counted in a count-min sketch, which never lets a key
// through early, and may refuse it early. A key paced evenly at k/(k+1) of
// its limit is never refused once it has an entry: 95% with the default
// 20 buckets. No key takes the entry of a key within its limit and at half
// of it or more. docs/keyed.md gives the proof and the measured rates.
//
// Memory comes from a [KeyMemory], its own of 64 MiB unless the settings
// share one. The sketches and the entries grow as keys come, and shrink as
// they go. The keys with overrides keep entries besides.
//
// Keys are told apart by a 64-bit hash, seeded at random per limiter, so
// that no one can pick keys that collide. A KeyedQPS is safe for
// concurrent use. Keys hash to 64 shards, each with its own mutex.
// Deciding takes one, and allocates nothing unless entries or sketches
// change size.
type KeyedQPS struct {
	seed  maphash.Seed
	clock clock.Clock
	acct  *keyBytes
	setMu sync.Mutex // serialises Set
	// cfg is the newest configuration, which Set hands to the shards one
	// at a time; each shard decides by its own (keyShard.cfg).
	cfg    *keyConfig
	shards [keyShards]keyShard
}

// A KeyWindow is one window of a [KeyedQPS]: at most Limit requests per key
// in any Interval. Limit is in [0, 2^32-1]; Interval is positive. Buckets
// divide the interval (default 20, at most 100), each at least 1 µs. The
// keys in Overrides have limits of their own.
type KeyWindow struct {
	Limit     int64
	Interval  time.Duration
	Buckets   int
	Overrides map[string]int64
}

const (
	keyShards  = 64
	shardShift = 58 // a hash's top 6 bits pick its shard
	// A shard starts with floorRoom entries for hot keys, which it takes
	// whatever its budget has, and doubles them as keyentries.go says.
	floorRoom = 8
	// keyShardBytes is the heap of a KeyedQPS besides its entries and
	// sketches, rounded up.
	keyShardBytes = 24 << 10
)

// The hot keys a KeyedQPS keeps before it asks its budget for more are its
// shards' floors (flowlimits.DefaultHotKeys): either array below has a
// negative length, and does not compile, if they differ.
var (
	_ [flowlimits.DefaultHotKeys - keyShards*floorRoom]struct{}
	_ [keyShards*floorRoom - flowlimits.DefaultHotKeys]struct{}
)

// KeyedQPSSettings configure a [KeyedQPS]. Windows say what each key's
// limits are; every other zero field takes its default.
type KeyedQPSSettings struct {
	// Windows are decided together for each key: from 1 to 8 of them.
	Windows []KeyWindow
	// KeyMemory is the budget the limiter draws its per-key state from
	// (default: a budget of its own of 64 MiB).
	KeyMemory *KeyMemory
	// Clock is the clock the limiter reads (default clock.System).
	Clock clock.Clock
}

// NewKeyedQPS returns a KeyedQPS of the given settings. A bad setting is a
// configuration error naming it ("windows[1].limit").
func NewKeyedQPS(s KeyedQPSSettings) (*KeyedQPS, error) {
	q := &KeyedQPS{seed: maphash.MakeSeed(), clock: clockOr(s.Clock)}
	cfg, err := q.newConfig(s.Windows)
	if err != nil {
		return nil, err
	}
	q.acct = newKeyBytes(q, memoryOr(s.KeyMemory))
	q.acct.take(keyShardBytes)
	q.cfg = cfg
	now := q.clock.Now()
	for i := range q.shards {
		s := &q.shards[i]
		s.cfg = cfg
		if len(cfg.pins[i]) > 0 {
			s.init(q)
			s.pin(q, i, now)
		}
	}
	return q, nil
}

// hash is the key's seeded hash.
func (q *KeyedQPS) hash(key string) uint64 { return maphash.String(q.seed, key) }

func (q *KeyedQPS) shard(h uint64) *keyShard { return &q.shards[h>>shardShift] }

// Allow decides whether one request with the given key may proceed now.
// See [KeyedQPS.AllowNAt].
func (q *KeyedQPS) Allow(key string) (Decision, int) { return q.AllowNAt(q.clock.Now(), key, 1) }

// AllowAt decides whether one request with the given key, arriving at time
// now, may proceed. See [KeyedQPS.AllowNAt].
func (q *KeyedQPS) AllowAt(now int64, key string) (Decision, int) { return q.AllowNAt(now, key, 1) }

// AllowN decides whether n requests with the given key may proceed now.
// See [KeyedQPS.AllowNAt].
func (q *KeyedQPS) AllowN(key string, n int64) (Decision, int) {
	return q.AllowNAt(q.clock.Now(), key, n)
}

// AllowNAt decides whether n requests with the given key, arriving at time
// now, may proceed under every window. If so it counts them in every
// window, and returns -1. Otherwise it returns the index of the first
// window that refused them. RetryAfter then says when the key would fit
// it, if nothing else were allowed. n <= 0 is allowed and counts nothing.
// n above a window's limit for the key is refused with [ExceedsLimit].
func (q *KeyedQPS) AllowNAt(now int64, key string, n int64) (Decision, int) {
	if n <= 0 {
		return allowed, -1
	}
	h := q.hash(key)
	s := q.shard(h)
	s.mu.Lock()
	d, j := s.decide(q, h, key, now, n)
	s.mu.Unlock()
	return d, j
}

// A keyStat is what topAt says of one hot key.
type keyStat = flowstate.KeyStat

// topAt returns the hot keys the limiter counts most of at time now, at
// most n of them (see flowstate.TopKeys): keysAt's, the first n selected
// (topn.Select), not all sorted. It allocates its result.
func (q *KeyedQPS) topAt(now int64, n int, byBlocked bool) []keyStat {
	all := q.keysAt(now)
	return topn.Select(all, n, func(a, b keyStat) int {
		x, y := a.Allowed, b.Allowed
		if byBlocked {
			x, y = a.Blocked, b.Blocked
		}
		return cmp.Or(cmp.Compare(y, x), strings.Compare(a.Key, b.Key))
	})
}

// keysAt returns the hot keys at time now, in no order. A hot key has an
// entry, and uses more than half its first window's limit, was refused,
// or has an override. Keys are cut to 64 bytes and made valid UTF-8; keys
// that then read the same are added up into one: only keys cut or not
// valid UTF-8 can, so the others are not looked up. It takes each shard's
// mutex in turn, and allocates its result.
func (q *KeyedQPS) keysAt(now int64) []keyStat {
	var all []keyStat
	merge := false
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		for e := range s.hot {
			st := s.stat(int32(e), now)
			hk := &s.hot[e]
			if st.Blocked == 0 && (hk.pin == nil && 2*st.Allowed <= s.cfg.wins[0].limit || st.Allowed == 0) {
				continue
			}
			if len(st.Key) == flowlimits.MaxShownKeyLength || !utf8.ValidString(st.Key) {
				merge = true
			}
			all = append(all, st)
		}
		s.mu.Unlock()
	}
	if !merge {
		return all
	}
	at := make(map[string]int, len(all))
	out := all[:0]
	for _, st := range all {
		st.Key = strings.ToValidUTF8(st.Key, "\uFFFD")
		if j, ok := at[st.Key]; ok {
			out[j].Allowed += st.Allowed
			out[j].Blocked += st.Blocked
			continue
		}
		at[st.Key] = len(out)
		out = append(out, st)
	}
	return out
}

// bytes returns the heap the limiter takes now: what it holds of its
// KeyMemory.
func (q *KeyedQPS) bytes() int { return int(q.acct.held.Load()) }

// clampCount is v as a hot entry's count: a count is never above 2^32-1
// (a window's limit bounds what a key is allowed in it).
func clampCount(v int64) uint32 { return uint32(min(v, math.MaxUint32)) }
