package slidegate

import (
	"encoding/json"
	"fmt"
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
	flows    map[string]*flowLimiter    // by rule key with the limit left out, for reuse by the next snapshot
	breakers map[string]*breakerBinding // by rule key
	inOrder  []*breakerBinding          // the breaker rules' bindings, in rule order
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
		w, n := time.Duration(b.Window), b.Buckets
		if w == 0 {
			w = 10 * time.Second
		}
		if n == 0 {
			n = 10
		}
		opts = append(opts, breaker.WithWindow(w, n))
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

// compile binds rules to limiters and breakers, reusing those of identical
// rules in prev, and creating the resources the rules name. rules must have
// passed Validate.
func (g *Guard) compile(rules Rules, prev *snapshot) (*snapshot, error) {
	s := &snapshot{
		rules:    rules,
		by:       map[string]*binding{},
		flows:    map[string]*flowLimiter{},
		breakers: map[string]*breakerBinding{},
	}
	bind := func(name string) *binding {
		if b := s.by[name]; b != nil {
			return b
		}
		b := &binding{res: g.resources.pin(name)}
		s.by[name] = b
		return b
	}
	for i, r := range rules.Breakers {
		key := ruleKey(r)
		// Reuse the breaker of an identical rule, with its state; bindings
		// themselves are never shared, as the old snapshot still reads its
		// own.
		var br breaker.Breaker
		if old := prev.breakers[key]; old != nil && s.breakers[key] == nil {
			br = old.b
		} else {
			var err error
			if br, err = newBreaker(r, g.clock); err != nil {
				return nil, &RulesError{Problems: []Problem{{Rule: ruleAt("breakers", i), Resource: r.Resource, Reason: err.Error()}}}
			}
		}
		bb := &breakerBinding{rule: r, place: fmt.Sprintf("breakers[%d]", i), b: br}
		s.breakers[key] = bb
		s.inOrder = append(s.inOrder, bb)
		b := bind(r.Resource)
		b.breakers = append(b.breakers, bb)
	}
	// Flow rules in the order Enter checks them: those whose admission can
	// be given back first.
	order := func(f FlowRule) int {
		switch {
		case f.Type == ConcurrencyRule:
			return 0
		case f.Behavior == Throttle:
			return 1
		case f.RefResource != "":
			return 2
		case f.Cluster:
			// Last: a round trip, and a permit other instances could
			// have used, not to be spent on a request a local rule
			// refuses.
			return 4
		}
		return 3
	}
	var setLimits []*flowLimiter // reused limiters whose limit changes
	for pass := 0; pass < 5; pass++ {
		for i, r := range rules.Flow {
			if order(r) != pass {
				continue
			}
			// Reuse the limiter of the same rule, or of one that differs
			// only in its limit if the limiter can change it, with its
			// counts.
			shape := r
			shape.Limit = 0
			key := ruleKey(shape)
			var l *flowLimiter
			if old := prev.flows[key]; old != nil && s.flows[key] == nil && (old.rule == r || old.canSetLimit()) {
				copied := *old
				copied.rule = r
				l = &copied
				if old.rule.Limit != r.Limit {
					setLimits = append(setLimits, &copied)
				}
			} else {
				if r.Cluster && g.cluster == nil {
					return nil, &RulesError{Problems: []Problem{{Rule: ruleAt("flow", i), Resource: r.Resource, Field: "cluster",
						Reason: "the guard has no cluster to keep the counts in: make it with slidegate.WithCluster"}}}
				}
				var err error
				if l, err = newFlowLimiter(r, g.clock, g.cluster); err != nil {
					return nil, &RulesError{Problems: []Problem{{Rule: ruleAt("flow", i), Resource: r.Resource, Reason: err.Error()}}}
				}
			}
			if r.RefResource != "" {
				l.ref, _ = g.resources.pin(r.RefResource).stats.View(r.interval())
			}
			l.place = fmt.Sprintf("flow[%d]", i)
			s.flows[key] = l
			b := bind(r.Resource)
			b.flows = append(b.flows, l)
			switch pass {
			case 0:
				b.permits++
			case 1:
				b.waits++
			}
		}
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

// canSetLimit reports whether the rule's limiter can change its limit in
// place: a QPS limiter without warm-up, a concurrency limiter, or a cluster
// limiter with SetLimit. A rule on another resource's statistics has no
// limiter, only its rule.
func (l *flowLimiter) canSetLimit() bool {
	if l.clus != nil {
		_, ok := l.clus.(limitSetter)
		return ok
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
