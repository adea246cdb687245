package slidegate

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// A Problem is one thing wrong with a set of rules: which rule, which field,
// why, and where in a file.
type Problem struct {
	// Rule is the rule's place in its list, as BlockError.Rule names it:
	// "flow[2]" or "breakers[0]"; empty for a problem of the file or of
	// the set as a whole.
	Rule string
	// Resource is the rule's resource, when the rule names one.
	Resource string
	// Field is the rule's field as files name it ("limit", "max_wait").
	Field string
	// Reason says what is wrong, with the value.
	Reason string
	// Line is the line of the rules file the problem is on, when the rules
	// came from a file and the line is known; 0 otherwise.
	Line int
}

// Place names the rule and its resource: `flow[2] (resource "GET /a")`, or
// "" for a problem of the file or of the set as a whole.
func (p Problem) Place() string {
	switch {
	case p.Rule == "":
		return ""
	case p.Resource == "":
		return p.Rule
	case len(p.Resource) > 64:
		return fmt.Sprintf("%s (resource %q…)", p.Rule, p.Resource[:60])
	}
	return fmt.Sprintf("%s (resource %q)", p.Rule, p.Resource)
}

// String describes the problem: `line 4: flow[2] (resource "GET /a"):
// limit: -1 must not be negative`, leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		b.WriteString("line " + strconv.Itoa(p.Line) + ": ")
	}
	for _, part := range []string{p.Place(), p.Field} {
		if part != "" {
			b.WriteString(part + ": ")
		}
	}
	b.WriteString(p.Reason)
	return b.String()
}

// A RulesError lists every problem found in a set of rules. A guard given
// rules with problems keeps the rules it had.
type RulesError struct {
	// Source names where the rules came from (a file), or is empty.
	Source   string
	Problems []Problem
}

// Error lists the problems, one per line after the first.
func (e *RulesError) Error() string {
	var b strings.Builder
	b.WriteString("slidegate: invalid rules")
	if e.Source != "" {
		b.WriteString(" in " + e.Source)
	}
	b.WriteString(": " + strconv.Itoa(len(e.Problems)) + " problem")
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	for _, p := range e.Problems {
		b.WriteString("\n\t" + p.String())
	}
	return b.String()
}

// Validate checks every rule and returns a *RulesError listing every
// problem, or nil.
func (r Rules) Validate() error {
	var ps []Problem
	for i, f := range r.Flow {
		ps = f.check(ruleAt("flow", i), ps)
	}
	for i, b := range r.Breakers {
		ps = b.check(ruleAt("breakers", i), ps)
	}
	ps = sameNames(r, ps)
	ps = sharedClusterCounts(r.Flow, ps)
	ps = tooManyWindows(r.Flow, ps)
	if !r.Shadow { // every rule in shadow: none is enforced
		ps = mixedShadow(r.Flow, ps)
	}
	if len(ps) == 0 {
		return nil
	}
	return &RulesError{Problems: ps}
}

// sharedClusterCounts finds cluster rules that would keep one count: a
// cluster keeps a count per resource, interval and buckets, which two such
// rules would each add every request to, and so each see twice.
func sharedClusterCounts(rules []FlowRule, into []Problem) []Problem {
	type count struct {
		resource string
		interval time.Duration
		buckets  int
		perKey   bool
	}
	first := make(map[count]int)
	for i, f := range rules {
		if !f.Cluster {
			continue
		}
		c := count{f.Resource, f.interval(), f.buckets(), f.PerKey}
		if j, ok := first[c]; ok {
			into = append(into, Problem{Rule: ruleAt("flow", i), Resource: f.Resource, Field: "cluster",
				Reason: fmt.Sprintf("flow[%d] is a cluster rule of the same resource, interval (%v) and buckets (%d): the two would keep one count in the cluster, each counting every request twice; give them different intervals, or keep one", j, c.interval, c.buckets)})
			continue
		}
		first[c] = i
	}
	return into
}

// tooManyWindows finds resources with more per-key QPS rules than are
// decided together.
func tooManyWindows(rules []FlowRule, into []Problem) []Problem {
	for _, g := range keyGroups(rules) {
		if len(g.at) > flowlimits.MaxKeyWindows {
			i := g.at[flowlimits.MaxKeyWindows]
			into = append(into, Problem{Rule: ruleAt("flow", i), Resource: rules[i].Resource, Field: "per_key",
				Reason: fmt.Sprintf("the resource has %d per-key QPS rules; at most %d are decided together", len(g.at), flowlimits.MaxKeyWindows)})
		}
	}
	return into
}

// mixedShadow finds resources whose per-key QPS rules, decided together,
// are some in shadow and some not.
func mixedShadow(rules []FlowRule, into []Problem) []Problem {
	for _, g := range keyGroups(rules) {
		first := rules[g.at[0]].Shadow
		for _, i := range g.at[1:] {
			if rules[i].Shadow != first {
				into = append(into, Problem{Rule: ruleAt("flow", i), Resource: rules[i].Resource, Field: "shadow",
					Reason: fmt.Sprintf("%v, but flow[%d] is %v: the per-key QPS rules of a resource are decided together, so all of them are in shadow or none", rules[i].Shadow, g.at[0], first)})
				break
			}
		}
	}
	return into
}

// ruleAt names the rule at index i of list: "flow[2]".
func ruleAt(list string, i int) string { return list + "[" + strconv.Itoa(i) + "]" }

// problems collects the problems of one rule.
type problems struct {
	rule, resource string
	list           []Problem
}

func (p *problems) add(field, format string, args ...any) {
	p.list = append(p.list, Problem{Rule: p.rule, Resource: p.resource, Field: field, Reason: fmt.Sprintf(format, args...)})
}

// ruleName checks a rule's name.
func (p *problems) ruleName(name string) {
	if why := checkRuleName(name); why != "" {
		p.add("name", "%s", why)
	}
}

// name checks a resource's name.
func (p *problems) name(field, name string, required bool) {
	switch {
	case name == "":
		if required {
			p.add(field, "missing")
		}
	case name == OtherResource:
		p.add(field, "%q is the name of the resources the guard has no room for, not one a rule can name", name)
	case len(name) > MaxNameLength:
		p.add(field, "%d bytes: a resource's name is at most %d bytes long", len(name), MaxNameLength)
	}
}

// count checks a number of requests: from 0 to flowlimits.MaxLimit.
func (p *problems) count(field string, n int64) {
	switch {
	case n < 0:
		p.add(field, "%d must not be negative", n)
	case n > flowlimits.MaxLimit:
		p.add(field, "%d must be at most %d", n, int64(flowlimits.MaxLimit))
	}
}

func (p *problems) nonNegative(field string, d Duration) {
	if d < 0 {
		p.add(field, "%v must not be negative", d)
	}
}

// flowFields says which optional fields of a flow rule apply to which kind
// of rule, by their names in files.
var flowFields = []struct {
	field string
	set   func(FlowRule) bool
	kinds []FlowType
}{
	{"limit", func(f FlowRule) bool { return f.Limit != 0 }, []FlowType{QPSRule, ThrottleRule, ConcurrencyRule, AdaptiveRule}},
	{"interval", func(f FlowRule) bool { return f.Interval != 0 }, []FlowType{QPSRule, ThrottleRule, ShedRule}},
	{"buckets", func(f FlowRule) bool { return f.Buckets != 0 }, []FlowType{QPSRule, ThrottleRule, ShedRule}},
	{"per_key", func(f FlowRule) bool { return f.PerKey }, []FlowType{QPSRule, ThrottleRule, ConcurrencyRule}},
	{"cpu_threshold", func(f FlowRule) bool { return f.CPUThreshold != 0 }, []FlowType{ShedRule}},
	{"algorithm", func(f FlowRule) bool { return f.Algorithm != "" }, []FlowType{AdaptiveRule}},
	{"min_limit", func(f FlowRule) bool { return f.MinLimit != 0 }, []FlowType{AdaptiveRule}},
	{"max_limit", func(f FlowRule) bool { return f.MaxLimit != 0 }, []FlowType{AdaptiveRule}},
	{"tolerance", func(f FlowRule) bool { return f.Tolerance != 0 }, []FlowType{AdaptiveRule}},
	{"share", func(f FlowRule) bool { return f.Share != "" }, []FlowType{ShedRule, AdaptiveRule}},
	{"max_wait", func(f FlowRule) bool { return f.MaxWait != 0 }, []FlowType{ThrottleRule}},
	{"warm_up", func(f FlowRule) bool { return f.WarmUp != 0 }, []FlowType{QPSRule, ThrottleRule}},
	{"cold_factor", func(f FlowRule) bool { return f.ColdFactor != 0 }, []FlowType{QPSRule, ThrottleRule}},
	{"borrow", func(f FlowRule) bool { return f.Borrow != 0 }, []FlowType{QPSRule}},
	{"ref_resource", func(f FlowRule) bool { return f.RefResource != "" }, []FlowType{QPSRule}},
	{"cluster", func(f FlowRule) bool { return f.Cluster }, []FlowType{QPSRule}},
	{"lease", func(f FlowRule) bool { return f.Lease != 0 }, []FlowType{QPSRule}},
}

// flowType returns the rule's type, QPSRule when unset.
func (f FlowRule) flowType() FlowType {
	if f.Type == "" {
		return QPSRule
	}
	return f.Type
}

func (f FlowRule) check(rule string, into []Problem) []Problem {
	p := problems{rule: rule, resource: f.Resource, list: into}
	p.name("resource", f.Resource, true)
	p.ruleName(f.Name)
	p.name("ref_resource", f.RefResource, false)
	p.count("limit", f.Limit)
	p.nonNegative("interval", f.Interval)
	p.nonNegative("max_wait", f.MaxWait)
	p.nonNegative("warm_up", f.WarmUp)
	p.nonNegative("borrow", f.Borrow)
	if f.Buckets < 0 {
		p.add("buckets", "%d must not be negative", f.Buckets)
	}
	p.count("lease", f.Lease)
	switch t := f.flowType(); t {
	case QPSRule, ThrottleRule, ConcurrencyRule, ShedRule, AdaptiveRule:
		for _, x := range flowFields {
			if x.set(f) && !slices.Contains(x.kinds, t) {
				p.add(x.field, "does not apply to a %s rule", t)
			}
		}
	default:
		p.add("type", "%q is not %q, %q, %q, %q or %q", f.Type, QPSRule, ThrottleRule, ConcurrencyRule, ShedRule, AdaptiveRule)
	}
	f.checkOverload(&p)
	if f.Lease > 0 && !f.Cluster {
		p.add("lease", "only a cluster rule leases permits")
	}
	if f.Cluster {
		if k := f.buckets(); k > MaxClusterBuckets {
			p.add("buckets", "%d: a cluster rule has at most %d buckets", k, MaxClusterBuckets)
		} else if iv := f.interval(); iv > 0 && iv%(time.Duration(k)*time.Microsecond) != 0 {
			p.add("interval", "%v does not divide into %d buckets of whole microseconds, as a cluster rule's must", iv, k)
		}
		for _, x := range []struct {
			field string
			set   bool
		}{{"warm_up", f.WarmUp != 0}, {"borrow", f.Borrow != 0}, {"ref_resource", f.RefResource != ""}} {
			if x.set {
				p.add(x.field, "a cluster rule has no warm-up, does not borrow and does not limit by another resource")
			}
		}
	}
	if f.RefResource != "" {
		if f.Buckets != 0 {
			p.add("buckets", "a rule on another resource reads its statistics, in their buckets: it has none of its own")
		}
		if f.WarmUp > 0 || f.Borrow > 0 {
			p.add("ref_resource", "a rule that limits by another resource has no warm-up and does not borrow")
		}
		if f.RefResource == f.Resource {
			p.add("ref_resource", "%q is the rule's own resource", f.RefResource)
		}
	}
	if f.WarmUp > 0 && f.ColdFactor != 0 && !(f.ColdFactor > 1) {
		p.add("cold_factor", "%v must be above 1", f.ColdFactor)
	}
	if f.flowType() == ThrottleRule && f.WarmUp == 0 && f.Buckets != 0 {
		p.add("buckets", "a throttle's buckets divide its warm-up: it has none (warm_up)")
	}
	if f.WarmUp == 0 && f.ColdFactor != 0 {
		p.add("cold_factor", "a cold factor needs a warm-up (warm_up)")
	}
	f.checkKeys(&p)
	if len(p.list) == len(into) {
		// The fields are sound one by one: let the limiter's constructor
		// judge them together (bucket widths, interval splits).
		// A CPU that reads nothing: whether the guard reads one is the
		// guard's to say, when it is given the rule.
		if err := checkFlow(f, func() float64 { return 0 }); err != nil {
			p.add(fieldOf(err), "%v", err)
		}
	}
	return p.list
}

// checkOverload checks the fields of shed and adaptive rules, and the rules
// of InboundResource.
func (f FlowRule) checkOverload(p *problems) {
	if t := f.CPUThreshold; t != 0 && t != -1 && !(t > 0 && t <= 1) {
		p.add("cpu_threshold", "%v must be above 0 and at most 1 (a share of the CPU the process may use), or -1 for none", t)
	}
	if _, ok := adaptiveAlgorithms[f.Algorithm]; !ok {
		p.add("algorithm", "%q is not \"gradient\" or \"aimd\"", f.Algorithm)
	}
	p.count("min_limit", f.MinLimit)
	p.count("max_limit", f.MaxLimit)
	if f.Tolerance < 0 {
		p.add("tolerance", "%v must not be negative", f.Tolerance)
	}
	switch f.Share {
	case "", shareByKey:
	case shareByResource:
		if f.Resource != InboundResource {
			p.add("share", "%q: a rule on one resource has no resources to share among; only the rules of %s do (or \"key\")", f.Share, InboundResource)
		}
	default:
		p.add("share", "%q is not \"resource\" or \"key\"", f.Share)
	}
	if f.Resource == InboundResource && (f.PerKey || f.Cluster) {
		p.add("resource", "the rules of %s hold for every inbound request, whatever its resource: they are neither per key nor cluster-wide", InboundResource)
	}
	if f.RefResource == InboundResource {
		p.add("ref_resource", "%s is all the inbound traffic, not a resource with statistics of its own", InboundResource)
	}
}

// checkKeys checks what makes a rule per key: what it cannot be combined
// with, and its overrides.
func (f FlowRule) checkKeys(p *problems) {
	if !f.PerKey {
		if len(f.Overrides) > 0 {
			p.add("overrides", "only a per-key rule (per_key: true) has overrides")
		}
		return
	}
	for _, x := range []struct {
		field string
		set   bool
	}{{"ref_resource", f.RefResource != ""}, {"warm_up", f.WarmUp != 0}, {"borrow", f.Borrow != 0}, {"lease", f.Lease != 0}} {
		if x.set {
			p.add(x.field, "a per-key rule has no warm-up, does not borrow or lease and does not limit by another resource")
		}
	}
	if f.flowType() == ThrottleRule && f.Limit == 0 {
		p.add("limit", "0: a per-key throttle paces at least 1 request per interval; block keys with overrides of 0")
	}
	if f.Cluster && f.flowType() == ConcurrencyRule {
		p.add("cluster", "a concurrency rule is not cluster-wide")
	}
	if f.Type == QPSRule || f.Type == "" {
		if k := f.buckets(); k > flowlimits.MaxKeyBuckets {
			p.add("buckets", "%d: a per-key rule has at most %d buckets", k, flowlimits.MaxKeyBuckets)
		}
	}
	if len(f.Overrides) > MaxOverrides {
		p.add("overrides", "%d keys: a rule has at most %d overrides", len(f.Overrides), MaxOverrides)
		return
	}
	var bad []string // in key order, once found: most rules have none
	for key, n := range f.Overrides {
		if len(key) > MaxKeyLength || n < 0 || n > flowlimits.MaxLimit {
			bad = append(bad, key)
		}
	}
	slices.Sort(bad)
	for _, key := range bad {
		switch n := f.Overrides[key]; {
		case len(key) > MaxKeyLength:
			p.add("overrides", "a key of %d bytes: keys are at most %d bytes long", len(key), MaxKeyLength)
		default:
			p.add("overrides", "%q: %d must be between 0 and %d", key, n, int64(flowlimits.MaxLimit))
		}
	}
}

// fieldOf returns the rule field a configuration error is about, or "":
// flow.ConfigError names its option as rule files name the field, and a
// breaker's window error names its interval or buckets.
func fieldOf(err error) string {
	var ce *flow.ConfigError
	if errors.As(err, &ce) {
		return ce.Field
	}
	var we *timegrid.WindowError
	if errors.As(err, &we) {
		return we.Arg
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return fe.field
	}
	return ""
}

// A fieldError is an error of the guard's own about one field of a rule.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// strategyNames lists the breaker strategies, as rule files write them.
const strategyNames = "adaptive, error_ratio, error_count, slow_ratio, consecutive_failures"

func (b BreakerRule) check(rule string, into []Problem) []Problem {
	p := problems{rule: rule, resource: b.Resource, list: into}
	p.name("resource", b.Resource, true)
	p.ruleName(b.Name)
	if b.Resource == InboundResource {
		p.add("resource", "%s is all the inbound traffic: a breaker protects one resource", InboundResource)
	}
	for _, d := range []struct {
		field string
		v     Duration
	}{{"max_rt", b.MaxRT}, {"interval", b.Interval}, {"open_timeout", b.OpenTimeout},
		{"max_open_timeout", b.MaxOpenTimeout}, {"probe_timeout", b.ProbeTimeout}} {
		p.nonNegative(d.field, d.v)
	}
	if b.MinRequests != nil && *b.MinRequests < 0 {
		p.add("min_requests", "%d must not be negative", *b.MinRequests)
	}
	if b.Buckets < 0 {
		p.add("buckets", "%d must not be negative", b.Buckets)
	}
	if b.Probes < 0 {
		p.add("probes", "%d must not be negative", b.Probes)
	}
	adaptiveOnly := func(field string, set bool) {
		if set {
			p.add(field, "applies to an adaptive breaker only")
		}
	}
	stateOnly := func(field string, set bool) {
		if set {
			p.add(field, "does not apply to an adaptive breaker")
		}
	}
	switch b.Strategy {
	case AdaptiveBreaker:
		stateOnly("threshold", b.Threshold != 0)
		stateOnly("count", b.Count != 0)
		stateOnly("max_rt", b.MaxRT != 0)
		stateOnly("open_timeout", b.OpenTimeout != 0)
		stateOnly("max_open_timeout", b.MaxOpenTimeout != 0)
		stateOnly("probes", b.Probes != 0)
		stateOnly("probe_timeout", b.ProbeTimeout != 0)
		if b.K != 0 && !(b.K >= 1) {
			p.add("k", "%v must be at least 1", b.K)
		}
		if b.Protection != nil && *b.Protection < 0 {
			p.add("protection", "%d must not be negative", *b.Protection)
		}
		if _, ok := blockPolicies[b.BlockPolicy]; !ok {
			p.add("block_policy", "%q is not one of count_blocks_while_failing, count_blocks, ignore_blocks", b.BlockPolicy)
		}
	case ErrorRatioBreaker, ErrorCountBreaker, SlowRatioBreaker, ConsecutiveFailuresBreaker:
		adaptiveOnly("k", b.K != 0)
		adaptiveOnly("protection", b.Protection != nil)
		adaptiveOnly("block_policy", b.BlockPolicy != "")
		uses := func(field string, set, applies bool) {
			if set && !applies {
				p.add(field, "does not apply to the %s strategy", b.Strategy)
			}
		}
		ratio, count := b.Strategy == ErrorRatioBreaker || b.Strategy == SlowRatioBreaker, b.Strategy == ErrorCountBreaker || b.Strategy == ConsecutiveFailuresBreaker
		uses("threshold", b.Threshold != 0, ratio)
		uses("count", b.Count != 0, count)
		uses("max_rt", b.MaxRT != 0, b.Strategy == SlowRatioBreaker)
		switch {
		case ratio:
			if !(b.Threshold > 0 && b.Threshold <= 1) {
				p.add("threshold", "%v must be above 0 and at most 1", b.Threshold)
			}
		case count:
			if b.Count < 1 {
				p.add("count", "%d must be at least 1", b.Count)
			}
		}
		if b.Strategy == SlowRatioBreaker && b.MaxRT <= 0 {
			p.add("max_rt", "%v must be positive", b.MaxRT)
		}
		if b.MaxOpenTimeout != 0 && b.MaxOpenTimeout < b.OpenTimeout {
			p.add("max_open_timeout", "%v must be at least open_timeout %v", b.MaxOpenTimeout, b.OpenTimeout)
		}
	case "":
		p.add("strategy", "missing: one of %s", strategyNames)
	default:
		p.add("strategy", "%q is not one of %s", b.Strategy, strategyNames)
	}
	if len(p.list) == len(into) {
		if br, err := buildBreaker(b, nil, nil); err != nil {
			p.add(fieldOf(err), "%v", err)
		} else if c, ok := br.b.(interface{ Close() error }); ok {
			c.Close()
		}
	}
	return p.list
}
