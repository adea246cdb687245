package envoyrls

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/slidegate/slidegate/internal/flowstate"
)

// Bounds of the stats: the series by value (detailed_metric,
// value_to_metric) are at most maxValueSeries, each key cut to
// maxStatsKeyBytes; past them, a descriptor counts in its rule's series.
const (
	maxValueSeries   = 1000
	maxStatsKeyBytes = 256
)

// overrideRule names, in a domain's stats, the descriptors that set their
// own limit.
const overrideRule = "(limit of the request)"

// Stats are what a service decided since it started.
type Stats struct {
	// Rules are the hits of each rule, and of each value that a rule
	// counts apart (detailed_metric, value_to_metric), by Domain and Key.
	Rules []RuleStats
	// Requests counts the requests answered OK, OverLimit those answered
	// OVER_LIMIT, and Invalid those refused with a status.
	Requests, OverLimit, Invalid uint64
	// ConfigLoads counts the configs that Follow put in force, and
	// ConfigRefused those it refused for a problem, the one in force
	// staying.
	ConfigLoads, ConfigRefused uint64
	// KeyMemory is the heap that the windows hold now, of KeyMemoryLimit.
	KeyMemory, KeyMemoryLimit int64
}

// RuleStats are the hits of one rule, or of one value of it.
type RuleStats struct {
	Domain string
	// Key names the rule by its descriptors below the domain, as
	// envoyproxy/ratelimit's stats do: "database_users", "foo.bar".
	Key string
	// Hits are the hits asked. Each is WithinLimit, OverLimit (refused),
	// or ShadowMode (over the limit of a rule in shadow mode, allowed).
	Hits, WithinLimit, OverLimit, ShadowMode uint64
	// NearLimit counts the hits within the limit that took their key's
	// window past 80 % of the limit, as envoyproxy/ratelimit's near_limit
	// with its default NEAR_LIMIT_RATIO.
	NearLimit uint64
}

// A series counts the hits of one stats key.
type series struct {
	domain, key                    string
	byValue                        bool
	hits, within, over, shadowMode atomic.Uint64
	near                           atomic.Uint64
}

// A seriesKey is the domain and the key of a series.
type seriesKey struct{ domain, key string }

// statsBook holds the series of a service: those of the rules in force,
// by rule, swapped with the config; and those by value, kept as long as
// the service, at most maxValueSeries.
type statsBook struct {
	requests, overLimit, invalid atomic.Uint64
	loads, refused               atomic.Uint64

	mu     sync.Mutex
	byKey  map[seriesKey]*series // every series ever made, by domain and key
	values int                   // the series by value among them
}

// series returns the series of domain and key, made if new; one by value
// only while there is room, else nil.
func (b *statsBook) series(domain, key string, byValue bool) *series {
	full := seriesKey{domain, key}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.byKey[full]; s != nil {
		return s
	}
	if byValue {
		if b.values >= maxValueSeries {
			return nil
		}
		b.values++
	}
	if b.byKey == nil {
		b.byKey = map[seriesKey]*series{}
	}
	s := &series{domain: domain, key: key, byValue: byValue}
	b.byKey[full] = s
	return s
}

// rules returns the series of c's rules, and drops those of rules gone.
func (b *statsBook) rules(c *Config) map[*rule]*series {
	out := map[*rule]*series{}
	keep := map[*series]bool{}
	for d := range c.domains {
		keep[b.series(d, overrideRule, false)] = true
	}
	walk(c, func(r *rule) {
		d, _, _ := strings.Cut(r.id, ".")
		x := b.series(d, ruleKey(r), false)
		out[r], keep[x] = x, true
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, x := range b.byKey {
		if !x.byValue && !keep[x] {
			delete(b.byKey, k)
		}
	}
	return out
}

// count adds a descriptor's hits to s, by how it was answered.
func (s *series) count(it *item, over bool) {
	s.hits.Add(uint64(it.hits))
	switch {
	case over:
		s.over.Add(uint64(it.hits))
	case !it.fits && it.shadow:
		s.shadowMode.Add(uint64(it.hits))
	default:
		s.within.Add(uint64(it.hits))
		if n := nearLimit(it); n > 0 {
			s.near.Add(n)
		}
	}
}

// nearLimitRatio is the share of a limit past which hits within it are
// near it: envoyproxy/ratelimit's default NEAR_LIMIT_RATIO, in float32 as
// there, so that the threshold is the same for every limit.
const nearLimitRatio float32 = 0.8

// nearLimit returns how many of a descriptor's hits, within its limit,
// took its key's use past the near threshold, floor(limit x 0.8). The
// use before them is what the key's window holds (less what it has left)
// and what earlier descriptors of the same key in the request ask: of a
// limit of 10, a key holding 7 that asks 3 more has 2 near.
func nearLimit(it *item) uint64 {
	limit := int64(it.answer.GetRequestsPerUnit())
	threshold := int64(math.Floor(float64(float32(limit) * nearLimitRatio)))
	before := max(limit-it.left, 0) + it.need - it.hits
	after := before + it.hits
	if it.hits <= 0 || after <= threshold {
		return 0
	}
	return uint64(after - max(before, threshold))
}

// ruleKey is a rule's stats key below its domain.
func ruleKey(r *rule) string {
	_, k, _ := strings.Cut(r.id, ".")
	return k
}

// memInUse is the heap the windows hold now.
func (s *Service) memInUse() int64 {
	inUse, _ := flowstate.KeyMemory(s.mem)
	return inUse
}

// Stats returns what the service decided since it started, the rules of
// the config in force and the values counted apart.
func (s *Service) Stats() Stats {
	b := &s.stats
	st := Stats{
		Requests:       b.requests.Load(),
		OverLimit:      b.overLimit.Load(),
		Invalid:        b.invalid.Load(),
		ConfigLoads:    b.loads.Load(),
		ConfigRefused:  b.refused.Load(),
		KeyMemory:      s.memInUse(),
		KeyMemoryLimit: s.memMax,
	}
	b.mu.Lock()
	all := make([]*series, 0, len(b.byKey))
	for _, x := range b.byKey {
		all = append(all, x)
	}
	b.mu.Unlock()
	for _, x := range all {
		st.Rules = append(st.Rules, RuleStats{
			Domain: x.domain, Key: x.key, Hits: x.hits.Load(),
			WithinLimit: x.within.Load(), OverLimit: x.over.Load(), ShadowMode: x.shadowMode.Load(),
			NearLimit: x.near.Load(),
		})
	}
	slices.SortFunc(st.Rules, func(a, b RuleStats) int {
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.Key, b.Key))
	})
	return st
}
