package slidegate

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rules is a guard's complete set of rules: what each resource may do. A
// resource may have any number of flow rules and breakers; a request must
// pass all of them. The zero Rules has no rules.
//
// Rules read from and write to JSON and YAML (the package rulefile reads
// files and watches them), with durations written as "500ms" or "1m30s".
type Rules struct {
	Flow     []FlowRule    `json:"flow,omitempty" yaml:"flow,omitempty"`
	Breakers []BreakerRule `json:"breakers,omitempty" yaml:"breakers,omitempty"`
}

// The kinds of flow rule (FlowRule.Type).
const (
	QPSRule         = "qps"         // at most Limit requests in any Interval
	ConcurrencyRule = "concurrency" // at most Limit requests in flight
)

// The behaviours of a QPS rule (FlowRule.Behavior).
const (
	Reject   = "reject"   // refuse a request over the limit at once
	Throttle = "throttle" // space requests evenly, waiting at most MaxWait
)

// A FlowRule limits a resource's traffic.
type FlowRule struct {
	// Resource is the name of the resource the rule protects.
	Resource string `json:"resource" yaml:"resource"`
	// Type is QPSRule (the default) or ConcurrencyRule.
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// Limit is how many requests pass per Interval (QPSRule) or at once
	// (ConcurrencyRule). 0 refuses everything.
	Limit int64 `json:"limit" yaml:"limit"`
	// Interval is a QPS rule's interval (default 1s).
	Interval Duration `json:"interval,omitempty" yaml:"interval,omitempty"`
	// Buckets divides a QPS rule's interval (default flow.DefaultBuckets):
	// more buckets admit closer to the limit under steady overload.
	Buckets int `json:"buckets,omitempty" yaml:"buckets,omitempty"`
	// Behavior is Reject (the default) or Throttle, for QPS rules.
	Behavior string `json:"behavior,omitempty" yaml:"behavior,omitempty"`
	// MaxWait is how long a throttled request may wait for its place.
	MaxWait Duration `json:"max_wait,omitempty" yaml:"max_wait,omitempty"`
	// WarmUp, if positive, makes a QPS rule start at Limit/ColdFactor and
	// warm up to Limit over this period of traffic.
	WarmUp Duration `json:"warm_up,omitempty" yaml:"warm_up,omitempty"`
	// ColdFactor is the warm-up's cold factor (default 3; above 1).
	ColdFactor float64 `json:"cold_factor,omitempty" yaml:"cold_factor,omitempty"`
	// Borrow, if positive, lets prioritized requests (WithPriority) over a
	// rejecting QPS rule's limit borrow a place in the next bucket and wait
	// for it, at most this long.
	Borrow Duration `json:"borrow,omitempty" yaml:"borrow,omitempty"`
	// RefResource, if set, makes the rule limit Resource by RefResource's
	// traffic (Sentinel's associated resource): a request to Resource is
	// refused while RefResource passed Limit requests or more in the last
	// Interval. Only QPS rules that reject may have one.
	RefResource string `json:"ref_resource,omitempty" yaml:"ref_resource,omitempty"`
	// Cluster, if true, makes a QPS rule that rejects hold for all the
	// instances of the service together: its counts are kept in the
	// guard's Cluster (WithCluster; package redisflow keeps them in
	// Redis), under the resource's name, the interval and the buckets. A
	// cluster rule has at most MaxClusterBuckets buckets, each a whole
	// number of microseconds wide.
	Cluster bool `json:"cluster,omitempty" yaml:"cluster,omitempty"`
	// Lease, for a cluster rule, lets an instance take up to this many
	// permits per round trip to the cluster and spend them locally
	// (redisflow.WithLease); 0 or 1 takes one per request.
	Lease int64 `json:"lease,omitempty" yaml:"lease,omitempty"`
}

// MaxClusterBuckets is the most buckets a cluster rule (FlowRule.Cluster)
// divides its interval into: a cluster reads them at every decision.
const MaxClusterBuckets = 1000

// The strategies of a breaker (BreakerRule.Strategy).
const (
	AdaptiveBreaker   = "adaptive"    // the Google SRE throttle: breaker.Adaptive
	ErrorRatioBreaker = "error_ratio" // breaker.ErrorRatio(Threshold)
	ErrorCountBreaker = "error_count" // breaker.ErrorCount(Count)
	SlowRatioBreaker  = "slow_ratio"  // breaker.SlowRatio(MaxRT, Threshold)
)

// A BreakerRule puts a circuit breaker (package breaker) in front of a
// resource. A request that ends with an error (Entry.Exit with a non-nil
// error) is a failure.
type BreakerRule struct {
	// Resource is the name of the resource the breaker protects.
	Resource string `json:"resource" yaml:"resource"`
	// Strategy is one of AdaptiveBreaker, ErrorRatioBreaker,
	// ErrorCountBreaker, SlowRatioBreaker.
	Strategy string `json:"strategy" yaml:"strategy"`
	// Threshold is the ratio that opens an error_ratio or slow_ratio
	// breaker, in (0, 1].
	Threshold float64 `json:"threshold,omitempty" yaml:"threshold,omitempty"`
	// Count is the number of errors that opens an error_count breaker.
	Count int64 `json:"count,omitempty" yaml:"count,omitempty"`
	// MaxRT is the longest a request may take before a slow_ratio breaker
	// counts it as slow.
	MaxRT Duration `json:"max_rt,omitempty" yaml:"max_rt,omitempty"`
	// MinRequests is the minimum volume (breaker.WithMinRequests); unset,
	// the breaker's default.
	MinRequests *int64 `json:"min_requests,omitempty" yaml:"min_requests,omitempty"`
	// Window and Buckets are the breaker's sliding window
	// (breaker.WithWindow); each unset takes the breaker's default: 10 s,
	// in 40 buckets for an adaptive breaker and 10 for the others.
	Window  Duration `json:"window,omitempty" yaml:"window,omitempty"`
	Buckets int      `json:"buckets,omitempty" yaml:"buckets,omitempty"`
	// OpenTimeout, MaxOpenTimeout, Probes and ProbeTimeout configure a state
	// breaker (breaker.WithOpenTimeout, WithBackoff, WithProbes).
	OpenTimeout    Duration `json:"open_timeout,omitempty" yaml:"open_timeout,omitempty"`
	MaxOpenTimeout Duration `json:"max_open_timeout,omitempty" yaml:"max_open_timeout,omitempty"`
	Probes         int      `json:"probes,omitempty" yaml:"probes,omitempty"`
	ProbeTimeout   Duration `json:"probe_timeout,omitempty" yaml:"probe_timeout,omitempty"`
	// K, Protection and DropPolicy configure an adaptive breaker
	// (breaker.WithK, WithProtection, WithDropPolicy: "count_drops_while_failing",
	// "count_drops" or "ignore_drops"); unset, the breaker's defaults.
	K          float64 `json:"k,omitempty" yaml:"k,omitempty"`
	Protection *int64  `json:"protection,omitempty" yaml:"protection,omitempty"`
	DropPolicy string  `json:"drop_policy,omitempty" yaml:"drop_policy,omitempty"`
}

// A Duration is a time.Duration that is written as "500ms" or "1m30s" in
// JSON, YAML and text.
type Duration time.Duration

// String returns the duration as time.Duration writes it.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration as "500ms".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a duration written as time.ParseDuration reads it.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("duration %q: write it as 500ms, 2s or 1m30s", string(b))
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON reads a duration from a JSON string ("500ms"). A bare number
// is refused: its unit would be a guess.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] != '"' {
		return fmt.Errorf("duration %s: write it as a string with a unit, such as \"500ms\"", string(b))
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	return d.UnmarshalText([]byte(s))
}

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
	ps = sharedClusterCounts(r.Flow, ps)
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
	}
	first := make(map[count]int)
	for i, f := range rules {
		if !f.Cluster {
			continue
		}
		c := count{f.Resource, f.interval(), f.buckets()}
		if j, ok := first[c]; ok {
			into = append(into, Problem{Rule: ruleAt("flow", i), Resource: f.Resource, Field: "cluster",
				Reason: fmt.Sprintf("flow[%d] is a cluster rule of the same resource, interval (%v) and buckets (%d): the two would keep one count in the cluster, each counting every request twice; give them different intervals, or keep one", j, c.interval, c.buckets)})
			continue
		}
		first[c] = i
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

func (p *problems) nonNegative(field string, d Duration) {
	if d < 0 {
		p.add(field, "%v must not be negative", d)
	}
}

func (f FlowRule) check(rule string, into []Problem) []Problem {
	p := problems{rule: rule, resource: f.Resource, list: into}
	p.name("resource", f.Resource, true)
	p.name("ref_resource", f.RefResource, false)
	if f.Limit < 0 {
		p.add("limit", "%d must not be negative", f.Limit)
	}
	p.nonNegative("interval", f.Interval)
	p.nonNegative("max_wait", f.MaxWait)
	p.nonNegative("warm_up", f.WarmUp)
	p.nonNegative("borrow", f.Borrow)
	if f.Buckets < 0 {
		p.add("buckets", "%d must not be negative", f.Buckets)
	}
	if f.Lease < 0 {
		p.add("lease", "%d must not be negative", f.Lease)
	} else if f.Lease > 0 && !f.Cluster {
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
		}{{"type", f.Type == ConcurrencyRule}, {"behavior", f.Behavior == Throttle}, {"warm_up", f.WarmUp != 0},
			{"borrow", f.Borrow != 0}, {"ref_resource", f.RefResource != ""}} {
			if x.set {
				p.add(x.field, "a cluster rule is a QPS rule that rejects, without warm-up, borrowing or another resource")
			}
		}
	}
	switch f.Type {
	case "", QPSRule:
		switch f.Behavior {
		case "", Reject:
		case Throttle:
			if f.Borrow > 0 {
				p.add("borrow", "a throttle does not borrow; only rules that reject do")
			}
			if f.RefResource != "" {
				p.add("ref_resource", "only rules that reject may limit by another resource")
			}
		default:
			p.add("behavior", "%q is not %q or %q", f.Behavior, Reject, Throttle)
		}
		if f.WarmUp > 0 && f.ColdFactor != 0 && !(f.ColdFactor > 1) {
			p.add("cold_factor", "%v must be above 1", f.ColdFactor)
		}
		if f.RefResource != "" && (f.WarmUp > 0 || f.Borrow > 0) {
			p.add("ref_resource", "a rule that limits by another resource has no warm-up and does not borrow")
		}
		if f.RefResource == f.Resource && f.Resource != "" {
			p.add("ref_resource", "%q is the rule's own resource", f.RefResource)
		}
	case ConcurrencyRule:
		for _, x := range []struct {
			field string
			set   bool
		}{{"behavior", f.Behavior != ""}, {"borrow", f.Borrow != 0}, {"buckets", f.Buckets != 0},
			{"cold_factor", f.ColdFactor != 0}, {"interval", f.Interval != 0}, {"max_wait", f.MaxWait != 0},
			{"ref_resource", f.RefResource != ""}, {"warm_up", f.WarmUp != 0}} {
			if x.set {
				p.add(x.field, "does not apply to a concurrency rule")
			}
		}
	default:
		p.add("type", "%q is not %q or %q", f.Type, QPSRule, ConcurrencyRule)
	}
	if len(p.list) == len(into) {
		// The fields are sound one by one: let the limiter's constructor
		// judge them together (bucket widths, interval splits).
		if _, err := buildFlow(f, nil, nil); err != nil {
			p.add("", "%v", err)
		}
	}
	return p.list
}

func (b BreakerRule) check(rule string, into []Problem) []Problem {
	p := problems{rule: rule, resource: b.Resource, list: into}
	p.name("resource", b.Resource, true)
	for _, d := range []struct {
		field string
		v     Duration
	}{{"max_rt", b.MaxRT}, {"window", b.Window}, {"open_timeout", b.OpenTimeout},
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
	ratio := func() {
		if !(b.Threshold > 0 && b.Threshold <= 1) {
			p.add("threshold", "%v must be above 0 and at most 1", b.Threshold)
		}
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
		if _, ok := dropPolicies[b.DropPolicy]; !ok {
			p.add("drop_policy", "%q is not one of count_drops_while_failing, count_drops, ignore_drops", b.DropPolicy)
		}
	case ErrorRatioBreaker, ErrorCountBreaker, SlowRatioBreaker:
		adaptiveOnly("k", b.K != 0)
		adaptiveOnly("protection", b.Protection != nil)
		adaptiveOnly("drop_policy", b.DropPolicy != "")
		switch b.Strategy {
		case ErrorRatioBreaker:
			ratio()
		case ErrorCountBreaker:
			if b.Count < 1 {
				p.add("count", "%d must be at least 1", b.Count)
			}
		case SlowRatioBreaker:
			ratio()
			if b.MaxRT <= 0 {
				p.add("max_rt", "%v must be positive", b.MaxRT)
			}
		}
		if b.MaxOpenTimeout != 0 && b.MaxOpenTimeout < b.OpenTimeout {
			p.add("max_open_timeout", "%v must be at least open_timeout %v", b.MaxOpenTimeout, b.OpenTimeout)
		}
	case "":
		p.add("strategy", "missing: one of adaptive, error_ratio, error_count, slow_ratio")
	default:
		p.add("strategy", "%q is not one of adaptive, error_ratio, error_count, slow_ratio", b.Strategy)
	}
	if len(p.list) == len(into) {
		if br, err := buildBreaker(b, nil); err != nil {
			p.add("", "%v", err)
		} else if c, ok := br.b.(interface{ Close() error }); ok {
			c.Close()
		}
	}
	return p.list
}
