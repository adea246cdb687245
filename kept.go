package slidegate

import (
	"maps"
	"math"
)

// keptRules are the rules in force as they were given, which Guard.Rules
// returns and a new set of rules is matched against. Most rules are a
// resource and a limit (a QPS rule with its defaults), or a resource, a
// strategy and its threshold or count (a breaker with its defaults): such
// a rule is kept as those fields alone, a few words, and any other rule
// whole. A guard of many resources so keeps a fifth of the bytes it kept
// for rules as given.
type keptRules struct {
	flow     []keptFlow
	breakers []keptBreaker
	shadow   bool
}

// A keptFlow is a flow rule kept: whole if it is more than a resource and
// a limit.
type keptFlow struct {
	resource string
	limit    int64
	whole    *FlowRule // nil: FlowRule{Resource: resource, Limit: limit}
}

// A keptBreaker is a breaker rule kept: whole if it is more than a
// resource, a strategy, a threshold and a count.
type keptBreaker struct {
	resource  string
	strategy  BreakerStrategy
	threshold float64
	count     int64
	whole     *BreakerRule // nil: the rule is those four fields
}

// keep returns rules, which the guard owns, kept.
func keep(rules Rules) keptRules {
	k := keptRules{shadow: rules.Shadow}
	if rules.Flow != nil {
		k.flow = make([]keptFlow, len(rules.Flow))
	}
	if rules.Breakers != nil {
		k.breakers = make([]keptBreaker, len(rules.Breakers))
	}
	for i := range rules.Flow {
		f := &rules.Flow[i]
		k.flow[i] = keptFlow{resource: f.Resource, limit: f.Limit}
		if !f.plain() {
			whole := *f // a copy: a pointer into rules would keep all of them
			k.flow[i].whole = &whole
		}
	}
	for i := range rules.Breakers {
		b := &rules.Breakers[i]
		k.breakers[i] = keptBreaker{resource: b.Resource, strategy: b.Strategy, threshold: b.Threshold, count: b.Count}
		if !b.plain() {
			whole := *b
			k.breakers[i].whole = &whole
		}
	}
	return k
}

// plain reports whether f is a resource and a limit alone: every other
// field zero, a float's bits too (-0 is kept as given). A field added to
// FlowRule must be added here: TestKeptRulesComeBackAsGiven sets each
// field in turn, and fails for one left out.
func (f *FlowRule) plain() bool {
	return f.Name == "" && f.Type == "" && f.Interval == 0 && f.Buckets == 0 && f.MaxWait == 0 &&
		f.WarmUp == 0 && zeroBits(f.ColdFactor) && f.Borrow == 0 && f.RefResource == "" && !f.Cluster &&
		f.Lease == 0 && !f.PerKey && f.Overrides == nil && zeroBits(f.CPUThreshold) && f.Algorithm == "" &&
		f.MinLimit == 0 && f.MaxLimit == 0 && zeroBits(f.Tolerance) && f.Share == "" && !f.Shadow
}

// plain reports whether b is a resource, a strategy, a threshold and a
// count alone, as FlowRule.plain.
func (b *BreakerRule) plain() bool {
	return b.Name == "" && b.MaxRT == 0 && b.MinRequests == nil && b.Interval == 0 && b.Buckets == 0 &&
		b.OpenTimeout == 0 && b.MaxOpenTimeout == 0 && b.Probes == 0 && b.ProbeTimeout == 0 &&
		zeroBits(b.K) && b.Protection == nil && b.BlockPolicy == "" && !b.Shadow
}

// zeroBits reports whether v is +0: -0 is not.
func zeroBits(v float64) bool { return math.Float64bits(v) == 0 }

// same reports whether r are the rules kept, as given: each rule equal
// field by field, in the same order. A rule kept whole is compared by its
// key (appendKey), which writes every field, and its overrides.
func (k *keptRules) same(r *Rules) bool {
	if r.Shadow != k.shadow || len(r.Flow) != len(k.flow) || len(r.Breakers) != len(k.breakers) ||
		(r.Flow == nil) != (k.flow == nil) || (r.Breakers == nil) != (k.breakers == nil) {
		return false
	}
	var a, b []byte
	for i := range r.Flow {
		f, kf := &r.Flow[i], &k.flow[i]
		if f.Resource != kf.resource || f.Limit != kf.limit || f.plain() != (kf.whole == nil) {
			return false
		}
		if kf.whole != nil {
			// Overrides by their hash first (thousands of them: none
			// sorted), then for certain.
			a, b = f.appendKey(a[:0], false), kf.whole.appendKey(b[:0], false)
			if string(a) != string(b) || (f.Overrides == nil) != (kf.whole.Overrides == nil) || !maps.Equal(f.Overrides, kf.whole.Overrides) {
				return false
			}
		}
	}
	for i := range r.Breakers {
		x, kb := &r.Breakers[i], &k.breakers[i]
		if x.Resource != kb.resource || x.Strategy != kb.strategy || math.Float64bits(x.Threshold) != math.Float64bits(kb.threshold) ||
			x.Count != kb.count || x.plain() != (kb.whole == nil) {
			return false
		}
		if kb.whole != nil {
			a, b = x.appendKey(a[:0]), kb.whole.appendKey(b[:0])
			if string(a) != string(b) {
				return false
			}
		}
	}
	return true
}

// flowAt returns flow rule i.
func (k *keptRules) flowAt(i int) FlowRule {
	f := &k.flow[i]
	if f.whole != nil {
		return *f.whole
	}
	return FlowRule{Resource: f.resource, Limit: f.limit}
}

// breakerAt returns breaker rule i.
func (k *keptRules) breakerAt(i int) BreakerRule {
	b := &k.breakers[i]
	if b.whole != nil {
		return *b.whole
	}
	return BreakerRule{Resource: b.resource, Strategy: b.strategy, Threshold: b.threshold, Count: b.count}
}

// rules returns the rules kept, in new slices (nil where they were
// given nil); their overrides and pointers are shared with the rules kept.
func (k *keptRules) rules() Rules {
	r := Rules{Shadow: k.shadow}
	if k.flow != nil {
		r.Flow = make([]FlowRule, len(k.flow))
		for i := range r.Flow {
			r.Flow[i] = k.flowAt(i)
		}
	}
	if k.breakers != nil {
		r.Breakers = make([]BreakerRule, len(k.breakers))
		for i := range r.Breakers {
			r.Breakers[i] = k.breakerAt(i)
		}
	}
	return r
}

// breakerName returns the name of breaker rule i, as Rules.names gives it,
// from the rules of its resource alone (see Rules.breakerName).
func (k *keptRules) breakerName(i int) string {
	b := k.breakerAt(i)
	if b.Name != "" {
		return b.Name
	}
	var same Rules // the rules of b's resource
	for j := range k.flow {
		if k.flow[j].resource == b.Resource {
			same.Flow = append(same.Flow, k.flowAt(j))
		}
	}
	at := 0
	for j := range k.breakers {
		if k.breakers[j].resource == b.Resource {
			if j == i {
				at = len(same.Breakers)
			}
			same.Breakers = append(same.Breakers, k.breakerAt(j))
		}
	}
	return same.breakerName(at)
}
