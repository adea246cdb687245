package slidegate

import (
	"slices"
	"time"

	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// A FlowType is the kind of a flow rule (FlowRule.Type): [QPSRule],
// [ThrottleRule], [ConcurrencyRule], [ShedRule] or [AdaptiveRule].
type FlowType string

// A FlowRule limits a resource's traffic.
type FlowRule struct {
	// Resource is the name of the resource the rule protects.
	Resource string `json:"resource" yaml:"resource"`
	// Name names the rule in a *BlockError, the metrics' rule label, the
	// dashboard and events: unique among the rules of its resource, at
	// most 64 bytes. Unset, the guard names the rule after
	// its type (see Rules.Named): "qps", "concurrency", "qps_per_key"…
	// A reload that changes only a rule's name keeps its counts, though
	// its event ("rules_changed") tells it as a rule removed and one added:
	// names tell rules apart. Among rules of a resource with the same
	// settings, a reload gives each the counts of the rule of its name.
	// A rule never takes the counts of a rule of another name that the
	// new rules keep: two named rules that swap their limits keep each
	// its own counts.
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// Type is the kind of rule: QPSRule (the default), ThrottleRule,
	// ConcurrencyRule, ShedRule or AdaptiveRule.
	Type FlowType `json:"type,omitempty" yaml:"type,omitempty"`
	// Limit is how many requests are allowed per Interval (QPSRule,
	// ThrottleRule) or at once (ConcurrencyRule). 0 blocks everything. An
	// adaptive rule starts from Limit (default 20),
	// and a reload that changes only its Limit keeps the limit it has
	// learnt; a shed rule has none.
	Limit int64 `json:"limit" yaml:"limit"`
	// Interval is the span Limit counts over (default 1s), for a QPS rule
	// or a throttle; for a shed rule, the window it learns the service's
	// capacity over (default 5s).
	Interval Duration `json:"interval,omitempty" yaml:"interval,omitempty"`
	// Buckets divides the interval of a QPS rule (default 25: more
	// buckets allow closer to the limit under steady overload), of a throttle's warm-up, or of a shed rule's window
	// (default 50).
	Buckets int `json:"buckets,omitempty" yaml:"buckets,omitempty"`
	// MaxWait is how long a throttle's request may wait for its place.
	MaxWait Duration `json:"max_wait,omitempty" yaml:"max_wait,omitempty"`
	// WarmUp, if positive, makes a QPS rule or a throttle start at
	// Limit/ColdFactor and warm up to Limit over this period of traffic: at
	// least two intervals and ten buckets (see flow.QPSSettings.WarmUp).
	WarmUp Duration `json:"warm_up,omitempty" yaml:"warm_up,omitempty"`
	// ColdFactor is the warm-up's cold factor (default 3): above 1, and at
	// most Limit.
	ColdFactor float64 `json:"cold_factor,omitempty" yaml:"cold_factor,omitempty"`
	// Borrow, if positive, lets prioritized requests (WithPriority) over a
	// QPS rule's limit borrow a place in the next bucket and wait for it, at
	// most this long.
	Borrow Duration `json:"borrow,omitempty" yaml:"borrow,omitempty"`
	// RefResource, if set, makes a QPS rule limit Resource by RefResource's
	// traffic (Sentinel's associated resource): a request to Resource is
	// blocked while RefResource allowed Limit requests or more in the last
	// Interval.
	RefResource string `json:"ref_resource,omitempty" yaml:"ref_resource,omitempty"`
	// Cluster, if true, makes a QPS rule hold for all the instances of the
	// service together: its counts are kept in the
	// guard's Cluster (WithCluster; package redisflow keeps them in
	// Redis), under the resource's name, the interval and the buckets. A
	// cluster rule has at most 1,000 buckets, each a whole
	// number of microseconds wide.
	Cluster bool `json:"cluster,omitempty" yaml:"cluster,omitempty"`
	// Lease, for a cluster rule, lets an instance take up to this many
	// permits per round trip to the cluster and spend them locally
	// (redisflow.WithLease); 0 or 1 takes one per request.
	Lease int64 `json:"lease,omitempty" yaml:"lease,omitempty"`
	// PerKey, if true, makes the rule's limit hold for each key (WithKey)
	// separately: per user, tenant, client address. A per-key QPS rule
	// keeps the sliding-window promise for every key, with memory bounded
	// whatever the number of keys (see flow.KeyedQPS); the per-key QPS
	// rules of a resource, whatever their intervals (5 per second, 100 per
	// minute), are decided together, all or nothing. A per-key
	// concurrency rule limits each key's requests in flight, a per-key
	// throttle spaces each key's requests. With Cluster, the per-key
	// limits hold for all the instances together (a concurrency rule is
	// never cluster-wide). PerKey cannot be combined with RefResource,
	// WarmUp, Borrow or Lease. The per-key QPS rules of a resource share
	// their counts' state: a reload that keeps them all, in the same
	// order and with the same intervals and buckets, keeps their counts
	// (changing limits and overrides); one that adds, removes or reshapes
	// any of them starts them all afresh.
	PerKey bool `json:"per_key,omitempty" yaml:"per_key,omitempty"`
	// Overrides gives the listed keys of a per-key rule limits of their
	// own instead of Limit: {"tenant-a": 500, "abuser": 0}. An override
	// of 0 blocks the key. At most 10,000 keys, each at most
	// 256 bytes. A reload that changes only a per-key concurrency
	// rule's or throttle's limit and overrides keeps what every key holds
	// (its places in flight, its next place), a key gaining or losing an
	// override too.
	Overrides map[string]int64 `json:"overrides,omitempty" yaml:"overrides,omitempty"`
	// CPUThreshold is the CPU usage at or above which a shed rule sheds
	// (default 0.9): a share, in (0, 1], of
	// what the process may use, as the guard reads it (WithCPU). Below half
	// of it the rule caps nothing. -1 means no CPU signal: the rule then
	// holds the requests in flight to twice what the service completes,
	// all the time: a cap on floods (see flow.ShedderSettings.CPU).
	CPUThreshold float64 `json:"cpu_threshold,omitempty" yaml:"cpu_threshold,omitempty"`
	// Algorithm is how an adaptive rule moves its limit: "gradient" (the
	// default) or "aimd" (see flow.AdaptiveSettings.Algorithm).
	Algorithm string `json:"algorithm,omitempty" yaml:"algorithm,omitempty"`
	// MinLimit and MaxLimit bound an adaptive rule's limit (defaults 4
	// and 10000). It
	// never goes below MinLimit, not even to probe.
	MinLimit int64 `json:"min_limit,omitempty" yaml:"min_limit,omitempty"`
	MaxLimit int64 `json:"max_limit,omitempty" yaml:"max_limit,omitempty"`
	// Tolerance is how much slower than the least response time it has
	// seen an adaptive rule lets requests become before its limit comes
	// down (default 1.25).
	Tolerance float64 `json:"tolerance,omitempty" yaml:"tolerance,omitempty"`
	// Share is whom a shed or adaptive rule shares its limit among when
	// the limit is reached: "resource" (each route its share; the default
	// on InboundResource) or "key" (each key of WithKey its share: a client
	// address, a tenant; the default elsewhere). A request whose resource
	// or key holds less than its share is admitted even at the limit, one
	// that holds more is not: a route whose handler stalls, or a client
	// whose uploads trickle in, keeps what it holds but cannot take the
	// rest from the others (see flow.Shedder).
	Share string `json:"share,omitempty" yaml:"share,omitempty"`
	// Shadow, if true, puts the rule in shadow (a dry run): it decides and
	// counts as it would enforced, and never blocks. A request it would
	// have blocked goes on, counted in Totals.WouldBlockBy; a wait it
	// would have imposed (a throttle's) is not waited. Enforcing the rule
	// later keeps what it counted in shadow: the same rule, shadow or not,
	// keeps its enforcer. The per-key QPS rules of a resource, decided
	// together, are all in shadow or none. A cluster rule in shadow still
	// makes its round trip to the cluster. A request a shadow rule would
	// have blocked still counts against the enforced rules after it, so
	// WouldBlockBy is what enforcing the shadow rules would block on top of
	// the rules enforced, not a run of the shadow rules alone.
	Shadow bool `json:"shadow,omitempty" yaml:"shadow,omitempty"`
}

// flowFields are the optional fields of a flow rule, by their names in
// files: whether a rule sets each. A kind lists those that apply to it
// (kind.fields).
var flowFields = []struct {
	field string
	set   func(*FlowRule) bool
}{
	{"limit", func(f *FlowRule) bool { return f.Limit != 0 }},
	{"interval", func(f *FlowRule) bool { return f.Interval != 0 }},
	{"buckets", func(f *FlowRule) bool { return f.Buckets != 0 }},
	{"per_key", func(f *FlowRule) bool { return f.PerKey }},
	{"cpu_threshold", func(f *FlowRule) bool { return f.CPUThreshold != 0 }},
	{"algorithm", func(f *FlowRule) bool { return f.Algorithm != "" }},
	{"min_limit", func(f *FlowRule) bool { return f.MinLimit != 0 }},
	{"max_limit", func(f *FlowRule) bool { return f.MaxLimit != 0 }},
	{"tolerance", func(f *FlowRule) bool { return f.Tolerance != 0 }},
	{"share", func(f *FlowRule) bool { return f.Share != "" }},
	{"max_wait", func(f *FlowRule) bool { return f.MaxWait != 0 }},
	{"warm_up", func(f *FlowRule) bool { return f.WarmUp != 0 }},
	{"cold_factor", func(f *FlowRule) bool { return f.ColdFactor != 0 }},
	{"borrow", func(f *FlowRule) bool { return f.Borrow != 0 }},
	{"ref_resource", func(f *FlowRule) bool { return f.RefResource != "" }},
	{"cluster", func(f *FlowRule) bool { return f.Cluster }},
	{"lease", func(f *FlowRule) bool { return f.Lease != 0 }},
}

// appendKey writes every field of f; its overrides whole if exact, else by
// their number and hash (see ruleKey).
func (f *FlowRule) appendKey(b []byte, exact bool) []byte {
	b = appendString(b, f.Resource)
	b = appendString(b, f.Name)
	b = appendString(b, string(f.Type))
	b = appendInt(b, f.Limit)
	b = appendInt(b, int64(f.Interval))
	b = appendInt(b, int64(f.Buckets))
	b = appendInt(b, int64(f.MaxWait))
	b = appendInt(b, int64(f.WarmUp))
	b = appendFloat(b, f.ColdFactor)
	b = appendInt(b, int64(f.Borrow))
	b = appendString(b, f.RefResource)
	b = appendBool(b, f.Cluster)
	b = appendInt(b, f.Lease)
	b = appendBool(b, f.PerKey)
	if exact {
		b = appendExactOverrides(b, f.Overrides)
	} else {
		b = appendOverrides(b, f.Overrides)
	}
	b = appendFloat(b, f.CPUThreshold)
	b = appendString(b, f.Algorithm)
	b = appendInt(b, f.MinLimit)
	b = appendInt(b, f.MaxLimit)
	b = appendFloat(b, f.Tolerance)
	b = appendString(b, f.Share)
	return appendBool(b, f.Shadow)
}

// flowType returns the rule's type, the first kind's when unset.
func (f FlowRule) flowType() FlowType {
	if f.Type == "" {
		return FlowType(kinds[0].Name)
	}
	return f.Type
}

// kind returns the rule's kind, nil for a type that no kind has.
func (f FlowRule) kind() *kind { return kindOf(f.Type) }

// normal returns the rule with the defaults it leaves out written out, by
// its kind (kind.normal), and a warm-up's cold factor.
func (f FlowRule) normal() FlowRule {
	// Enforced or in shadow, a rule keeps its enforcer and its counts: a
	// rule tried in shadow is then enforced from what it has counted.
	f.Shadow = false
	f.Name = "" // nor does a rule renamed lose its counts
	f.Type = f.flowType()
	if k := f.kind(); k != nil && k.normal != nil {
		k.normal(&f)
	}
	if f.WarmUp > 0 && f.ColdFactor == 0 {
		f.ColdFactor = flowlimits.DefaultColdFactor
	}
	return f
}

// shape is the rule with its limits left out, its limit and a per-key
// rule's overrides: rules of one shape differ at most in their limits.
func (f FlowRule) shape() FlowRule {
	f.Limit, f.Overrides = 0, nil
	return f
}

// interval returns the rule's interval, its kind's default when unset
// (a second for most).
func (f FlowRule) interval() time.Duration {
	if f.Interval != 0 {
		return time.Duration(f.Interval)
	}
	if k := f.kind(); k != nil && k.interval != 0 {
		return k.interval
	}
	return time.Second
}

// buckets returns the number of buckets of the rule's window, when unset
// its kind's default, or flowlimits.DefaultKeyBuckets for a per-key rule
// of a kind without one.
func (f FlowRule) buckets() int {
	if f.Buckets != 0 {
		return f.Buckets
	}
	if k := f.kind(); k != nil && k.buckets != 0 {
		return k.buckets
	}
	if f.PerKey {
		return flowlimits.DefaultKeyBuckets
	}
	return defaultBuckets
}

// keyedTogether reports whether f is one of the per-key QPS rules that are
// decided together: per key, counting requests (not a throttle or a
// concurrency rule).
func (f FlowRule) keyedTogether() bool { return f.PerKey && f.kind() == &qpsKind }

// share returns whom an overload rule shares its limit among
// (FlowRule.Share), its default filled in.
func (f FlowRule) share() string {
	switch {
	case f.Share != "":
		return f.Share
	case f.Resource == InboundResource:
		return shareByResource
	}
	return shareByKey
}

// byKey reports whether an overload rule shares its limit among keys, not
// resources.
func (f FlowRule) byKey() bool { return f.share() == shareByKey }

// The values of FlowRule.Share.
const (
	shareByResource = "resource"
	shareByKey      = "key"
)

// check adds the problems of f, rule at of list, to into: its fields one by
// one, those its kind adds (kind.check), then, if it has none, those the
// limiters find in its fields together, if judge.
func (f *FlowRule) check(list string, at int, into []Problem, judge bool) []Problem {
	p := problems{in: list, at: at, resource: f.Resource, list: into}
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
	k := f.kind()
	if k == nil {
		p.add("type", "%q is not %s", f.Type, kindNames())
	} else {
		for _, x := range flowFields {
			if x.set(f) && !slices.Contains(k.fields, x.field) {
				p.add(x.field, "does not apply to a %s rule", k.Name)
			}
		}
	}
	f.checkOverload(&p)
	if f.Lease > 0 && !f.Cluster {
		p.add("lease", "only a cluster rule leases permits")
	}
	if f.Cluster {
		if k := f.buckets(); k > bounds.MaxClusterBuckets {
			p.add("buckets", "%d: a cluster rule has at most %d buckets", k, bounds.MaxClusterBuckets)
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
	if f.WarmUp == 0 && f.ColdFactor != 0 {
		p.add("cold_factor", "a cold factor needs a warm-up (warm_up)")
	}
	f.checkKeys(&p)
	if k != nil && k.check != nil {
		for _, x := range k.check(f) {
			p.add(x.field, "%s", x.reason)
		}
	}
	if judge && len(p.list) == len(into) {
		// The fields are sound one by one: let the limiter's constructor
		// judge them together (bucket widths, interval splits).
		if err := checkFlow(*f); err != nil {
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
	if len(f.Overrides) > bounds.MaxOverrides {
		p.add("overrides", "%d keys: a rule has at most %d overrides", len(f.Overrides), bounds.MaxOverrides)
		return
	}
	var bad []string // in key order, once found: most rules have none
	for key, n := range f.Overrides {
		if len(key) > bounds.MaxKeyLength || n < 0 || n > flowlimits.MaxLimit {
			bad = append(bad, key)
		}
	}
	slices.Sort(bad)
	for _, key := range bad {
		switch n := f.Overrides[key]; {
		case len(key) > bounds.MaxKeyLength:
			p.add("overrides", "a key of %d bytes: keys are at most %d bytes long", len(key), bounds.MaxKeyLength)
		default:
			p.add("overrides", "%q: %d must be between 0 and %d", key, n, int64(flowlimits.MaxLimit))
		}
	}
}
