package flow

import (
	"cmp"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// A KeyedQPS limits each key (a user, a tenant, a client address) to its own
// sliding-window limits: for every key and every window, at most the
// window's limit of requests allowed in any interval of its length,
// wherever it starts, however many keys there are. One request is decided
// against all the windows of its key together (5 per second and 100 per
// minute), all or nothing: a request one window refuses counts in none.
//
// A key has an exact window of its own, a hot entry, when one is free,
// held by a key that went over its limit, or idle; otherwise it is counted
// in a count-min sketch per window, which never lets a key through early
// and may refuse it early. A key paced evenly at up to k/(k+1) of its limit
// (95% with flowlimits.DefaultKeyBuckets) is never refused once it has an entry, and
// no key takes the entry of a key within its limit and at half of it or
// more. Keys that go over their limits, or come in floods of distinct
// keys, take the entries of one another and of idle keys. docs/keyed.md
// gives the proof of the bound, the rules for entries, and the measured
// rates of early refusals.
//
// Memory comes from a [KeyMemory], the limiter's own of flowlimits.DefaultKeyMemory
// unless [WithKeyMemory] shares one. The sketches double as distinct keys
// arrive and halve when they go. The entries double as keys need them, up
// to half the budget, and halve when most of them are idle. The keys with
// overrides keep entries besides.
//
// Keys are told apart by a 64-bit hash, seeded at random per limiter, so no
// one can pick keys that collide; two keys with equal hashes (one chance in
// 2^64 a pair) share their counts, which can only refuse early. Top shows
// keys cut to flowlimits.MaxShownKeyLength bytes.
//
// A KeyedQPS is safe for concurrent use. Keys hash to 64 shards, each with
// its own mutex; deciding takes one and allocates nothing, except when
// entries or sketches change size. [KeyedQPS.Set] takes them one at a time.
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

// A KeyWindow is one window of a KeyedQPS: at most Limit requests per key
// in any Interval, counted in Buckets buckets (flowlimits.DefaultKeyBuckets if 0),
// the keys in Overrides each with a limit of their own instead.
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
// [*ConfigError] naming it ("windows[1].limit").
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
func (q *KeyedQPS) Allow(key string) (Decision, int) { return q.AllowNAt(q.clock.Now(), key, 1) }

// AllowAt decides whether one request with the given key, arriving at time
// now, may proceed.
func (q *KeyedQPS) AllowAt(now int64, key string) (Decision, int) { return q.AllowNAt(now, key, 1) }

// AllowN decides whether n requests with the given key may proceed now.
func (q *KeyedQPS) AllowN(key string, n int64) (Decision, int) {
	return q.AllowNAt(q.clock.Now(), key, n)
}

// AllowNAt decides whether n requests with the given key, arriving at time
// now, may proceed under every window, and counts them in every window if
// so. When they may not, it returns the index of the window that refused
// them (the first, in the order given, that did), with RetryAfter saying
// when the key would fit it if nothing else were allowed meanwhile;
// otherwise -1. n <= 0 is allowed and counts nothing; n above a window's
// limit for the key is refused with ExceedsLimit. As with QPS, a time
// earlier than one the key's shard already counted at is counted at that
// later time.
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

// A KeyStat is what Top says of one key.
type KeyStat struct {
	// Key is the key, cut to flowlimits.MaxShownKeyLength bytes.
	Key string
	// Allowed is how many of the key's requests the first window counts
	// now: those allowed in its last interval or so (its open bucket and
	// the k before it).
	Allowed int64
	// Blocked is how many of the key's requests were refused in the first
	// window's current interval and the one before.
	Blocked int64
}

// Top returns the busiest hot keys now; see TopAt.
func (q *KeyedQPS) Top(n int, byBlocked bool) []KeyStat { return q.TopAt(q.clock.Now(), n, byBlocked) }

// TopAt returns the hot keys that the limiter counts most of at time now,
// at most n of them, busiest first: by allowed requests, or by blocked ones
// if byBlocked, then by key. A hot key has an entry and uses more than half
// its first window's limit, was refused, or has an override. Keys are
// shown cut to flowlimits.MaxShownKeyLength bytes and made valid UTF-8; keys that
// then read the same are added up into one, so that no two KeyStats name
// one key. Top takes each shard's mutex in turn and allocates its result.
func (q *KeyedQPS) TopAt(now int64, n int, byBlocked bool) []KeyStat {
	at := map[string]int{}
	var all []KeyStat
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		for e := range s.hot {
			st := s.stat(int32(e), now)
			hk := &s.hot[e]
			if st.Blocked == 0 && (hk.pin == nil && 2*st.Allowed <= s.cfg.wins[0].limit || st.Allowed == 0) {
				continue
			}
			st.Key = strings.ToValidUTF8(st.Key, "\uFFFD")
			if j, ok := at[st.Key]; ok {
				all[j].Allowed += st.Allowed
				all[j].Blocked += st.Blocked
				continue
			}
			at[st.Key] = len(all)
			all = append(all, st)
		}
		s.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b KeyStat) int {
		x, y := a.Allowed, b.Allowed
		if byBlocked {
			x, y = a.Blocked, b.Blocked
		}
		return cmp.Or(cmp.Compare(y, x), strings.Compare(a.Key, b.Key))
	})
	return all[:min(max(n, 0), len(all))]
}

// bytes returns the heap the limiter takes now: what it holds of its
// KeyMemory.
func (q *KeyedQPS) bytes() int { return int(q.acct.held.Load()) }

// clampCount is v as a hot entry's count: a count is never above MaxLimit
// (a window's limit bounds what a key is allowed in it).
func clampCount(v int64) uint32 { return uint32(min(v, math.MaxUint32)) }
