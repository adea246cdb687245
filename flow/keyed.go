package flow

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// A KeyedQPS limits each key (a user, a tenant, a client address) to its own
// sliding-window limits: for every key and every window, at most the
// window's limit of requests allowed in any interval of its length, wherever
// it starts, as QPS promises for one key, however many keys there are and in
// whatever order they come. One request is decided against all the windows
// of its key together (5 per second and 100 per minute and 1,000 per day),
// all or nothing: a request one window refuses counts in none.
//
// Memory is bounded whatever the keys: at most KeyedQPSMaxBytes per window
// plus the overrides, however many distinct keys arrive, and a key is never
// forgotten in a way that lets it through early. How:
//
// Hot keys have exact windows. A key that uses more than half its limit of
// a window gets an entry of its own, with k+1 counts per window (the open
// bucket and the k before it, as QPS keeps them); a request is allowed if
// the counts of every window, with it, stay within the window's limit. At
// first DefaultHotKeys keys may have entries at once; when more keys than
// that use over half their limits, the entries double, up to 8 MiB of them
// per window. The keys with overrides keep theirs besides.
//
// Every other key is counted in a count-min sketch per window: a key adds
// to three counters, chosen by a hash seeded at random per limiter (so that
// no one can pick keys that collide) among the eight of one 64-byte block
// (so that they cost one cache line), and its estimate is the smallest of
// the three. The sketch keeps two generations, each covering one whole
// interval of the window (k of its buckets, from a multiple of the
// interval on the clock): the current one and the one before. Counting is
// conservative: adding n raises each of the key's counters to at least its
// estimate plus n, and no further. A counter is raised only to a value some
// key's count reached, so every counter is at least the count of every key
// that maps to it, and the estimate is never below the key's true count: collisions can
// only make a key look busier than it is. A cold key is allowed if its
// estimates in the two generations, with the request, stay within the
// limit; the two generations cover the last interval, wherever it starts,
// so no key is allowed more than its limit however the sketch errs.
//
// The proof that no key goes over, whatever happens to it. Call a record
// of a key's admissions faithful if every admission is counted at a time no
// earlier than the one it happened at and no later than now. An interval of
// the window's length ending at the time of a decision lies within the open
// bucket and the k before it, and within the sketch's two generations; a
// decision counts everything faithfully recorded there, so an allowed
// request leaves no interval over the limit. The records stay faithful
// through every move between them:
//
//   - a key turning hot gets an exact window seeded from the sketch: the
//     current generation's estimate counted in the open bucket, the
//     previous generation's in the last bucket of that generation — each at
//     least the key's true count, moved no earlier than it happened;
//   - a hot key losing its entry (to a hotter key; only keys less hot than
//     the newcomer are displaced) raises its counters in the sketch, for each
//     generation, to at least the sum of its exact counts in that
//     generation's buckets: the sketch's estimate covers them again, so
//     eviction resets nothing;
//   - a sketch generation is cleared only once it has left every window.
//
// What the sketch costs in accuracy is refusals, never admissions: a cold
// key may be refused early if all three of its counters are shared with
// busier keys. The sketch grows by doubling, which keeps every estimate as
// it was, as more distinct keys arrive in a generation: from 32 KiB, it
// doubles when a generation's keys (counted by linear counting, a bit per
// key, one key in eight) reach a quarter of its counters, up to 32 MiB: a
// million keys per interval, four requests each, fit, and are refused a few
// times in a million (TestAMillionKeysASecondFitTheBound). Past that,
// estimates rise with the number of keys, and cold keys are refused more
// often. A key that stays in the sketch because hotter keys fill every
// entry is limited as strictly, and may be allowed a little over half its
// limit per interval under steady overload, until an entry frees.
//
// Keys are told apart by a 64-bit seeded hash: two keys whose hashes are
// equal (one chance in 2^64 per pair) share one count, which again can only
// refuse early. The keys kept for Top are cut to MaxShownKeyLength bytes,
// copied into the hot entries' own storage, so turning hot allocates
// nothing once the entries are made.
//
// A KeyedQPS is safe for concurrent use. Keys hash to 64 shards, each with
// its own mutex, entries and sketches; deciding takes one shard's mutex
// and allocates nothing, except when the sketch or the entries grow.
type KeyedQPS struct {
	seed   maphash.Seed
	clock  clock.Clock
	wins   []keyWindow
	stride int // counts per hot entry: the windows' k+1 counts, end to end
	// pinned are the keys with overrides: their limits per window, -1 for
	// the window's own limit.
	pinned map[string][]int64
	shards [keyShards]keyShard
}

// A KeyWindow is one window of a KeyedQPS: at most Limit requests per key
// in any Interval, counted in Buckets buckets (DefaultKeyBuckets if 0),
// the keys in Overrides each with a limit of their own instead.
type KeyWindow struct {
	Limit     int64
	Interval  time.Duration
	Buckets   int
	Overrides map[string]int64
}

// DefaultKeyBuckets is the number of buckets a KeyedQPS window divides its
// interval into unless told otherwise: a hot key under steady overload is
// allowed 10/11 (91%) of its limit, at 4 bytes per bucket per hot key.
const DefaultKeyBuckets = 10

// DefaultHotKeys is the most keys a KeyedQPS keeps exact windows for at
// once at first, besides the keys with overrides. When more keys than that
// use over half their limits, the entries double, up to 8 MiB of them per
// window (some 40,000 keys with one window of 10 buckets).
const DefaultHotKeys = keyShards * hotPerShard

// MaxKeyWindows is the most windows a KeyedQPS decides together.
const MaxKeyWindows = 8

// MaxKeyBuckets is the most buckets a KeyedQPS window divides its interval
// into: each takes 4 bytes per hot key.
const MaxKeyBuckets = 100

// MaxShownKeyLength is the longest key Top shows; a longer key is shown cut.
const MaxShownKeyLength = 64

// KeyedQPSMaxBytes bounds the heap a KeyedQPS takes per window, however
// many keys it sees: the sketch at its largest (32 MiB), the bits that
// count its keys, and the hot keys' entries (8 MiB) and their index. Each
// key with an override keeps an entry besides: 64 bytes of its key, 80, 16
// per window and 4 per bucket (204 bytes with one window of 10 buckets,
// 3.5 KiB with 8 windows of 100).
const KeyedQPSMaxBytes = keyShards*(maxSketchBlocks*blockWords*4+maxSketchBlocks/8) + hotBytesPerWindow + hotIndexBytes + 16384

const (
	keyShards   = 64
	shardShift  = 58 // a hash's top 6 bits pick its shard
	hotPerShard = 64
	// hotBytesPerWindow bounds the hot entries, per window; hotIndexBytes
	// the index that finds them, at its largest.
	hotBytesPerWindow = 8 << 20
	hotIndexBytes     = 4 << 20
	sketchProbes      = 3  // counters per key
	blockWords        = 16 // a block's 8 counters, two generations each: 64 bytes
	minSketchBlocks   = 8
	maxSketchBlocks   = 1 << 13 // per shard: 4 Mi counters in all, 32 MiB
	keysPerBlock      = 2       // a generation's keys per block that double the blocks
	keySample         = 8       // one key in keySample is counted, and the count scaled
)

// sketchBytes is the heap of a shard's sketch of the given width.
func sketchBytes(blocks int) int { return blocks * blockWords * 4 }

// hotEntryBase is the heap of a hot entry besides its windows: its hotKey,
// its key as Top shows it, and its place in the index.
const hotEntryBase = 64 + 16 + MaxShownKeyLength

// hotEntryBytes is the heap of one hot entry with the given windows and
// counts per entry, beyond the key it keeps.
func hotEntryBytes(windows, stride int) int { return hotEntryBase + windows*16 + stride*4 }

type keyWindow struct {
	limit    int64
	k        uint64 // buckets per interval
	grid     timegrid.Grid
	off      int // where the window's counts start in an entry's
	interval time.Duration
}

// NewKeyedQPS returns a limiter of the given windows, decided together for
// each key: between 1 and MaxKeyWindows of them, each with a limit in [0,
// MaxLimit], a positive interval that divides into its buckets (at most
// 100) of at least 1 µs, and overrides within the same bounds. The only
// Option it takes is WithClock. A bad argument is a *ConfigError naming it
// ("windows[1].limit").
func NewKeyedQPS(windows []KeyWindow, opts ...Option) (*KeyedQPS, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.bucketsGiven || o.warming {
		return nil, &ConfigError{Option: "options", Value: "buckets or warm-up", Detail: "a keyed limiter takes its buckets from its windows and does not warm up"}
	}
	if len(windows) == 0 || len(windows) > MaxKeyWindows {
		return nil, &ConfigError{Option: "windows", Value: len(windows), Detail: fmt.Sprintf("must be between 1 and %d", MaxKeyWindows)}
	}
	q := &KeyedQPS{seed: maphash.MakeSeed(), clock: o.clock, wins: make([]keyWindow, len(windows))}
	for j, w := range windows {
		at := func(field string) string { return fmt.Sprintf("windows[%d].%s", j, field) }
		if w.Limit < 0 || w.Limit > MaxLimit {
			return nil, &ConfigError{Option: at("limit"), Value: w.Limit, Detail: fmt.Sprintf("must be between 0 and %d", int64(MaxLimit))}
		}
		k := w.Buckets
		if k == 0 {
			k = DefaultKeyBuckets
		}
		if k > MaxKeyBuckets {
			return nil, &ConfigError{Option: at("buckets"), Value: k, Detail: fmt.Sprintf("must be at most %d", MaxKeyBuckets)}
		}
		if we := timegrid.CheckWindow(w.Interval, k); we != nil {
			return nil, &ConfigError{Option: at(we.Arg), Value: we.Value, Detail: we.Detail}
		}
		q.wins[j] = keyWindow{limit: w.Limit, k: uint64(k), grid: alignedGrid(w.Interval, k), off: q.stride, interval: w.Interval}
		q.stride += k + 1
	}
	pinned, err := pinnedOf(windows)
	if err != nil {
		return nil, err
	}
	q.pin(pinned, q.clock.Now())
	return q, nil
}

// pinnedOf returns the keys with overrides, each with its limit per
// window, -1 where it has none.
func pinnedOf(windows []KeyWindow) (map[string][]int64, error) {
	var pinned map[string][]int64
	for j, w := range windows {
		for key, limit := range w.Overrides {
			if limit < 0 || limit > MaxLimit {
				return nil, &ConfigError{Option: fmt.Sprintf("windows[%d].overrides", j), Value: fmt.Sprintf("%q: %d", key, limit), Detail: fmt.Sprintf("must be between 0 and %d", int64(MaxLimit))}
			}
			if pinned == nil {
				pinned = map[string][]int64{}
			}
			l := pinned[key]
			if l == nil {
				l = slices.Repeat([]int64{-1}, len(windows))
				pinned[key] = l
			}
			l[j] = limit
		}
	}
	return pinned, nil
}

// pin makes pinned the limiter's keys with overrides: each takes its hot
// entry (a new one, or the one it has) for good, and a key no longer in
// pinned keeps its entry as any hot key does. The caller holds every
// shard's mutex, or has not shared the limiter yet.
func (q *KeyedQPS) pin(pinned map[string][]int64, now int64) {
	q.pinned = pinned
	for i := range q.shards {
		s := &q.shards[i]
		for e := range s.hot {
			s.hot[e].limits = nil
		}
		s.pins = 0
	}
	for key, limits := range pinned {
		h := q.hash(key)
		s := q.shard(h)
		s.init(q)
		s.pins++
		e, ok := s.index[h]
		if !ok {
			// A cold key until now: its counts in the sketch come along.
			est, at := s.estimates(q, h, now)
			e = s.take(q, h, key)
			s.seed(q, e, &est, &at)
		}
		s.hot[e].limits = limits
	}
	// Keys that lost their overrides keep their entries as hot keys, but
	// no more entries than the shard may have: the surplus goes back to
	// the sketch, so that a list of overrides that changes at every
	// reload does not grow the entries.
	for i := range q.shards {
		s := &q.shards[i]
		for e := int32(len(s.hot) - 1); e >= 0 && len(s.hot) > s.room+s.pins; e-- {
			if s.hot[e].limits == nil {
				s.drop(q, e, now)
			}
		}
	}
}

// same reports whether windows, whose overrides are pinned, are what the
// limiter has in force. Limits and pinned change only under every
// shard's mutex; Set, the only writer, is not called concurrently.
func (q *KeyedQPS) same(windows []KeyWindow, pinned map[string][]int64) bool {
	for j := range windows {
		if windows[j].Limit != q.wins[j].limit {
			return false
		}
	}
	return maps.EqualFunc(pinned, q.pinned, slices.Equal)
}

// Set gives the limiter new limits and overrides, keeping every count: the
// windows must have the intervals and buckets the limiter was made with. A
// key that loses its override keeps its counts, under the window's limit.
// A bad argument is a *ConfigError, and changes nothing.
func (q *KeyedQPS) Set(windows []KeyWindow) error {
	if len(windows) != len(q.wins) {
		return &ConfigError{Option: "windows", Value: len(windows), Detail: fmt.Sprintf("must be the limiter's %d", len(q.wins))}
	}
	for j, w := range windows {
		at := func(field string) string { return fmt.Sprintf("windows[%d].%s", j, field) }
		if w.Limit < 0 || w.Limit > MaxLimit {
			return &ConfigError{Option: at("limit"), Value: w.Limit, Detail: fmt.Sprintf("must be between 0 and %d", int64(MaxLimit))}
		}
		k := w.Buckets
		if k == 0 {
			k = DefaultKeyBuckets
		}
		if w.Interval != q.wins[j].interval || uint64(k) != q.wins[j].k {
			return &ConfigError{Option: at("interval"), Value: w.Interval, Detail: fmt.Sprintf("must stay %v in %d buckets, as the counts are kept", q.wins[j].interval, q.wins[j].k)}
		}
	}
	pinned, err := pinnedOf(windows)
	if err != nil {
		return err
	}
	if q.same(windows, pinned) {
		return nil // a reload that changes nothing here stalls no decision
	}
	for i := range q.shards {
		q.shards[i].mu.Lock()
	}
	for j, w := range windows {
		q.wins[j].limit = w.Limit
	}
	q.pin(pinned, q.clock.Now())
	for i := range q.shards {
		q.shards[i].mu.Unlock()
	}
	return nil
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

// hash is the key's seeded hash.
func (q *KeyedQPS) hash(key string) uint64 { return maphash.String(q.seed, key) }

func (q *KeyedQPS) shard(h uint64) *keyShard { return &q.shards[h>>shardShift] }

// Allow decides whether one request with the given key may proceed now.
func (q *KeyedQPS) Allow(key string) (Decision, int) { return q.AllowNAt(q.clock.Now(), key, 1) }

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
	// Key is the key, cut to MaxShownKeyLength bytes.
	Key string
	// Allowed is how many of the key's requests the first window counts
	// now: those allowed in its last interval or so (its open bucket and
	// the k before it).
	Allowed int64
	// Blocked is how many of the key's requests were refused in the first
	// window's current interval and the one before.
	Blocked int64
}

// Top returns the hot keys (those with exact windows) that the limiter
// counts most of, at most n of them, busiest first: by allowed requests,
// or by blocked ones if byBlocked, then by key. Keys are shown cut to
// MaxShownKeyLength bytes and made valid UTF-8; keys that then read the
// same are added up into one, so that no two KeyStats name one key. Keys
// that stay in the sketch are not shown: they are the cold ones. Top takes
// each shard's mutex in turn and allocates its result.
func (q *KeyedQPS) Top(now int64, n int, byBlocked bool) []KeyStat {
	at := map[string]int{}
	var all []KeyStat
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		for e := range s.hot {
			st := s.stat(q, int32(e), now)
			if st.Allowed == 0 && st.Blocked == 0 {
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

// Bytes returns the heap the limiter takes now.
func (q *KeyedQPS) Bytes() int {
	b := 16384 // the limiter and its shards
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		for j := range s.sketch {
			b += sketchBytes(len(s.sketch[j].cells)/blockWords) + 8*len(s.sketch[j].seen)
		}
		b += len(s.hot) * hotEntryBytes(len(q.wins), q.stride)
		s.mu.Unlock()
	}
	return b
}

// clampCount is v as a sketch counter: a count is never above MaxLimit
// (a window's limit bounds what a key is allowed in it), and an estimate
// cut to MaxLimit is still at least that.
func clampCount(v int64) uint32 { return uint32(min(v, math.MaxUint32)) }
