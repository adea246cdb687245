package slidegate

import (
	"cmp"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/slidegate/slidegate/breaker"
)

// A snapshot is a guard's rules, each bound to the rule value that enforces
// it, and indexed by resource. It is never changed once published: a new
// set of rules is a new snapshot, swapped in whole.
type snapshot struct {
	// gen counts the snapshots of a guard: a Resource handle checks it to
	// know the binding it keeps is still the one in force, without keeping
	// the snapshot alive.
	gen      uint64
	by       map[string]*binding
	kept     keptRules // the rules as given
	flows    []rule    // the flow rules' enforcers, in rule order; a per-key group's rules share one
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
	rules := s.kept.rules()
	n.flows, n.breakers = rules.names()
	s.named.CompareAndSwap(nil, n)
	return s.named.Load()
}

// A binding is what Enter asks for one resource: its rules, in phase order
// (see phase), each with its name for the *BlockError of a request it
// blocks. An inbound request is asked the rules of InboundResource first:
// inbound is that list, made once when the rules are set, so that Enter
// walks one list either way.
type binding struct {
	res     *resource
	checks  []check
	inbound []check      // the snapshot's inbound rules, then checks; checks itself when there are none
	shared  *breakerRule // the breaker of checks that reads res's counter, if one does
}

// newBinding returns a binding with room for n checks: for one or two, in
// the same allocation (the same size class as the two apart).
func newBinding(n int) *binding {
	switch n {
	case 1:
		p := new(struct {
			b binding
			c [1]check
		})
		p.b.checks = p.c[:0]
		return &p.b
	case 2:
		p := new(struct {
			b binding
			c [2]check
		})
		p.b.checks = p.c[:0]
		return &p.b
	}
	return &binding{checks: make([]check, 0, n)}
}

// A check is one rule of a binding, or the per-key QPS rules of its
// resource, decided together.
type check struct {
	name   string    // the rule's name (Rules.Named): "qps", "breaker"
	names  *[]string // for the per-key QPS rules: each rule's name, the window a refusal names picks one (a pointer: most checks have none, and a resource's checks are part of its memory)
	keyed  bool      // a per-key rule: the key is named when it blocks
	shadow bool      // decides and counts, but never blocks: see FlowRule.Shadow
	// pair marks the first check of a binding whose checks are a breaker
	// and a plain QPS rule, in force: Enter asks them by admitPair.
	pair bool
	rule rule
}

// compile builds the rules' enforcers, reusing those of the rules in force
// in prev (whose rules, read whole, are prevRules), and binds them to their resources, making those; rules must have
// passed Validate. If a rule cannot be built, compile returns every problem
// and leaves the guard as it was.
//
// A new set of rules keeps the state of the rules it repeats, matched by
// identity, so that no two rules ever share one limiter's counts: a rule
// equal to one in force takes over its enforcer, each at most once; then a
// flow rule that differs from one left over only in its limits (its limit,
// a per-key rule's overrides) takes over that one's enforcer and changes
// its limits, if it can (resizer, keyResizer; rules of one shape are
// paired in their order), and a circuit rule that differs from one left
// over only in its thresholds takes over that one's circuit, which takes
// them (breakerShape, newThresholds): compile returns them, for SetRules
// to give once the change is told. Every other rule starts afresh.
func (g *Guard) compile(rules Rules, prev *snapshot, prevRules Rules) (*snapshot, []newThreshold, error) {
	c := &compiling{g: g, rules: rules, prev: prev, prevRules: prevRules, s: &snapshot{
		gen:      prev.gen + 1,
		kept:     keep(rules),
		by:       make(map[string]*binding, max(len(prev.by), len(rules.Flow), len(rules.Breakers))),
		flows:    make([]rule, len(rules.Flow)),
		breakers: make([]*breakerRule, len(rules.Breakers)),
	}}
	n := &named{}
	n.flows, n.breakers = rules.names()
	c.s.named.Store(n) // bind's, and the changes'
	c.flowNames, c.breakerNames = rules.ownNames()
	c.prevFlowNames, c.prevBreakerNames = c.prevRules.ownNames()
	shown := prev.names()
	c.flowIDs = identities{c.flowNames, c.prevFlowNames, n.flows, shown.flows,
		func(i int) string { return rules.Flow[i].Resource }, func(j int) string { return prevRules.Flow[j].Resource }}
	c.breakerIDs = identities{c.breakerNames, c.prevBreakerNames, n.breakers, shown.breakers,
		func(i int) string { return rules.Breakers[i].Resource }, func(j int) string { return prevRules.Breakers[j].Resource }}
	for _, step := range []func(){c.breakers, c.sameFlows, c.keyGroups, c.resizedFlows, c.newFlows} {
		step()
	}
	if len(c.ps) > 0 {
		return nil, nil, &RulesError{Problems: c.ps}
	}
	c.bind()
	if err := c.setLimits(); err != nil {
		return nil, nil, err
	}
	return c.s, c.thresholds, nil
}

// compiling is a compile under way: the snapshot it makes, and the
// problems it has found.
type compiling struct {
	g     *Guard
	rules Rules
	prev  *snapshot
	// prevRules are the rules of prev, read whole once.
	prevRules Rules
	s         *snapshot
	ps        []Problem
	keys      keyer // writes the rules' keys

	// The names the rules have of their own, new and in force.
	flowNames, breakerNames, prevFlowNames, prevBreakerNames []string
	// What the names say of which new rule may take over which rule in
	// force.
	flowIDs, breakerIDs identities

	same      *reuse[matchKey, rule] // the enforcers of the flow rules in force, by key
	groups    []*keyGroup            // the per-key QPS rules, by resource
	regrouped []*keyGroup            // the groups that keep their enforcer
	resized   []limited              // the enforcers that take new limits, with the rules they had
	resizedAt []int                  // and the rules they enforce

	thresholds []newThreshold // the circuits that take new thresholds
}

// A newThreshold is a circuit of the rules in force and the thresholds of
// a new rule, for it to take (setThresholds) once nothing can refuse the
// new rules, and their change is told: a circuit that trips on its new
// thresholds is told after the rule that changed them.
type newThreshold struct {
	c  *breaker.Circuit
	th any
}

// A limited is an enforcer of the rules in force that takes the limits of
// a new rule.
type limited struct {
	rule rule
	was  int // the rule it enforces in force, whose limits to put back
}

// problem notes that flow rule i (or breaker rule i) cannot be built.
func (c *compiling) problem(breakers bool, i int, field string, err error) {
	p := Problem{Field: field, Reason: err.Error()}
	if breakers {
		p.Rule, p.Resource = ruleAt("breakers", i), c.rules.Breakers[i].Resource
	} else {
		p.Rule, p.Resource = ruleAt("flow", i), c.rules.Flow[i].Resource
	}
	c.ps = append(c.ps, p)
}

// breakers takes over the breakers of the same rules in force, each rule
// with a name of its own preferring the one of its name, then the circuits
// of the rules left over that differ from a new rule only in their
// thresholds (breakerShape), and builds the others. A circuit taken
// over so takes the new thresholds once the new rules are sure to be put
// in force, and told (SetRules): until then it is the rules in force's.
func (c *compiling) breakers() {
	keys := make([]matchKey, len(c.rules.Breakers))
	for i := range c.rules.Breakers {
		if len(c.prevRules.Breakers) > 0 { // else none to take over: none takes none
			keys[i] = c.keys.breaker(&c.rules.Breakers[i])
		}
	}
	prevKeys := make([]matchKey, len(c.prevRules.Breakers))
	for i := range c.prevRules.Breakers {
		prevKeys[i] = c.keys.breaker(&c.prevRules.Breakers[i])
	}
	same := takeOnce(prevKeys, c.prev.breakers, c.prevBreakerNames)
	old, kept := same.takeAll(keys, c.breakerNames, c.breakerIDs.mayTake())
	reshaped := c.reshapedBreakers(same, kept, old)
	errs := make([]error, len(c.rules.Breakers))
	var ths []any
	if reshaped != nil {
		ths = make([]any, len(c.rules.Breakers))
	}
	hook := onTransition(c.g.onTransition) // one option for every circuit
	clk := breaker.WithClock(c.g.clock)    // and one for every breaker
	inParallel(len(c.rules.Breakers), func(lo, hi int) {
		var buf [8]breaker.Option // newThresholds' options, made once a part
		for i := lo; i < hi; i++ {
			switch {
			case reshaped != nil && reshaped[i]:
				c.s.breakers[i] = old[i]
				ths[i], errs[i] = newThresholds(&c.rules.Breakers[i], old[i].b.(*breaker.Circuit), &buf)
			case kept[i]:
				c.s.breakers[i] = old[i]
			default:
				c.s.breakers[i], errs[i] = buildBreaker(c.rules.Breakers[i], clk, hook)
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			c.problem(true, i, "", err)
		} else if reshaped != nil && reshaped[i] {
			c.thresholds = append(c.thresholds, newThreshold{c.s.breakers[i].b.(*breaker.Circuit), ths[i]})
		}
	}
}

// reshapedBreakers gives each new circuit rule not taken over (kept) the
// circuit of a rule in force left over by same, of its shape, if there is
// one, in old, and reports which rules got one (nil if none did). Rules
// of one shape are paired as takeAll pairs them.
func (c *compiling) reshapedBreakers(same *reuse[matchKey, *breakerRule], kept []bool, old []*breakerRule) []bool {
	leftKeys := make([]breakerShape, len(c.prev.breakers)) // none for those taken, and SRE breakers
	left := false
	for i := range c.prev.breakers {
		if r := &c.prevRules.Breakers[i]; !same.taken[i] && r.Strategy != SREBreaker {
			leftKeys[i], left = circuitShape(r), true
		}
	}
	if !left {
		return nil
	}
	keys := make([]breakerShape, len(c.rules.Breakers))
	for i := range c.rules.Breakers {
		if r := &c.rules.Breakers[i]; !kept[i] && r.Strategy != SREBreaker {
			keys[i] = circuitShape(r)
		}
	}
	shaped, reshaped := takeOnce(leftKeys, c.prev.breakers, c.prevBreakerNames).takeAll(keys, c.breakerNames, c.breakerIDs.same)
	for i, ok := range reshaped {
		if ok {
			old[i] = shaped[i]
		}
	}
	return reshaped
}

// inParallel calls f on the parts of [0, n), on up to GOMAXPROCS
// goroutines when n is large, and returns when every call has. Making the
// enforcers and resources of many rules is most of putting them in force,
// and each is made alone: what f calls must be the guard's own code (not
// a Cluster's, which may not expect concurrent calls), and write only its
// part.
func inParallel(n int, f func(lo, hi int)) {
	const least = 4096 // a part worth a goroutine
	parts := min(runtime.GOMAXPROCS(0), n/least)
	if parts <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() { f(k*n/parts, (k+1)*n/parts) })
	}
	wg.Wait()
}

// sameFlows takes over the enforcers of the flow rules in force that the
// new rules repeat, but the per-key QPS rules (keyGroups).
func (c *compiling) sameFlows() {
	keys := make([]matchKey, len(c.rules.Flow))
	for i := range c.rules.Flow {
		if len(c.prevRules.Flow) > 0 && !c.rules.Flow[i].keyedTogether() {
			keys[i] = c.keys.flow(&c.rules.Flow[i])
		}
	}
	prevKeys := make([]matchKey, len(c.prevRules.Flow))
	for i := range c.prevRules.Flow {
		if !c.prevRules.Flow[i].keyedTogether() { // those keep their group's enforcer
			prevKeys[i] = c.keys.flow(&c.prevRules.Flow[i])
		}
	}
	c.same = takeOnce(prevKeys, c.prev.flows, c.prevFlowNames)
	mayTake := c.flowIDs.mayTake()
	c.s.flows, _ = c.same.takeAll(keys, c.flowNames, func(i, j int) bool {
		return sameOverrides(c.rules.Flow[i].Overrides, c.prevRules.Flow[j].Overrides) && (mayTake == nil || mayTake(i, j))
	})
}

// keyGroups gives the per-key QPS rules of each resource one enforcer,
// kept while their shape stays; the new limits go in with the rest
// (setLimits).
func (c *compiling) keyGroups() {
	c.groups = keyGroups(c.rules.Flow)
	for _, kg := range c.groups {
		key := kg.resource + "\x00" + kg.shape(c.rules.Flow)
		r, ok := c.prev.groups[key]
		if ok {
			c.regrouped = append(c.regrouped, kg)
		} else {
			var err error
			if r, err = kg.build(c.rules.Flow, c.g.clock, c.g.cluster, c.g.keys); err != nil {
				c.problem(false, kg.at[0], fieldOf(err), err)
				continue
			}
		}
		if c.s.groups == nil {
			c.s.groups = map[string]rule{}
		}
		c.s.groups[key] = r
		for _, i := range kg.at {
			c.s.flows[i] = r
		}
	}
}

// resizedFlows takes over the enforcers of the rules in force left over
// that differ from a new rule only in their limits, and can take its
// limits in place.
func (c *compiling) resizedFlows() {
	leftKeys := make([]matchKey, len(c.prev.flows)) // none for those taken, and those that cannot resize
	left := make([]limited, len(c.prev.flows))
	n := 0
	for i, old := range c.prev.flows {
		if !c.same.taken[i] && canResize(old) {
			shape := c.prevRules.Flow[i].shape()
			leftKeys[i], left[i] = c.keys.flow(&shape), limited{old, i}
			n++
		}
	}
	keys := make([]matchKey, len(c.rules.Flow))
	for i, r := range c.rules.Flow {
		if n > 0 && c.s.flows[i] == nil && !r.keyedTogether() {
			shape := r.shape()
			keys[i] = c.keys.flow(&shape)
		}
	}
	// Shapes have no overrides: their keys are whole.
	shaped, reshaped := takeOnce(leftKeys, left, c.prevFlowNames).takeAll(keys, c.flowNames, c.flowIDs.same)
	for i, r := range c.rules.Flow {
		if c.s.flows[i] == nil && !r.keyedTogether() && reshaped[i] {
			c.s.flows[i] = shaped[i].rule
			c.resized, c.resizedAt = append(c.resized, shaped[i]), append(c.resizedAt, i)
			c.judgeResized(i, shaped[i].rule)
		}
	}
}

// judgeResized judges flow rule i, whose limits enforcer r takes, as
// Validate would by building it, unless r's resizing refuses just what the
// build would (a QPS limiter's: the limit alone) or Validate has judged it
// (builtAlike).
func (c *compiling) judgeResized(i int, r rule) {
	switch r.(type) {
	case *qpsRule, *borrowingRule:
		return
	}
	f := c.rules.Flow[i]
	if !builtAlike(&f) {
		return
	}
	if err := checkFlow(f); err != nil {
		c.problem(false, i, fieldOf(err), err)
	}
}

// newFlows builds the enforcers of the flow rules left: those of the
// guard's own limiters in parallel, a cluster's one by one.
func (c *compiling) newFlows() {
	on := builder{clock: c.g.clock, cluster: c.g.cluster, cpu: c.g.cpu, keys: c.g.keys}
	errs := make([]error, len(c.rules.Flow))
	inParallel(len(c.rules.Flow), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if r := &c.rules.Flow[i]; c.s.flows[i] == nil && !r.keyedTogether() && !r.Cluster {
				c.s.flows[i], errs[i] = buildFlow(*r, on)
			}
		}
	})
	for i, r := range c.rules.Flow {
		switch {
		case !r.Cluster || c.s.flows[i] != nil || r.keyedTogether():
		case c.g.cluster == nil:
			errs[i] = &fieldError{field: "cluster", err: errNoCluster}
		default:
			c.s.flows[i], errs[i] = buildFlow(r, on)
		}
	}
	for i, err := range errs {
		if err != nil {
			c.s.flows[i] = nil
			c.problem(false, i, fieldOf(err), err)
		}
	}
}

// bind binds every rule to its resource, making it, in phase order.
func (c *compiling) bind() {
	type bound struct {
		resource string
		phase    phase
		check
	}
	rules, s := c.rules, c.s
	all := make([]bound, 0, len(s.breakers)+len(s.flows))
	flowNames, breakerNames := s.names().flows, s.names().breakers
	for i, b := range s.breakers {
		all = append(all, bound{rules.Breakers[i].Resource, b.phase(), check{name: breakerNames[i], shadow: rules.Shadow || rules.Breakers[i].Shadow, rule: b}})
	}
	for _, kg := range c.groups {
		names := make([]string, len(kg.at))
		for j, i := range kg.at {
			names[j] = flowNames[i]
		}
		r := s.flows[kg.at[0]]
		all = append(all, bound{kg.resource, r.phase(), check{name: names[0], names: &names, keyed: true, shadow: rules.Shadow || rules.Flow[kg.at[0]].Shadow, rule: r}})
	}
	for i, f := range s.flows {
		r := rules.Flow[i]
		if r.keyedTogether() {
			continue // bound as its group, above
		}
		if _, ok := f.(*refRule); ok {
			// Made anew, never changed: the rules in force may share the
			// one built or taken over above.
			allowed, _ := c.g.resources.pin(r.RefResource).stats.View(r.interval())
			f = &refRule{allowed: allowed, limit: r.Limit}
			s.flows[i] = f
		}
		all = append(all, bound{r.Resource, f.phase(), check{name: flowNames[i], keyed: r.PerKey, shadow: rules.Shadow || r.Shadow, rule: f}})
	}
	// In phase order, each phase in rule order: a counting sort, for
	// phases are few; none when they are in order (breakers, then QPS
	// rules).
	sorted := all
	if !slices.IsSortedFunc(all, func(a, b bound) int { return int(a.phase) - int(b.phase) }) {
		var at [phaseCluster + 2]int
		for _, b := range all {
			at[b.phase+1]++
		}
		for p := 1; p < len(at); p++ {
			at[p] += at[p-1]
		}
		sorted = make([]bound, len(all))
		for _, b := range all {
			sorted[at[b.phase]] = b
			at[b.phase]++
		}
	}
	// One binding a resource, made with room for its checks, counted
	// first. Each binding is an allocation of its own: a handle that keeps
	// one keeps no other resource's rules. The resources the rules in force
	// bind are pinned already, so still the table's; the others are made
	// in parallel, then pinned in turn.
	of := make([]int32, len(sorted)) // the binding of each check, -1 for an inbound one
	index := make(map[string]int32, min(len(sorted), len(s.breakers)+len(rules.Flow)))
	var names []string // the resources bound, in the order of their first check
	var counts []int32 // the checks of each
	for i, ch := range sorted {
		if ch.resource == InboundResource {
			of[i] = -1
			continue
		}
		k, ok := index[ch.resource]
		if !ok {
			k = int32(len(names))
			index[ch.resource] = k
			names = append(names, ch.resource)
			counts = append(counts, 0)
		}
		of[i] = k
		counts[k]++
	}
	bs := make([]*binding, len(names))
	var fresh []int32
	for k, name := range names {
		b := newBinding(int(counts[k]))
		if was := c.prev.by[name]; was != nil {
			b.res = was.res
		} else {
			fresh = append(fresh, int32(k))
		}
		bs[k] = b
		s.by[name] = b
	}
	made := make([]*resource, len(fresh))
	inParallel(len(fresh), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			made[j] = c.g.resources.made(names[fresh[j]])
		}
	})
	for j, k := range fresh {
		bs[k].res = c.g.resources.pinMade(names[k], made[j])
	}
	for i, ch := range sorted {
		if k := of[i]; k < 0 {
			s.inbound = append(s.inbound, ch.check)
		} else {
			bs[k].checks = append(bs[k].checks, ch.check)
		}
	}
	for _, b := range s.by {
		b.shared = bindShared(b.checks, b.res)
		markPair(b.checks)
		b.inbound = b.checks
		if len(s.inbound) > 0 {
			b.inbound = slices.Concat(s.inbound, b.checks)
		}
	}
}

// setLimits gives the enforcers taken over to resize their new limits.
// They are shared with the rules in force: their limits change only once
// the new rules are sure to replace them. A limit refused (a cluster's
// limiter may refuse one) puts back those changed before it, and leaves
// the rules in force as they were.
func (c *compiling) setLimits() error {
	rules, prev := c.rules, c.prevRules
	for k, l := range c.resized {
		i := c.resizedAt[k]
		if err := setLimits(l.rule, rules.Flow[i]); err != nil {
			for _, back := range c.resized[:k] {
				_ = setLimits(back.rule, prev.Flow[back.was])
			}
			c.g.resources.unpinAllBut(c.prev.by, prev.refs(), c.g.clock.Now())
			return &RulesError{Problems: []Problem{{Rule: ruleAt("flow", i), Resource: rules.Flow[i].Resource, Field: cmp.Or(fieldOf(err), "limit"), Reason: err.Error()}}}
		}
	}
	for _, kg := range c.regrouped {
		kg.setLimits(c.s.flows[kg.at[0]], rules.Flow)
	}
	return nil
}

// A reuse hands out the enforcers of the rules in force by the key of their
// rule, each at most once, in rule order.
type reuse[K comparable, T any] struct {
	first map[K]int32 // the first index into in of each key
	next  []int32     // the next index of the same key, or -1
	in    []T
	names []string // the names of the rules of in
	taken []bool
}

// takeOnce returns the enforcers in of the rules of keys keys (the zero
// key for none), named names, to be taken over (takeAll).
func takeOnce[K comparable, T any](keys []K, in []T, names []string) *reuse[K, T] {
	var none K
	n := 0
	for _, k := range keys {
		if k != none {
			n++
		}
	}
	r := &reuse[K, T]{first: make(map[K]int32, n), next: make([]int32, len(in)), in: in, names: names, taken: make([]bool, len(in))}
	for i := len(keys) - 1; i >= 0; i-- { // from the last, so that each key's list is in rule order
		k := keys[i]
		if k == none {
			continue
		}
		r.next[i] = -1
		if j, ok := r.first[k]; ok {
			r.next[i] = j
		}
		r.first[k] = int32(i)
	}
	return r
}

// takeAll gives each new rule i, of key keys[i] (the zero key for none)
// and name of its own names[i] ("" for none), an enforcer of the same key
// not taken yet, if there is one, and reports which rules got one. A rule
// with a name takes the enforcer of the rule of that name first: every
// rule that finds one does, then the others take the first left of their
// key, in rule order. So named rules of the same settings reordered keep
// each its own counts and state. (A name the guard gives is not
// preferred: it follows the rule's place, so a reordering changes it.)
// same, if not nil, tells whether new rule i and old rule j of one key are
// the same: a key holds only a hash of a rule's overrides.
func (r *reuse[K, T]) takeAll(keys []K, names []string, same func(i, j int) bool) ([]T, []bool) {
	out, ok := make([]T, len(keys)), make([]bool, len(keys))
	var none K
	for pass := range 2 {
		for i, k := range keys {
			if k == none || ok[i] || pass == 0 && names[i] == "" {
				continue
			}
			j, found := r.first[k]
			for ; found && j >= 0; j = r.next[j] {
				if !r.taken[j] && (pass == 1 || r.names[j] == names[i]) && (same == nil || same(i, int(j))) {
					r.taken[j], out[i], ok[i] = true, r.in[j], true
					break
				}
			}
		}
	}
	return out, ok
}

// identities are the names of a list of rules, new and in force, as
// takeAll pairs them: names of their own ("" for none), and names as shown
// (Rules.Named), and the resource of each.
//
// A name of its own is a rule's identity in its resource, where names are
// unique. A rule takes over the state of a rule of another name only in a
// rename: its name is new to its resource, and the other's is gone from
// it. So no rule takes the state of one that goes on: two named rules that
// swap their settings keep each its own. A rule without a name of its own
// has no identity to keep: it may take over a rule without one, or one
// whose name is gone.
type identities struct {
	own, prevOwn           []string
	shown, prevShown       []string
	resource, prevResource func(i int) string
}

// mayTake returns takeAll's same for the rules equal to those in force:
// whether new rule i may take over rule j in force, by their names.
func (ids identities) mayTake() func(i, j int) bool {
	var had, has map[[2]string]bool // (resource, name): the names of their own in force, and new
	for j, name := range ids.prevOwn {
		if name != "" {
			if had == nil {
				had = map[[2]string]bool{}
			}
			had[[2]string{ids.prevResource(j), name}] = true
		}
	}
	for i, name := range ids.own {
		if name != "" {
			if has == nil {
				has = map[[2]string]bool{}
			}
			has[[2]string{ids.resource(i), name}] = true
		}
	}
	if had == nil && has == nil {
		return nil // no names of their own: any
	}
	return func(i, j int) bool {
		n, m := ids.own[i], ids.prevOwn[j]
		if n == m {
			return true
		}
		r := ids.resource(i) // rule j's too: their keys are equal
		return (n == "" || !had[[2]string{r, n}]) && (m == "" || !has[[2]string{r, m}])
	}
}

// same is takeAll's same for rules that differ from those in force in
// their limits or thresholds: whether new rule i is rule j in force, by
// its name of its own, or, for a rule given the name it was shown by
// (Rules.Named), by that name. A rule whose limits change keeps its
// state; one of another name is another rule, and must not take the
// state of a rule removed (a breaker's open circuit, say).
func (ids identities) same(i, j int) bool {
	return ids.own[i] == ids.prevOwn[j] || ids.shown[i] == ids.prevShown[j]
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
