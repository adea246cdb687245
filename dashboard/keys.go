package dashboard

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/rulekind"
	"github.com/slidegate/slidegate/internal/topn"
)

// The top keys. A resource with per-key rules (slidegate.FlowRule.PerKey)
// limits each key (a user, a tenant, a client address) on its own, and
// there may be millions of keys; the guard tracks the busiest of them
// (Guard.TopKeys), a bounded number. Each sample, the dashboard reads them
// for at most maxKeyedResources resources and keeps, for each, the topKeys
// keys with the most requests allowed and the topKeys with the most
// blocked: at most 2·topKeys keys a resource, of at most
// 64 bytes each, whatever the clients send. Keys are
// what clients chose: the page writes them as text, never as markup.

// maxKeyedResources is how many resources with per-key rules a sample
// reads the keys of, and a frame carries them for: those with the most
// requests blocked in the last 10 seconds, then by name.
const maxKeyedResources = 16

// keyedResources returns the resources of rules whose keys the guard
// tracks (those with a per-key QPS rule of their own, not a cluster's:
// Guard.TopKeys), each with the interval of its first such rule, which the
// keys' counts cover.
func keyedResources(rules slidegate.Rules) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, f := range rules.Flow {
		if !f.PerKey || f.Cluster || !rulekind.Of(string(f.Type)).TopKeys {
			continue
		}
		if _, ok := out[f.Resource]; !ok {
			out[f.Resource] = cmp.Or(time.Duration(f.Interval), time.Second)
		}
	}
	return out
}

// observeKeys reads the top keys of the resources with per-key rules (at
// most maxKeyedResources, the most blocked first) into their series, and
// clears those of every other series. d.sampling is held.
func (d *Dashboard) observeKeys(rules slidegate.Rules) {
	var keyed []*series
	intervals := keyedResources(rules)
	for name, s := range d.series {
		s.keys = nil
		if _, ok := intervals[name]; ok && d.topKeys > 0 {
			keyed = append(keyed, s)
		}
	}
	slices.SortFunc(keyed, func(a, b *series) int {
		if c := cmp.Compare(b.stats.Blocked, a.stats.Blocked); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for _, s := range keyed[:min(len(keyed), maxKeyedResources)] {
		// Every key the guard tracks, so that keys that read the same
		// once cut are added up before the busiest are chosen.
		all := d.g.TopKeys(s.name, math.MaxInt, false)
		s.keys = &keysJSON{Interval: intervals[s.name].Seconds(), Top: topKeys(all, d.topKeys)}
	}
}

// topKeys returns the n keys of ks with the most requests allowed and the n
// with the most blocked (none with 0 blocked): at most 2·n keys, by allowed
// then blocked, most first, then by key. Keys that read the same, cut to 64 bytes
// and made valid UTF-8 as JSON writes them, are added up: the page could not
// tell them apart. ks is reordered.
func topKeys(ks []slidegate.KeyStat, n int) []keyJSON {
	for i := range ks {
		k := ks[i].Key
		ks[i].Key = strings.ToValidUTF8(k[:min(len(k), flowlimits.MaxShownKeyLength)], "\uFFFD")
	}
	slices.SortFunc(ks, func(a, b slidegate.KeyStat) int { return strings.Compare(a.Key, b.Key) })
	merged := ks[:0]
	for _, k := range ks {
		if m := len(merged); m > 0 && merged[m-1].Key == k.Key {
			merged[m-1].Allowed += k.Allowed
			merged[m-1].Blocked += k.Blocked
			continue
		}
		merged = append(merged, k)
	}
	byBlocked := func(a, b slidegate.KeyStat) int {
		return cmp.Or(cmp.Compare(b.Blocked, a.Blocked), cmp.Compare(b.Allowed, a.Allowed), strings.Compare(a.Key, b.Key))
	}
	byAllowed := func(a, b slidegate.KeyStat) int {
		return cmp.Or(cmp.Compare(b.Allowed, a.Allowed), cmp.Compare(b.Blocked, a.Blocked), strings.Compare(a.Key, b.Key))
	}
	// The union of the n most blocked and the n busiest, each selected
	// without sorting the rest.
	top := make([]slidegate.KeyStat, 0, 2*n)
	chosen := make(map[string]bool, n)
	for _, k := range topn.Select(merged, n, byBlocked) {
		if k.Blocked == 0 {
			break
		}
		top = append(top, k)
		chosen[k.Key] = true
	}
	for _, k := range topn.Select(merged, n, byAllowed) {
		if !chosen[k.Key] {
			top = append(top, k)
		}
	}
	slices.SortFunc(top, byAllowed)

	out := make([]keyJSON, len(top))
	for i, k := range top {
		out[i] = keyJSON{Key: k.Key, Allowed: k.Allowed, Blocked: k.Blocked}
	}
	return out
}
