package slidegate

import "reflect"

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
		if rest := *f; !isZero(restOfFlow(&rest)) {
			whole := *f // a copy: a pointer into rules would keep all of them
			k.flow[i].whole = &whole
		}
	}
	for i := range rules.Breakers {
		b := &rules.Breakers[i]
		k.breakers[i] = keptBreaker{resource: b.Resource, strategy: b.Strategy, threshold: b.Threshold, count: b.Count}
		if rest := *b; !isZero(restOfBreaker(&rest)) {
			whole := *b
			k.breakers[i].whole = &whole
		}
	}
	return k
}

// restOfFlow clears in f the fields a keptFlow keeps, and returns it.
func restOfFlow(f *FlowRule) *FlowRule {
	f.Resource, f.Limit = "", 0
	return f
}

// restOfBreaker clears in b the fields a keptBreaker keeps, and returns it.
func restOfBreaker(b *BreakerRule) *BreakerRule {
	b.Resource, b.Strategy, b.Threshold, b.Count = "", "", 0, 0
	return b
}

// isZero reports whether every field of the struct p points to is zero:
// read by reflection, so that a field added to a rule is never left out.
func isZero[T any](p *T) bool { return reflect.ValueOf(p).Elem().IsZero() }

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
