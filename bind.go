package slidegate

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/window"
)

// A snapshot is a guard's rules, each bound to the limiter or breaker that
// enforces it, and indexed by resource. It is never changed once published:
// a new set of rules is a new snapshot, swapped in whole.
type snapshot struct {
	rules    Rules
	by       map[string]*binding
	flows    []*flowLimiter    // the flow rules' bindings, in rule order
	breakers []*breakerBinding // the breaker rules' bindings, in rule order
}

// A binding is what Enter checks for one resource, in the order it checks
// it: breakers first, since a breaker's admission can be given back; then
// concurrency rules and throttles, also given back when a later rule refuses;
// then the rules that count an admission for good.
type binding struct {
	res      *resource
	breakers []*breakerBinding
	flows    []*flowLimiter
	permits  int // concurrency rules: an entry holds a permit for each
	waits    int // throttles: an entry holds a reservation for each
}

// A flowLimiter is a flow rule bound to its limiter.
type flowLimiter struct {
	rule  FlowRule
	place string // "flow[2]"
	qps   *flow.QPS
	pace  *flow.Throttle
	conc  *flow.Concurrency
	ref   window.View    // the associated resource's passes over the interval
	clus  ClusterLimiter // a cluster rule's
}

// A breakerBinding is a breaker rule bound to its breaker.
type breakerBinding struct {
	rule  BreakerRule
	place string
	b     breaker.Breaker
}

// ruleKey identifies a rule by its whole value: a new snapshot reuses the
// limiter or breaker of an identical rule, with its counts and state.
func ruleKey(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("slidegate: a rule does not marshal: " + err.Error())
	}
	return string(b)
}

// newFlowLimiter builds the limiter of flow rule f, read as Validate leaves
// it; the error names what the limiter refused. A nil clock is
// clock.System. A cluster rule's limiter comes from cl; with cl nil, the
// rule is checked as a local QPS rule of the same shape.
func newFlowLimiter(f FlowRule, c clock.Clock, cl Cluster) (*flowLimiter, error) {
	if c == nil {
		c = clock.System
	}
	l := &flowLimiter{rule: f}
	interval := f.interval()
	opts := []flow.Option{flow.WithClock(c)}
	if f.Buckets > 0 {
		opts = append(opts, flow.WithBuckets(f.Buckets))
	}
	if f.WarmUp > 0 {
		cold := f.ColdFactor
		if cold == 0 {
			cold = 3
		}
		opts = append(opts, flow.WithWarmUp(time.Duration(f.WarmUp), cold))
	}
	var err error
	switch {
	case f.Cluster && cl != nil:
		shaped := f
		shaped.Interval, shaped.Buckets = Duration(interval), f.buckets()
		l.clus, err = cl.Limiter(shaped)
		if err == nil && l.clus == nil {
			err = fmt.Errorf("the cluster made no limiter")
		}
	case f.Type == ConcurrencyRule:
		l.conc, err = flow.NewConcurrency(f.Limit)
	case f.RefResource != "":
		if interval%statsWidth != 0 || interval > statsInterval {
			return nil, fmt.Errorf("interval %v: a rule on another resource reads its statistics, which are kept over %v in buckets of %v: the interval must be a multiple of %v, at most %v",
				interval, statsInterval, statsWidth, statsWidth, statsInterval)
		}
	case f.Behavior == Throttle && f.Limit == 0:
		// A throttle spaces requests interval/limit apart: with no
		// places at all, it refuses everything, as a QPS limit of 0 does.
		l.qps, err = flow.NewQPS(0, interval, opts...)
	case f.Behavior == Throttle:
		l.pace, err = flow.NewThrottle(f.Limit, interval, time.Duration(f.MaxWait), opts...)
	default:
		l.qps, err = flow.NewQPS(f.Limit, interval, opts...)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

var dropPolicies = map[string]breaker.DropPolicy{
	"":                          breaker.CountDropsWhileFailing,
	"count_drops_while_failing": breaker.CountDropsWhileFailing,
	"count_drops":               breaker.CountDrops,
	"ignore_drops":              breaker.IgnoreDrops,
}

// newBreaker builds the breaker of rule b, read as Validate leaves it. A nil
// clock is clock.System.
func newBreaker(b BreakerRule, c clock.Clock) (breaker.Breaker, error) {
	if c == nil {
		c = clock.System
	}
	opts := []breaker.Option{breaker.WithClock(c)}
	if b.MinRequests != nil {
		opts = append(opts, breaker.WithMinRequests(*b.MinRequests))
	}
	if b.Window != 0 || b.Buckets != 0 {
		opts = append(opts, breaker.WithWindow(time.Duration(b.Window), b.Buckets)) // 0: the breaker's default
	}
	if b.Strategy == AdaptiveBreaker {
		if b.K != 0 {
			opts = append(opts, breaker.WithK(b.K))
		}
		if b.Protection != nil {
			opts = append(opts, breaker.WithProtection(*b.Protection))
		}
		opts = append(opts, breaker.WithDropPolicy(dropPolicies[b.DropPolicy]))
		return breaker.NewAdaptive(opts...)
	}
	if b.OpenTimeout != 0 {
		opts = append(opts, breaker.WithOpenTimeout(time.Duration(b.OpenTimeout)))
	}
	if b.MaxOpenTimeout != 0 {
		opts = append(opts, breaker.WithBackoff(time.Duration(b.MaxOpenTimeout)))
	}
	if b.Probes != 0 || b.ProbeTimeout != 0 {
		n := b.Probes
		if n == 0 {
			n = 1
		}
		opts = append(opts, breaker.WithProbes(n, time.Duration(b.ProbeTimeout)))
	}
	var s breaker.Strategy
	switch b.Strategy {
	case ErrorRatioBreaker:
		s = breaker.ErrorRatio(b.Threshold)
	case ErrorCountBreaker:
		s = breaker.ErrorCount(b.Count)
	case SlowRatioBreaker:
		s = breaker.SlowRatio(time.Duration(b.MaxRT), b.Threshold)
	}
	return breaker.NewCircuit(s, opts...)
}

// compile binds rules to limiters and breakers, and creates the resources
// the rules name. rules must have passed Validate. If a rule cannot be
// bound, compile returns every problem and leaves the rules in force as
// they are.
//
// A new set of rules keeps the state of the rules it repeats, matched by
// identity, so that no two rules ever share one limiter's counts: a breaker
// or flow rule equal to one in force takes over its breaker or limiter, each
// at most once; then a flow rule that differs from one left over only in its
// limit takes over that one's limiter and changes its limit, if the limiter
// can (rules of one shape are paired in their order). Every other rule
// starts afresh.
func (g *Guard) compile(rules Rules, prev *snapshot) (*snapshot, error) {
	s := &snapshot{
		rules:    rules,
		by:       map[string]*binding{},
		flows:    make([]*flowLimiter, len(rules.Flow)),
		breakers: make([]*breakerBinding, len(rules.Breakers)),
	}
	var ps []Problem
	bind := func(name string) *binding {
		if b := s.by[name]; b != nil {
			return b
		}
		b := &binding{res: g.resources.pin(name)}
		s.by[name] = b
		return b
	}

	oldBreakers := takeOnce(prev.breakers, func(bb *breakerBinding) string { return ruleKey(bb.rule) })
	for i, r := range rules.Breakers {
		// Bindings themselves are never shared: the old snapshot still
		// reads its own.
		bb := &breakerBinding{rule: r, place: ruleAt("breakers", i)}
		if old := oldBreakers.take(ruleKey(r)); old != nil {
			bb.b = old.b
		} else {
			var err error
			if bb.b, err = newBreaker(r, g.clock); err != nil {
				ps = append(ps, Problem{Rule: bb.place, Resource: r.Resource, Reason: err.Error()})
				continue
			}
		}
		s.breakers[i] = bb
	}

	// Match the flow rules to the limiters in force: the same rule first,
	// then the same rule but for its limit.
	reused := make([]*flowLimiter, len(rules.Flow))
	same := takeOnce(prev.flows, func(l *flowLimiter) string { return ruleKey(l.rule) })
	for i, r := range rules.Flow {
		reused[i] = same.take(ruleKey(r))
	}
	var leftOver []*flowLimiter
	for _, l := range prev.flows {
		if !same.taken[l] && l.canSetLimit() {
			leftOver = append(leftOver, l)
		}
	}
	shaped := takeOnce(leftOver, func(l *flowLimiter) string { return ruleKey(l.rule.shape()) })
	for i, r := range rules.Flow {
		if reused[i] == nil {
			reused[i] = shaped.take(ruleKey(r.shape()))
		}
	}

	var setLimits []*flowLimiter // reused limiters whose limit changes
	for i, r := range rules.Flow {
		var l *flowLimiter
		if old := reused[i]; old != nil {
			copied := *old
			copied.rule = r
			l = &copied
			if old.rule.Limit != r.Limit {
				setLimits = append(setLimits, l)
			}
		} else {
			if r.Cluster && g.cluster == nil {
				ps = append(ps, Problem{Rule: ruleAt("flow", i), Resource: r.Resource, Field: "cluster",
					Reason: "the guard has no cluster to keep the counts in: make it with slidegate.WithCluster"})
				continue
			}
			var err error
			if l, err = newFlowLimiter(r, g.clock, g.cluster); err != nil {
				ps = append(ps, Problem{Rule: ruleAt("flow", i), Resource: r.Resource, Reason: err.Error()})
				continue
			}
		}
		l.place = ruleAt("flow", i)
		s.flows[i] = l
	}
	if len(ps) > 0 {
		return nil, &RulesError{Problems: ps}
	}
	// Bind the rules to their resources, making those, and the flow rules
	// in the order Enter checks them (see binding).
	for _, bb := range s.breakers {
		b := bind(bb.rule.Resource)
		b.breakers = append(b.breakers, bb)
	}
	for _, l := range s.flows {
		if l.rule.RefResource != "" {
			l.ref, _ = g.resources.pin(l.rule.RefResource).stats.View(l.rule.interval())
		}
		if l.rule.order() == orderConcurrency {
			bind(l.rule.Resource).permits++
		}
		if l.rule.order() == orderThrottle {
			bind(l.rule.Resource).waits++
		}
	}
	byOrder := slices.Clone(s.flows)
	slices.SortStableFunc(byOrder, func(a, b *flowLimiter) int { return a.rule.order() - b.rule.order() })
	for _, l := range byOrder {
		b := bind(l.rule.Resource)
		b.flows = append(b.flows, l)
	}
	// The limiters are shared with the rules in force: change their limits
	// only once the new rules are sure to replace them.
	for _, l := range setLimits {
		if err := l.setLimit(); err != nil {
			panic("slidegate: a validated limit was refused: " + err.Error())
		}
	}
	return s, nil
}

// The order in which Enter checks a resource's flow rules: first those whose
// admission can be given back when a later rule refuses.
const (
	orderConcurrency = iota
	orderThrottle
	orderRef
	orderQPS
	// Last: a round trip, and a permit other instances could have used,
	// not to be spent on a request a local rule refuses.
	orderCluster
)

func (f FlowRule) order() int {
	switch {
	case f.Type == ConcurrencyRule:
		return orderConcurrency
	case f.Behavior == Throttle:
		return orderThrottle
	case f.RefResource != "":
		return orderRef
	case f.Cluster:
		return orderCluster
	}
	return orderQPS
}

// shape is the rule with its limit left out: rules of one shape differ at
// most in their limits.
func (f FlowRule) shape() FlowRule {
	f.Limit = 0
	return f
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

// A reuse hands out the bindings of the rules in force by key, each at most
// once, in their order.
type reuse[T comparable] struct {
	by    map[string][]T
	taken map[T]bool
}

func takeOnce[T comparable](in []T, key func(T) string) *reuse[T] {
	r := &reuse[T]{by: map[string][]T{}, taken: map[T]bool{}}
	for _, v := range in {
		k := key(v)
		r.by[k] = append(r.by[k], v)
	}
	return r
}

// take returns the first binding of key not taken yet, or the zero T.
func (r *reuse[T]) take(key string) T {
	var zero T
	list := r.by[key]
	if len(list) == 0 {
		return zero
	}
	v := list[0]
	r.by[key] = list[1:]
	r.taken[v] = true
	return v
}

// canSetLimit reports whether the rule's limiter can change its limit in
// place: a QPS limiter without warm-up, a concurrency limiter, or a cluster
// limiter with SetLimit. A rule on another resource's statistics has no
// limiter, only its rule.
func (l *flowLimiter) canSetLimit() bool {
	if l.clus != nil {
		_, ok := l.clus.(limitSetter)
		return ok
	}
	if l.rule.Behavior == Throttle {
		return false // a throttle's pace is fixed; one of limit 0 has no throttle
	}
	return l.conc != nil || (l.qps != nil && l.rule.WarmUp == 0) || (l.qps == nil && l.pace == nil)
}

// limitSetter is a cluster limiter that can change its limit.
type limitSetter interface{ SetLimit(int64) error }

// setLimit gives the limiter the rule's limit.
func (l *flowLimiter) setLimit() error {
	switch {
	case l.conc != nil:
		return l.conc.SetLimit(l.rule.Limit)
	case l.qps != nil:
		return l.qps.SetLimit(l.rule.Limit)
	case l.clus != nil:
		return l.clus.(limitSetter).SetLimit(l.rule.Limit)
	}
	return nil
}

// buckets returns the number of buckets of the rule's window,
// flow.DefaultBuckets when unset.
func (f FlowRule) buckets() int {
	if f.Buckets == 0 {
		return flow.DefaultBuckets
	}
	return f.Buckets
}

// interval returns the rule's interval, 1 s when unset.
func (f FlowRule) interval() time.Duration {
	if f.Interval == 0 {
		return time.Second
	}
	return time.Duration(f.Interval)
}
