package slidegate

import (
	"cmp"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// A snapshot is a guard's rules, each bound to the rule value that enforces
// it, and indexed by resource. It is never changed once published: a new
// set of rules is a new snapshot, swapped in whole.
type snapshot struct {
	rules    Rules
	by       map[string]*binding
	flows    []rule // the flow rules' enforcers, in rule order; a per-key group's rules share one
	breakers []*breakerRule
	groups   map[string]rule // the per-key groups' enforcers, by resource and shape
	inbound  []check         // the rules of InboundResource, in phase order

	named atomic.Pointer[named] // made when first needed (names)
}

// named is what a snapshot's rules are named, made when first asked for:
// statuses need them, requests do not, and a guard of many rules would
// otherwise keep them all.
type named struct {
	flows, breakers []string
}

// names returns the names of the snapshot's rules.
func (s *snapshot) names() *named {
	if n := s.named.Load(); n != nil {
		return n
	}
	n := &named{}
	n.flows, n.breakers = s.rules.names()
	s.named.CompareAndSwap(nil, n)
	return s.named.Load()
}

// A binding is what Enter asks for one resource: its rules, in phase order
// (see phase), each with its name for the *BlockError of a request it
// blocks.
type binding struct {
	res    *resource
	checks []check
}

// A check is one rule of a binding, or the per-key QPS rules of its
// resource, decided together.
type check struct {
	name   string    // the rule's name (Rules.Named): "qps", "breaker"
	names  *[]string // for the per-key QPS rules: each rule's name, the window a refusal names picks one (a pointer: most checks have none, and a resource's checks are part of its memory)
	keyed  bool      // a per-key rule: the key is named when it blocks
	shadow bool      // decides and counts, but never blocks: see FlowRule.Shadow
	rule   rule
}

// normal returns the rule with the defaults it leaves out written out: the
// type, a QPS rule's or a throttle's interval, a QPS rule's buckets, a
// warm-up's cold factor.
func (f FlowRule) normal() FlowRule {
	// Enforced or in shadow, a rule keeps its enforcer and its counts: a
	// rule tried in shadow is then enforced from what it has counted.
	f.Shadow = false
	f.Name = "" // nor does a rule renamed lose its counts
	f.Type = f.flowType()
	switch f.Type {
	case ConcurrencyRule:
	case AdaptiveRule:
		if f.Algorithm == "" {
			f.Algorithm = flowlimits.DefaultAdaptiveAlgorithm
		}
		def := func(v *int64, d int64) {
			if *v == 0 {
				*v = d
			}
		}
		def(&f.Limit, flowlimits.DefaultAdaptiveInitialLimit)
		def(&f.MinLimit, flowlimits.DefaultAdaptiveMinLimit)
		def(&f.MaxLimit, flowlimits.DefaultAdaptiveMaxLimit)
		if f.Tolerance == 0 {
			f.Tolerance = flowlimits.DefaultAdaptiveTolerance
		}
		f.Share = f.share()
	case ShedRule:
		f.Interval, f.Buckets = Duration(f.interval()), f.buckets()
		if f.CPUThreshold == 0 {
			f.CPUThreshold = flowlimits.DefaultShedCPUThreshold
		}
		f.Share = f.share()
	default:
		f.Interval = Duration(f.interval())
	}
	if f.Type == QPSRule {
		f.Buckets = f.buckets()
	}
	if f.WarmUp > 0 && f.ColdFactor == 0 {
		f.ColdFactor = flowlimits.DefaultColdFactor
	}
	return f
}

// normal returns the rule with the defaults of its breaker written out
// (breaker's Default constants): the window, the minimum volume, and an
// adaptive breaker's K, protection and block policy or a circuit's open
// timeout, backoff and probes.
func (b BreakerRule) normal() BreakerRule {
	b.Shadow = false // as for a flow rule: the breaker keeps its state
	b.Name = ""
	b.MinRequests = cloned(b.MinRequests)
	if b.Interval == 0 {
		b.Interval = Duration(breaker.DefaultInterval)
	}
	if b.Strategy == AdaptiveBreaker {
		if b.Buckets == 0 {
			b.Buckets = breaker.DefaultAdaptiveBuckets
		}
		if b.MinRequests == nil {
			b.MinRequests = new(int64)
		}
		if b.K == 0 {
			b.K = breaker.DefaultK
		}
		if b.Protection == nil {
			n := int64(breaker.DefaultProtection)
			b.Protection = &n
		}
		if b.BlockPolicy == "" {
			b.BlockPolicy = "count_blocks_while_failing"
		}
		return b
	}
	if b.Buckets == 0 {
		b.Buckets = breaker.DefaultCircuitBuckets
	}
	if b.MinRequests == nil {
		n := int64(breaker.DefaultMinRequests)
		if b.Strategy == ConsecutiveFailuresBreaker {
			n = 0
		}
		b.MinRequests = &n
	}
	if b.OpenTimeout == 0 {
		b.OpenTimeout = Duration(breaker.DefaultOpenTimeout)
	}
	if b.MaxOpenTimeout == 0 {
		b.MaxOpenTimeout = b.OpenTimeout
	}
	if b.Probes == 0 {
		b.Probes = breaker.DefaultProbes
	}
	if b.ProbeTimeout == 0 {
		b.ProbeTimeout = b.OpenTimeout
	}
	return b
}

// compile builds the rules' enforcers, reusing those of the rules in force
// in prev, and binds them to their resources, making those; rules must have
// passed Validate. If a rule cannot be built, compile returns every problem
// and leaves the guard as it was.
//
// A new set of rules keeps the state of the rules it repeats, matched by
// identity, so that no two rules ever share one limiter's counts: a rule
// equal to one in force takes over its enforcer, each at most once; then a
// flow rule that differs from one left over only in its limits (its limit,
// a per-key rule's overrides) takes over that one's enforcer and changes
// its limits, if it can (resizer, keyResizer; rules of one shape are
// paired in their order). Every other rule starts afresh.
func (g *Guard) compile(rules Rules, prev *snapshot) (*snapshot, error) {
	s := &snapshot{
		rules:    rules,
		by:       map[string]*binding{},
		flows:    make([]rule, len(rules.Flow)),
		breakers: make([]*breakerRule, len(rules.Breakers)),
	}
	var ps []Problem

	// Build: take over the enforcers of the same rules in force, each
	// rule with a name of its own preferring the one of its name.
	flowNames, breakerNames := rules.ownNames()
	prevFlowNames, prevBreakerNames := prev.rules.ownNames()
	var buf []byte
	keys := make([]string, len(rules.Breakers))
	for i := range rules.Breakers {
		keys[i] = breakerKey(&rules.Breakers[i], &buf)
	}
	prevKeys := make([]string, len(prev.rules.Breakers))
	for i := range prev.rules.Breakers {
		prevKeys[i] = breakerKey(&prev.rules.Breakers[i], &buf)
	}
	oldBreakers, kept := takeOnce(prevKeys, prev.breakers, prevBreakerNames).takeAll(keys, breakerNames, nil)
	for i, r := range rules.Breakers {
		if kept[i] {
			s.breakers[i] = oldBreakers[i]
			continue
		}
		b, err := buildBreaker(r, g.clock, g.onTransition)
		if err != nil {
			ps = append(ps, Problem{Rule: ruleAt("breakers", i), Resource: r.Resource, Reason: err.Error()})
			continue
		}
		s.breakers[i] = b
	}
	keys = make([]string, len(rules.Flow))
	for i := range rules.Flow {
		if !rules.Flow[i].keyedTogether() {
			keys[i] = flowKey(&rules.Flow[i], &buf)
		}
	}
	prevKeys = make([]string, len(prev.rules.Flow))
	for i := range prev.rules.Flow {
		if !prev.rules.Flow[i].keyedTogether() { // those keep their group's enforcer
			prevKeys[i] = flowKey(&prev.rules.Flow[i], &buf)
		}
	}
	same := takeOnce(prevKeys, prev.flows, prevFlowNames)
	s.flows, _ = same.takeAll(keys, flowNames, func(i, j int) bool {
		return sameOverrides(rules.Flow[i].Overrides, prev.rules.Flow[j].Overrides)
	})
	// The per-key QPS rules of a resource have one enforcer, kept while
	// their shape stays; the new limits go in with the rest (setLimits).
	groups := keyGroups(rules.Flow)
	var regrouped []*keyGroup
	for _, kg := range groups {
		key := kg.resource + "\x00" + kg.shape(rules.Flow)
		r, ok := prev.groups[key]
		if ok {
			regrouped = append(regrouped, kg)
		} else {
			var err error
			if r, err = kg.build(rules.Flow, g.clock, g.cluster, g.keys); err != nil {
				i := kg.at[0]
				ps = append(ps, Problem{Rule: ruleAt("flow", i), Resource: rules.Flow[i].Resource, Field: fieldOf(err), Reason: err.Error()})
				continue
			}
		}
		if s.groups == nil {
			s.groups = map[string]rule{}
		}
		s.groups[key] = r
		for _, i := range kg.at {
			s.flows[i] = r
		}
	}
	// Then those of the rules in force that differ only in their limits.
	type limited struct {
		rule rule
		was  int // the rule it enforces in force, whose limits to put back
	}
	var leftKeys []string
	var left []limited
	var leftNames []string
	for i, old := range prev.flows {
		if !same.taken[i] && canResize(old) {
			shape := prev.rules.Flow[i].shape()
			leftKeys, left = append(leftKeys, flowKey(&shape, &buf)), append(left, limited{old, i})
			leftNames = append(leftNames, prevFlowNames[i])
		}
	}
	for i, r := range rules.Flow {
		keys[i] = ""
		if s.flows[i] == nil && !r.keyedTogether() {
			shape := r.shape()
			keys[i] = flowKey(&shape, &buf)
		}
	}
	// Shapes have no overrides: their keys are whole.
	shaped, reshaped := takeOnce(leftKeys, left, leftNames).takeAll(keys, flowNames, nil)
	var resized []limited // the enforcers that take new limits, with the rules they had
	var resizedAt []int   // and the rules they enforce
	for i, r := range rules.Flow {
		if s.flows[i] != nil || r.keyedTogether() {
			continue
		}
		if reshaped[i] {
			s.flows[i] = shaped[i].rule
			resized, resizedAt = append(resized, shaped[i]), append(resizedAt, i)
			continue
		}
		if r.Cluster && g.cluster == nil {
			ps = append(ps, Problem{Rule: ruleAt("flow", i), Resource: r.Resource, Field: "cluster", Reason: errNoCluster.Error()})
			continue
		}
		f, err := buildFlow(r, g.clock, g.cluster, g.cpu, g.keys)
		if err != nil {
			ps = append(ps, Problem{Rule: ruleAt("flow", i), Resource: r.Resource, Field: fieldOf(err), Reason: err.Error()})
			continue
		}
		s.flows[i] = f
	}
	if len(ps) > 0 {
		return nil, &RulesError{Problems: ps}
	}

	// Bind every rule to its resource, making it, in phase order.
	type bound struct {
		resource string
		check
	}
	var all []bound
	flowNames, breakerNames = rules.names()
	for i, b := range s.breakers {
		all = append(all, bound{rules.Breakers[i].Resource, check{name: breakerNames[i], shadow: rules.Shadow || rules.Breakers[i].Shadow, rule: b}})
	}
	for _, kg := range groups {
		names := make([]string, len(kg.at))
		for j, i := range kg.at {
			names[j] = flowNames[i]
		}
		all = append(all, bound{kg.resource, check{name: names[0], names: &names, keyed: true, shadow: rules.Shadow || rules.Flow[kg.at[0]].Shadow, rule: s.flows[kg.at[0]]}})
	}
	for i, f := range s.flows {
		r := rules.Flow[i]
		if r.keyedTogether() {
			continue // bound as its group, above
		}
		if _, ok := f.(*refRule); ok {
			// Made anew, never changed: the rules in force may share the
			// one built or taken over above.
			allowed, _ := g.resources.pin(r.RefResource).stats.View(r.interval())
			f = &refRule{allowed: allowed, limit: r.Limit}
			s.flows[i] = f
		}
		all = append(all, bound{r.Resource, check{name: flowNames[i], keyed: r.PerKey, shadow: rules.Shadow || r.Shadow, rule: f}})
	}
	slices.SortStableFunc(all, func(a, b bound) int { return int(a.rule.phase()) - int(b.rule.phase()) })
	for _, c := range all {
		if c.resource == InboundResource {
			s.inbound = append(s.inbound, c.check)
			continue
		}
		b := s.by[c.resource]
		if b == nil {
			if was := prev.by[c.resource]; was != nil {
				b = &binding{res: was.res} // pinned already, so still the table's
			} else {
				b = &binding{res: g.resources.pin(c.resource)}
			}
			s.by[c.resource] = b
		}
		b.checks = append(b.checks, c.check)
	}

	// The enforcers are shared with the rules in force: change their limits
	// only once the new rules are sure to replace them. A limit refused
	// (a cluster's limiter may refuse one) puts back those changed before
	// it, and leaves the rules in force as they were.
	for k, l := range resized {
		i := resizedAt[k]
		if err := setLimits(l.rule, rules.Flow[i]); err != nil {
			for _, back := range resized[:k] {
				_ = setLimits(back.rule, prev.rules.Flow[back.was])
			}
			g.resources.unpinAllBut(prev.by, prev.rules.refs(), g.clock.Now())
			return nil, &RulesError{Problems: []Problem{{Rule: ruleAt("flow", i), Resource: rules.Flow[i].Resource, Field: cmp.Or(fieldOf(err), "limit"), Reason: err.Error()}}}
		}
	}
	for _, kg := range regrouped {
		kg.setLimits(s.flows[kg.at[0]], rules.Flow)
	}
	return s, nil
}

// A reuse hands out the enforcers of the rules in force by the key of their
// rule, each at most once, in rule order.
type reuse[T any] struct {
	by    map[string][]int // indexes into in, by key
	in    []T
	names []string // the names of the rules of in
	taken []bool
}

// takeOnce returns the enforcers in of the rules of keys keys ("" for
// none), named names, to be taken over (takeAll).
func takeOnce[T any](keys []string, in []T, names []string) *reuse[T] {
	r := &reuse[T]{by: make(map[string][]int, len(in)), in: in, names: names, taken: make([]bool, len(in))}
	for i, k := range keys {
		if k != "" {
			r.by[k] = append(r.by[k], i)
		}
	}
	return r
}

// takeAll gives each new rule i, of key keys[i] ("" for none) and name of
// its own names[i] ("" for none), an enforcer of the same key not taken
// yet, if there is one, and reports which rules got one. A rule with a
// name takes the enforcer of the rule of that name first: every rule that
// finds one does, then the others take the first left of their key, in
// rule order. So named rules of the same settings reordered keep each its
// own counts and state. (A name the guard gives is not preferred: it
// follows the rule's place, so a reordering changes it.) same, if not nil,
// tells whether new rule i and old rule j of one key are the same: a key
// holds only a hash of a rule's overrides.
func (r *reuse[T]) takeAll(keys, names []string, same func(i, j int) bool) ([]T, []bool) {
	out, ok := make([]T, len(keys)), make([]bool, len(keys))
	for pass := range 2 {
		for i, k := range keys {
			if k == "" || ok[i] {
				continue
			}
			for _, j := range r.by[k] {
				if !r.taken[j] && (pass == 1 || names[i] != "" && r.names[j] == names[i]) && (same == nil || same(i, j)) {
					r.taken[j], out[i], ok[i] = true, r.in[j], true
					break
				}
			}
		}
	}
	return out, ok
}

// clone returns a copy of r that shares no memory with it.
func (r Rules) clone() Rules {
	c := r
	c.Flow, c.Breakers = slices.Clone(r.Flow), slices.Clone(r.Breakers)
	for i := range c.Flow {
		c.Flow[i].Overrides = maps.Clone(c.Flow[i].Overrides)
	}
	for i := range c.Breakers {
		b := &c.Breakers[i]
		b.MinRequests = cloned(b.MinRequests)
		b.Protection = cloned(b.Protection)
	}
	return c
}

// cloned returns a pointer to a copy of *p, or nil.
func cloned[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// shape is the rule with its limits left out, its limit and a per-key
// rule's overrides: rules of one shape differ at most in their limits.
func (f FlowRule) shape() FlowRule {
	f.Limit, f.Overrides = 0, nil
	return f
}

// A keyResizer is a per-key rule that takes new limits in place, its
// limit and its overrides, keeping what every key holds.
type keyResizer interface {
	rule
	// setKeyLimits changes the limits. It is called only once the rules
	// that take the rule over are sure to be put in force.
	setKeyLimits(limit int64, overrides map[string]int64) error
}

// canResize reports whether r can take the limits of another rule of its
// shape in place: a keyResizer, or a resizer that can now. A rule with
// overrides is per key: a keyResizer, or a per-key QPS rule (never asked:
// those keep their enforcer by their group's shape).
func canResize(r rule) bool {
	switch r := r.(type) {
	case keyResizer:
		return true
	case resizer:
		return r.resizable()
	}
	return false
}

// setLimits gives r, which canResize, the limits of f.
func setLimits(r rule, f FlowRule) error {
	if k, ok := r.(keyResizer); ok {
		return k.setKeyLimits(f.Limit, f.Overrides)
	}
	return r.(resizer).setLimit(f.Limit)
}

// refs returns the resources the rules read the statistics of.
func (r Rules) refs() map[string]bool {
	refs := map[string]bool{}
	for _, f := range r.Flow {
		if f.RefResource != "" {
			refs[f.RefResource] = true
		}
	}
	return refs
}

// buckets returns the number of buckets of the rule's window, flow's
// default when unset: flowlimits.DefaultBuckets, DefaultKeyBuckets for a
// per-key rule, DefaultShedBuckets for a shed rule.
func (f FlowRule) buckets() int {
	switch {
	case f.Buckets == 0 && f.flowType() == ShedRule:
		return flowlimits.DefaultShedBuckets
	case f.Buckets != 0:
		return f.Buckets
	case f.PerKey:
		return flowlimits.DefaultKeyBuckets
	}
	return flowlimits.DefaultBuckets
}

// interval returns the rule's interval, when unset 1 s, or a shed
// rule's default, flowlimits.DefaultShedInterval.
func (f FlowRule) interval() time.Duration {
	if f.Interval == 0 {
		if f.flowType() == ShedRule {
			return flowlimits.DefaultShedInterval
		}
		return time.Second
	}
	return time.Duration(f.Interval)
}
