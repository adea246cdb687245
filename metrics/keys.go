package metrics

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/exported"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/hooks"
	"github.com/slidegate/slidegate/internal/topn"
)

// defaultTopKeys is how many keys of each resource with per-key rules the
// Collector exports in each of its two key families, unless WithTopKeys
// says otherwise.
const defaultTopKeys = 10

// WithTopKeys sets how many keys of each resource with per-key rules
// ([slidegate.FlowRule].PerKey) the Collector exports in each key family
// (default 10): the n keys with the most requests allowed,
// and the n with the most blocked. A scrape then holds at most n series per
// such resource in each of the two families, whatever the number of keys.
// An n of 0 exports no key, and does not read them. A negative n makes
// registering the Collector fail with the reason.
//
// Keys come and go between scrapes as they get busy and quiet. Every key
// that was once among the busiest leaves a series, which Prometheus marks
// stale when it drops out. Over a day, the series of a family are the keys
// that took a turn at the top, not n. For a large fleet, where every
// instance exports its own keys, lower n. Or export none (0), and look at
// the keys on the dashboard instead.
func WithTopKeys(n int) Option {
	return func(o *options) { o.topKeys = n }
}

// keyDescs returns the descriptors of the key families for n keys, made with
// desc, or invalid ones that make registering fail if n is negative.
func keyDescs(desc func(name, help string, labels ...string) *prometheus.Desc, n int) (allowed, blocked *prometheus.Desc) {
	if n < 0 {
		err := fmt.Errorf("metrics: top keys = %d: must not be negative (0 exports no key)", n)
		return prometheus.NewInvalidDesc(err), prometheus.NewInvalidDesc(err)
	}
	const about = " Only keys over half their limit are tracked one by one. A key is cut to 64 bytes, its invalid UTF-8 replaced by U+FFFD, and keys that then read the same are added up. Keys come and go between scrapes: the series of a key that leaves the top goes stale."
	allowed = desc("top_key_requests_allowed",
		fmt.Sprintf("Requests of one of the busiest keys of a resource with per-key rules allowed in the last interval of its first per-key rule: the %d keys with the most, for each such resource.", n)+about,
		"resource", "key")
	blocked = desc("top_key_requests_blocked",
		fmt.Sprintf("Requests of one of the most blocked keys of a resource with per-key rules that those rules blocked, in the current and the previous interval of its first per-key rule: the %d keys with the most, for each such resource, and none with no request blocked.", n)+about,
		"resource", "key")
	return allowed, blocked
}

// collectKeys sends, for each resource with per-key rules in rules, its
// topKeys keys with the most requests allowed and those with the most
// blocked (Guard.TopKeys).
func (c *Collector) collectKeys(ch chan<- prometheus.Metric, rules slidegate.Rules) {
	if c.topKeys <= 0 {
		return
	}
	// The resources are the rules': the operator's, so their number is
	// bounded by the rules, not by the traffic. Resources whose names read
	// the same as label values share their keys.
	byResource := map[string][]slidegate.KeyStat{}
	shared := map[string]bool{} // labels of more than one resource
	asked := map[string]bool{}
	for _, f := range rules.Flow {
		if !f.PerKey || asked[f.Resource] {
			continue
		}
		asked[f.Resource] = true
		// Every key the guard tracks, in no order, not the first topKeys:
		// keys that read the same once cut and made label values are
		// added up before the busiest are chosen. The guard tracks a
		// bounded number of keys (those its key memory holds entries for,
		// and the overrides).
		if ks := hooks.Keys(c.guard, f.Resource); len(ks) > 0 {
			l := exported.Value(f.Resource)
			if _, ok := byResource[l]; ok {
				shared[l] = true
			}
			all := slices.Grow(byResource[l], len(ks))
			for _, k := range ks {
				all = append(all, slidegate.KeyStat(k))
			}
			byResource[l] = all
		}
	}
	for _, resource := range slices.Sorted(maps.Keys(byResource)) {
		keys := byKeyLabel(byResource[resource], shared[resource])
		sendTop(ch, c.keyAllowed, resource, keys, c.topKeys, func(k slidegate.KeyStat) int64 { return k.Allowed })
		sendTop(ch, c.keyBlocked, resource, keys, c.topKeys, func(k slidegate.KeyStat) int64 { return k.Blocked })
	}
}

// keyLabel returns key as a label value: cut to 64 bytes (slidegate.KeyStat's)
// bytes (as the guard shows it already) and made valid UTF-8. A key is any
// string a client sent.
func keyLabel(key string) string {
	return exported.Value(key[:min(len(key), flowlimits.MaxShownKeyLength)])
}

// byKeyLabel returns ks with their keys made label values, those that share
// a label added up into one, for two series with the same labels would
// fail the whole scrape. The keys of one resource are distinct: unless
// shared (the keys of several resources), they can share a label only if
// making one a label value changed it, and are then returned as they are.
func byKeyLabel(ks []slidegate.KeyStat, shared bool) []slidegate.KeyStat {
	changed := false
	for i := range ks {
		if l := keyLabel(ks[i].Key); l != ks[i].Key {
			ks[i].Key, changed = l, true
		}
	}
	if !changed && !shared {
		return ks
	}
	slices.SortFunc(ks, func(a, b slidegate.KeyStat) int { return strings.Compare(a.Key, b.Key) })
	out := ks[:0]
	for _, k := range ks {
		if n := len(out); n > 0 && out[n-1].Key == k.Key {
			out[n-1].Allowed += k.Allowed
			out[n-1].Blocked += k.Blocked
			continue
		}
		out = append(out, k)
	}
	return out
}

// sendTop sends the n keys of keys with the largest value, above zero,
// ties broken by key so that a scrape is stable. It selects them
// (topn.Select), reordering keys, without sorting the rest.
func sendTop(ch chan<- prometheus.Metric, d *prometheus.Desc, resource string, keys []slidegate.KeyStat, n int, value func(slidegate.KeyStat) int64) {
	top := topn.Select(keys, n, func(a, b slidegate.KeyStat) int {
		return cmp.Or(cmp.Compare(value(b), value(a)), strings.Compare(a.Key, b.Key))
	})
	for _, k := range top {
		if value(k) <= 0 {
			break
		}
		constMetric(ch, d, prometheus.GaugeValue, float64(value(k)), resource, k.Key)
	}
}
