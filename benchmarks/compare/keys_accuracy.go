package compare

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	sapi "github.com/alibaba/sentinel-golang/api"
	"github.com/alibaba/sentinel-golang/core/hotspot"
	sutil "github.com/alibaba/sentinel-golang/util"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// The per-key accuracy comparison: one limit that holds for every key on its
// own (KeyLimit requests per KeyInterval), offered the traffic of a hot key
// over its limit among very many cold keys, on simulated time. Every
// limiter sees the same arrivals, in the same order, at the same simulated
// times; from the requests each allowed, the measurement finds, for every
// key, the most allowed in any interval [a, a+interval), wherever a falls,
// and for the keys whose traffic stayed within their limit, how many were
// refused anyway.
//
// A per-key limiter must remember keys to keep its limit, and memory bounds
// how many it can: what it does when there are more keys than it can hold is
// what the patterns probe. Cold keys arrive by the hundred thousand per
// second, in a scan, at bucket edges, going cold and coming back, cycling
// among more keys than a cache holds, or drawn from a skewed distribution;
// one of them is an attacker who puts thousands of fresh keys between two
// requests of the hot key so that a cache of recent keys forgets it.

// The per-key simulation's defaults: 10 requests per key per second, and
// the seed of the random patterns.
const (
	KeyLimit    = 10
	KeyInterval = time.Second
	KeySeed     = 1
)

// A KeyScale is how much traffic the per-key patterns offer.
type KeyScale struct {
	// ColdRate is how many requests of keys other than the hot key arrive
	// per second of simulated time.
	ColdRate int
	// Duration is the simulated time of each pattern.
	Duration time.Duration
}

// KeyScaleFull is the scale of cmd/keytable: about two million requests of
// cold keys per pattern, most of them of keys never seen before, so that
// every pattern brings over a million distinct keys.
var KeyScaleFull = KeyScale{ColdRate: 200_000, Duration: 10 * time.Second}

// KeyScaleQuick is the scale of go test: the same patterns on a tenth of the
// keys, over a shorter time. The eviction attack keeps its own rate (see
// evictBetween), so that it works at every scale.
var KeyScaleQuick = KeyScale{ColdRate: 20_000, Duration: 2 * time.Second}

// evictBetween is how many fresh keys the eviction attack puts between two
// requests of the hot key: more than sentinel's hotspot cache holds for a
// 1 s rule (hotspot.ParamsCapacityBase, 4,000 keys) and more than the exact
// windows a slidegate limiter starts with (512; they
// grow, and the hot key, over its limit, is the attacker's to take). The
// attack needs a cold rate of about limit × evictBetween per second to
// offer the hot key more than its limit, and takes at least twice that.
const evictBetween = 5000

// attackKeys is how many keys the cycling attacker goes round: twice
// sentinel's cache for a 1 s rule, and more than the exact windows a
// slidegate limiter starts with.
const attackKeys = 8000

// The bounds of KeyAccuracy's arguments, which keep a pattern's arrivals
// (16 bytes each, about the cold rate times the duration, and a few times
// the limit per key) within a few hundred MiB.
const (
	maxColdRate    = 2_000_000
	maxKeyDuration = time.Minute
	maxKeyLimit    = 1000
)

// hotKey is the hot key's number; cold keys are numbered from 1.
const hotKey = 0

// keyName returns the key of number id, as a limiter is given it: "hot" for
// the hot key, "key-<id>" for the others.
func keyName(id uint32) string {
	if id == hotKey {
		return "hot"
	}
	return "key-" + strconv.FormatUint(uint64(id), 10)
}

// A keyArrival is one request of a key at a simulated time (nanoseconds
// from the start of the pattern).
type keyArrival struct {
	at  int64
	key uint32
}

// A KeyPattern is the traffic of many keys, the hot key among them.
type KeyPattern struct {
	Name string
	gen  func(g *keyGen)
}

// A keyGen collects a pattern's arrivals within its duration.
type keyGen struct {
	rng      *rand.Rand
	scale    KeyScale
	limit    int64
	interval int64
	out      []keyArrival
	next     uint32 // the next fresh key
}

// add adds n requests of key at time t, if t is within the pattern.
func (g *keyGen) add(t int64, key uint32, n int64) {
	if t < 0 || t >= int64(g.scale.Duration) {
		return
	}
	for range n {
		g.out = append(g.out, keyArrival{t, key})
	}
}

// fresh returns a key never used before.
func (g *keyGen) fresh() uint32 {
	g.next++
	return g.next
}

// every calls f(t) at 0, step, 2 step, ... within the pattern.
func (g *keyGen) every(step int64, f func(t int64)) {
	for t := int64(0); t < int64(g.scale.Duration); t += max(step, 1) {
		f(t)
	}
}

// hotOver offers the hot key factor times its limit, evenly spaced.
func (g *keyGen) hotOver(factor int64) {
	g.every(g.interval/(factor*g.limit), func(t int64) { g.add(t, hotKey, 1) })
}

// coldStep is the time between two requests of cold keys.
func (g *keyGen) coldStep() int64 { return int64(time.Second) / int64(g.scale.ColdRate) }

// KeyPatterns returns the per-key traffic patterns. The hot key is over its
// limit in every one; cold keys are within theirs unless said otherwise.
//
//   - scan: every cold key once, in order, and never again; the hot key at
//     5 × its limit, evenly spaced.
//   - rescan at half the limit: a population of keys visited in turn, each
//     sending half its limit at once and coming back 1.1 intervals later;
//     the hot key at 5 ×.
//   - edge bursts: at every edge of a tenth of the interval (slidegate's
//     buckets), fresh cold keys 1 ns before the edge and on it, and fresh
//     keys sending half their limit 1 ns before and half on it; every other
//     edge, the hot key sends its whole limit 1 ns before and again on it.
//   - go cold, come back: fresh keys flood in while others send their limit,
//     fall silent for a quarter, a half, 0.9, one less 1 ns, one, one and a
//     half or three intervals (the first four are over their limit) and send
//     it again; the hot key sends its limit every half interval.
//   - evict the hot key: one request of the hot key, then evictBetween fresh
//     keys, again and again, at at least twice the limit for the hot key.
//   - attacker cycling 8,000 keys: an attacker goes round attackKeys keys at
//     the cold rate, each key coming back every attackKeys requests (25 per
//     second at KeyScaleFull, over its limit); the hot key at 5 ×.
//   - zipf: Poisson arrivals at the cold rate, of keys drawn from a Zipf
//     distribution (s = 1.1) over as many keys as the pattern has requests:
//     the hot key is the most frequent, some keys are over the limit, most
//     come once or a few times.
func KeyPatterns() []KeyPattern {
	return []KeyPattern{
		{"scan", func(g *keyGen) {
			g.hotOver(5)
			g.every(g.coldStep(), func(t int64) { g.add(t, g.fresh(), 1) })
		}},
		{"rescan at half the limit", func(g *keyGen) {
			g.hotOver(5)
			half := max(g.limit/2, 1)
			// Each visit sends half requests; visits come every
			// half × coldStep, so a key's turn comes back after
			// population visits, 1.1 intervals.
			step := half * g.coldStep()
			population := max(uint32(11*g.interval/(10*step)), 1)
			i := uint32(0)
			g.every(step, func(t int64) {
				g.add(t, 1+i%population, half)
				i++
			})
			g.next = population
		}},
		{"edge bursts", func(g *keyGen) {
			w := g.interval / int64(flowlimits.DefaultKeyBuckets)
			perEdge := int64(g.scale.ColdRate) * w / int64(time.Second)
			half := max(g.limit/2, 1)
			for e, k := w, 0; e < int64(g.scale.Duration); e, k = e+w, k+1 {
				if k%2 == 0 {
					g.add(e-1, hotKey, g.limit)
					g.add(e, hotKey, g.limit)
				}
				for range perEdge / 2 {
					g.add(e-1, g.fresh(), 1)
					g.add(e, g.fresh(), 1)
				}
				for range max(perEdge/100, 1) {
					k := g.fresh()
					g.add(e-1, k, half)
					g.add(e, k, g.limit-half)
				}
			}
		}},
		{"go cold, come back", func(g *keyGen) {
			gaps := []int64{g.interval / 4, g.interval / 2, 9 * g.interval / 10, g.interval - 1,
				g.interval, 3 * g.interval / 2, 3 * g.interval}
			for t := int64(0); t < int64(g.scale.Duration); t += g.interval / 2 {
				g.add(t+g.interval/3, hotKey, g.limit)
			}
			// Half the cold rate is fresh keys, the other half keys that
			// come back: tick after tick, each sending its limit twice.
			g.every(2*g.coldStep(), func(t int64) { g.add(t, g.fresh(), 1) })
			tick := g.interval / 100
			perTick := max(int64(g.scale.ColdRate)*tick/int64(time.Second)/(4*g.limit), 1)
			g.every(tick, func(t int64) {
				for range perTick {
					k := g.fresh()
					g.add(t, k, g.limit)
					g.add(t+gaps[k%uint32(len(gaps))], k, g.limit)
				}
			})
		}},
		{"evict the hot key", func(g *keyGen) {
			rate := max(int64(g.scale.ColdRate), 2*g.limit*(evictBetween+1)*int64(time.Second)/g.interval)
			step := int64(time.Second) / rate
			i := 0
			g.every(step, func(t int64) {
				if i%(evictBetween+1) == 0 {
					g.add(t, hotKey, 1)
				} else {
					g.add(t, g.fresh(), 1)
				}
				i++
			})
		}},
		{"attacker cycling 8,000 keys", func(g *keyGen) {
			g.hotOver(5)
			i := uint32(0)
			g.every(g.coldStep(), func(t int64) {
				g.add(t, 1+i%attackKeys, 1)
				i++
			})
			g.next = attackKeys
		}},
		{"zipf", func(g *keyGen) {
			n := uint64(g.scale.ColdRate) * uint64(g.scale.Duration/time.Second)
			z := rand.NewZipf(g.rng, 1.1, 1, n)
			mean := float64(time.Second) / float64(g.scale.ColdRate)
			for t := g.rng.ExpFloat64() * mean; t < float64(g.scale.Duration); t += g.rng.ExpFloat64() * mean {
				g.add(int64(t), uint32(z.Uint64()), 1) // key 0, the most frequent, is the hot key
			}
			g.next = uint32(n)
		}},
	}
}

// arrivals generates the pattern's arrivals in time order (those at the
// same time in the order generated), and the number of key numbers used.
func (p KeyPattern) arrivals(scale KeyScale, limit int64, interval time.Duration, seed uint64) ([]keyArrival, int) {
	g := &keyGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), scale: scale, limit: limit, interval: int64(interval)}
	p.gen(g)
	slices.SortStableFunc(g.out, func(a, b keyArrival) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	return g.out, int(g.next) + 1
}

// A KeyLimiter is a per-key limiter run through the simulation.
type KeyLimiter struct {
	Name string
	Ours bool // slidegate's: the one whose bound is guaranteed
	// New returns a fresh limiter of limit requests per key per interval,
	// as an allow function of the simulated time (nanoseconds from the
	// start of the pattern) and the key, and a function to call when the
	// run is over.
	New func(limit int64, interval time.Duration) (allow func(now int64, key string) bool, done func(), err error)
}

// KeyLimiters returns the per-key limiters compared, in table order.
func KeyLimiters() []KeyLimiter {
	return []KeyLimiter{
		{Name: "slidegate per-key rule", Ours: true, New: newKeyedGuardAllow},
		{Name: "slidegate flow.KeyedQPS", Ours: true, New: newKeyedQPSAllow},
		{Name: "sentinel hotspot rule", New: newHotspotAllow},
	}
}

// keySimStart is the time on slidegate's manual clock at which a pattern
// starts: a whole number of intervals, so that the buckets' edges (aligned
// to multiples of their width on the clock) fall where the edge bursts
// pattern puts its bursts.
const keySimStart = int64(1000 * time.Second)

// newKeyedGuardAllow runs a guard with one per-key QPS rule (default
// buckets: 10 per interval) on a manual clock, through Enter with WithKey
// and Exit: the whole path of a request.
func newKeyedGuardAllow(limit int64, interval time.Duration) (func(int64, string) bool, func(), error) {
	c := clock.NewManual(keySimStart)
	g, err := slidegate.New(slidegate.WithClock(c))
	if err != nil {
		return nil, nil, err
	}
	const res = "keyed"
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: res, Limit: limit, Interval: slidegate.Duration(interval), PerKey: true,
	}}}); err != nil {
		return nil, nil, err
	}
	ctx := context.Background()
	return func(now int64, key string) bool {
		c.Set(keySimStart + now)
		e, err := g.Enter(ctx, res, slidegate.WithKey(key))
		if err != nil {
			return false
		}
		e.Exit(nil)
		return true
	}, func() {}, nil
}

// newKeyedQPSAllow runs flow.KeyedQPS with one window (default buckets)
// through AllowNAt.
func newKeyedQPSAllow(limit int64, interval time.Duration) (func(int64, string) bool, func(), error) {
	q, err := flow.NewKeyedQPS(flow.KeyedQPSSettings{Windows: []flow.KeyWindow{{Limit: limit, Interval: interval}}})
	if err != nil {
		return nil, nil, err
	}
	return func(now int64, key string) bool {
		d, _ := q.AllowNAt(keySimStart+now, key, 1)
		return d.Allowed
	}, func() {}, nil
}

// hotspotRuns numbers the sentinel resources of the per-key runs: sentinel's
// rules and statistics are global, so every run takes a fresh resource.
var hotspotRuns atomic.Int64

// hotspotRule returns sentinel's hotspot rule limiting each value of the
// first argument of Entry (api.WithArgs) on res to limit requests per
// interval, rejecting the rest, with the defaults otherwise: no burst, and
// ParamsMaxCapacity 0, which keeps the last min(20,000, 4,000 × seconds)
// values in its caches (4,000 for a 1 s rule).
func hotspotRule(res string, limit int64, interval time.Duration) *hotspot.Rule {
	return &hotspot.Rule{
		Resource:        res,
		MetricType:      hotspot.QPS,
		ControlBehavior: hotspot.Reject,
		ParamIndex:      0,
		Threshold:       limit,
		DurationInSec:   int64(interval / time.Second),
	}
}

// hotspotCapacity is how many values sentinel's hotspot caches keep for a QPS
// rule with ParamsMaxCapacity 0, as hotspot's traffic shaping computes it.
func hotspotCapacity(interval time.Duration) int {
	return int(min(hotspot.ParamsMaxCapacity, hotspot.ParamsCapacityBase*int64(interval/time.Second)))
}

// loadHotspotRule loads the rule on a fresh resource and returns the
// resource and a function that removes the rule.
func loadHotspotRule(limit int64, interval time.Duration) (string, func(), error) {
	if interval <= 0 || interval%time.Second != 0 {
		return "", nil, fmt.Errorf("interval %v is not whole seconds, as sentinel's hotspot rules count them", interval)
	}
	quietSentinel()
	res := fmt.Sprintf("keys-%d", hotspotRuns.Add(1))
	if _, err := hotspot.LoadRulesOfResource(res, []*hotspot.Rule{hotspotRule(res, limit, interval)}); err != nil {
		return "", nil, err
	}
	return res, func() { _ = hotspot.ClearRulesOfResource(res) }, nil
}

// newHotspotAllow runs sentinel's hotspot rule through api.Entry with the
// key as the parameter (api.WithArgs), the whole slot chain, on simulated
// time: sentinel's clock is replaced as in newSentinelAllow, before the rule
// is loaded, and put back by done.
func newHotspotAllow(limit int64, interval time.Duration) (func(int64, string) bool, func(), error) {
	prev := sutil.CurrentClock()
	c := new(simClock)
	c.set(simEpoch)
	sutil.SetClock(c)
	res, unload, err := loadHotspotRule(limit, interval)
	if err != nil {
		sutil.SetClock(prev)
		return nil, nil, err
	}
	return func(now int64, key string) bool {
			c.set(simEpoch + now)
			e, blocked := sapi.Entry(res, sapi.WithArgs(key))
			if blocked != nil {
				return false
			}
			e.Exit()
			return true
		}, func() {
			unload()
			sutil.SetClock(prev)
		}, nil
}

// A KeyResult is what one per-key run measured.
type KeyResult struct {
	Pattern string
	Offered int64 // requests that arrived
	Allowed int64 // requests allowed
	Keys    int   // distinct keys that sent requests

	HotOffered, HotAllowed int64
	// HotMax is the most requests of the hot key allowed in any interval
	// [a, a+interval), over every a.
	HotMax int64
	// MaxKey is the most requests of one key allowed in any interval, over
	// every key and every a; WorstKey is that key (the first found).
	MaxKey   int64
	WorstKey string
	// KeysOver is how many keys were allowed more than the limit in some
	// interval.
	KeysOver int

	// The keys other than the hot key that were offered at most the limit
	// in every interval, the keys the limit should not touch, in two
	// classes by the most they were offered in one interval: at most half
	// the limit (Cold), and more than half (Near). Refused counts the keys
	// refused at least once.
	Cold, ColdRefused int
	Near, NearRefused int
	// WithinOffered and WithinRefused count the requests of both classes.
	WithinOffered, WithinRefused int64
}

// A KeyTable is one limiter's results, one per pattern.
type KeyTable struct {
	Limiter KeyLimiter
	Results []KeyResult
}

// KeyAccuracy runs every limiter of KeyLimiters through every pattern of
// KeyPatterns at the given scale, a fresh limiter per pattern, all limiters
// on the same arrivals. progress, if not nil, is told how long each run
// took.
func KeyAccuracy(scale KeyScale, limit int64, interval time.Duration, seed uint64, progress io.Writer) ([]KeyTable, error) {
	if scale.ColdRate <= 0 || scale.ColdRate > maxColdRate {
		return nil, fmt.Errorf("cold rate %d: must be between 1 and %d per second", scale.ColdRate, maxColdRate)
	}
	if scale.Duration < interval || scale.Duration > maxKeyDuration {
		return nil, fmt.Errorf("duration %v: must be between the interval (%v) and %v", scale.Duration, interval, maxKeyDuration)
	}
	if interval%time.Second != 0 {
		return nil, fmt.Errorf("interval %v: must be whole seconds, as sentinel's hotspot rules count them", interval)
	}
	if limit < 2 || limit > maxKeyLimit {
		return nil, fmt.Errorf("limit %d: must be between 2 and %d (the patterns offer a few times the limit per key)", limit, maxKeyLimit)
	}
	limiters := KeyLimiters()
	tables := make([]KeyTable, len(limiters))
	for i, l := range limiters {
		tables[i].Limiter = l
	}
	for _, p := range KeyPatterns() {
		arr, keys := p.arrivals(scale, limit, interval, seed)
		idx := indexByKey(arr, keys)
		offered := idx.offeredMax(arr, int64(interval))
		admitted := make([]bool, len(arr))
		distinct := idx.distinct()
		for i, l := range limiters {
			start := time.Now()
			allow, done, err := l.New(limit, interval)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.Name, err)
			}
			for j, a := range arr {
				admitted[j] = allow(a.at, keyName(a.key))
			}
			done()
			tables[i].Results = append(tables[i].Results, idx.measure(p.Name, arr, admitted, offered, limit, int64(interval)))
			if progress != nil {
				fmt.Fprintf(progress, "keytable: %s, %s: %d requests, %d keys, %v\n",
					l.Name, p.Name, len(arr), distinct, time.Since(start).Round(time.Millisecond))
			}
		}
	}
	return tables, nil
}

// A keyIndex lists the arrivals of each key, in time order: those of key k
// are order[start[k]:start[k+1]], as indexes into the arrivals.
type keyIndex struct {
	start []uint32
	order []uint32
}

// indexByKey sorts the arrivals' indexes by key (counting sort, stable, so
// each key's stay in time order).
func indexByKey(arr []keyArrival, keys int) keyIndex {
	start := make([]uint32, keys+1)
	for _, a := range arr {
		start[a.key+1]++
	}
	for k := 1; k <= keys; k++ {
		start[k] += start[k-1]
	}
	order := make([]uint32, len(arr))
	next := slices.Clone(start[:keys])
	for i, a := range arr {
		order[next[a.key]] = uint32(i)
		next[a.key]++
	}
	return keyIndex{start: start, order: order}
}

// distinct returns how many keys have arrivals.
func (x keyIndex) distinct() int {
	n := 0
	for k := 0; k+1 < len(x.start); k++ {
		if x.start[k+1] > x.start[k] {
			n++
		}
	}
	return n
}

// maxIn returns the most of the given arrivals (indexes, in time order)
// that fall in one interval [a, a+length), over every a, counting only
// those for which keep is true (all if keep is nil). The most is reached by
// an interval that ends just after a counted arrival, so a two-pointer
// sweep finds it: in counts the kept arrivals from idx[i] to the current
// one.
func maxIn(arr []keyArrival, idx []uint32, keep []bool, length int64) int64 {
	var best, in int64
	i := 0
	for _, aj := range idx {
		if keep != nil && !keep[aj] {
			continue
		}
		in++
		for ; ; i++ {
			ai := idx[i]
			if keep != nil && !keep[ai] {
				continue
			}
			if arr[aj].at-arr[ai].at < length {
				break // aj itself stops the sweep
			}
			in--
		}
		best = max(best, in)
	}
	return best
}

// offeredMax returns, per key, the most requests it was offered in one
// interval.
func (x keyIndex) offeredMax(arr []keyArrival, length int64) []int64 {
	m := make([]int64, len(x.start)-1)
	for k := range m {
		m[k] = maxIn(arr, x.order[x.start[k]:x.start[k+1]], nil, length)
	}
	return m
}

// measure computes a run's result from what it admitted.
func (x keyIndex) measure(pattern string, arr []keyArrival, admitted []bool, offeredMax []int64, limit, length int64) KeyResult {
	r := KeyResult{Pattern: pattern, Offered: int64(len(arr))}
	for k := range offeredMax {
		idx := x.order[x.start[k]:x.start[k+1]]
		if len(idx) == 0 {
			continue
		}
		r.Keys++
		var allowed int64
		for _, i := range idx {
			if admitted[i] {
				allowed++
			}
		}
		r.Allowed += allowed
		most := maxIn(arr, idx, admitted, length)
		if most > r.MaxKey {
			r.MaxKey, r.WorstKey = most, keyName(uint32(k))
		}
		if most > limit {
			r.KeysOver++
		}
		if k == hotKey {
			r.HotOffered, r.HotAllowed, r.HotMax = int64(len(idx)), allowed, most
		} else if offered := offeredMax[k]; offered <= limit {
			refused := int64(len(idx)) - allowed
			r.WithinOffered += int64(len(idx))
			r.WithinRefused += refused
			if offered <= limit/2 {
				r.Cold++
				r.ColdRefused += b2int(refused > 0)
			} else {
				r.Near++
				r.NearRefused += b2int(refused > 0)
			}
		}
	}
	return r
}

// b2int returns 1 for true, 0 for false.
func b2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WriteKeyTable writes one limiter's results as a markdown table.
func WriteKeyTable(w io.Writer, t KeyTable, limit int64) error {
	if _, err := fmt.Fprintf(w, "| limiter | pattern | requests | keys | hot key: allowed / offered | hot key: most in any interval | × limit | any key: most in any interval | × limit | keys allowed over the limit | keys within ½ limit: refused | keys within the limit, above ½: refused | their requests refused |\n"+
		"|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"); err != nil {
		return err
	}
	for _, r := range t.Results {
		if _, err := fmt.Fprintf(w, "| %s | %s | %s | %s | %s / %s | %d | %.2f | %d (%s) | %.2f | %s | %s | %s | %s |\n",
			t.Limiter.Name, r.Pattern, thousands(int(r.Offered)), thousands(r.Keys),
			thousands(int(r.HotAllowed)), thousands(int(r.HotOffered)), r.HotMax, float64(r.HotMax)/float64(limit),
			r.MaxKey, r.WorstKey, float64(r.MaxKey)/float64(limit), thousands(r.KeysOver),
			share(int64(r.ColdRefused), int64(r.Cold)), share(int64(r.NearRefused), int64(r.Near)),
			share(r.WithinRefused, r.WithinOffered)); err != nil {
			return err
		}
	}
	return nil
}

// WriteKeySummary writes, per limiter and over every pattern, the most
// requests of one key allowed in any interval, and the keys within their
// limit that were refused.
func WriteKeySummary(w io.Writer, tables []KeyTable, limit int64) error {
	if _, err := fmt.Fprintf(w, "| limiter | any key: most in any interval | × limit | keys within ½ limit: refused | keys within the limit, above ½: refused | their requests refused |\n|---|--:|--:|--:|--:|--:|\n"); err != nil {
		return err
	}
	for _, t := range tables {
		var most, cold, coldRefused, near, nearRefused, offered, refused int64
		for _, r := range t.Results {
			most = max(most, r.MaxKey)
			cold += int64(r.Cold)
			coldRefused += int64(r.ColdRefused)
			near += int64(r.Near)
			nearRefused += int64(r.NearRefused)
			offered += r.WithinOffered
			refused += r.WithinRefused
		}
		if _, err := fmt.Fprintf(w, "| %s | %d | %.2f | %s | %s | %s |\n", t.Limiter.Name, most, float64(most)/float64(limit),
			share(coldRefused, cold), share(nearRefused, near), share(refused, offered)); err != nil {
			return err
		}
	}
	return nil
}

// share writes part of whole, and as a percentage.
func share(part, whole int64) string {
	if whole == 0 {
		return "–"
	}
	return fmt.Sprintf("%s of %s (%.3f%%)", thousands(int(part)), thousands(int(whole)), 100*float64(part)/float64(whole))
}
