package slidegate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Rules is a guard's complete set of rules: what each resource may do. A
// resource may have any number of flow rules and breakers; a request must
// be allowed by all of them. The zero Rules has no rules.
//
// Rules read from and write to JSON and YAML (the package rulefile reads
// files and watches them), with durations written as "500ms" or "1m30s".
type Rules struct {
	Flow     []FlowRule    `json:"flow,omitempty" yaml:"flow,omitempty"`
	Breakers []BreakerRule `json:"breakers,omitempty" yaml:"breakers,omitempty"`
	// Shadow, if true, puts every rule in shadow (see FlowRule.Shadow):
	// the guard decides and counts, and blocks nothing.
	Shadow bool `json:"shadow,omitempty" yaml:"shadow,omitempty"`
}

// A FlowType is the kind of a flow rule (FlowRule.Type).
type FlowType string

// The kinds of flow rule.
const (
	// QPSRule allows at most Limit requests in any Interval, wherever it
	// starts, and blocks the rest at once (flow.QPS).
	QPSRule FlowType = "qps"
	// ThrottleRule spaces requests evenly, Limit per Interval: a request
	// waits for its place, and is blocked if that is more than MaxWait away
	// (flow.Throttle).
	ThrottleRule FlowType = "throttle"
	// ConcurrencyRule allows at most Limit requests in flight
	// (flow.Concurrency).
	ConcurrencyRule FlowType = "concurrency"
	// ShedRule sheds requests while the service is overloaded
	// ([flow.Shedder]). While the CPU the guard reads ([WithCPU]) is at
	// or above CPUThreshold, or was within a second, it allows a request
	// only while fewer are in flight than the service completes at its
	// best. On [InboundResource] it protects the whole service.
	ShedRule FlowType = "shed"
	// AdaptiveRule is a concurrency limit that finds itself from the
	// response times of the requests it allows ([flow.Adaptive]). It comes
	// down when they queue, or end overloaded ([IsOverloaded]). It grows
	// while they do not and the limit is in use. Limit is where it starts.
	AdaptiveRule FlowType = "adaptive"
)

// InboundResource is the resource a flow rule names to hold for all the
// inbound traffic of the guard (requests entered with WithInbound, as the
// middleware's server side enters them) together, whatever resource each request enters: a shed rule
// that protects the whole service, a concurrency limit on all it serves.
// A request that enters an inbound resource is asked the rules of
// InboundResource first, then those of its own resource. No breaker names
// it, and no rule reads it as its RefResource.
const InboundResource = "(inbound)"

// A FlowRule limits a resource's traffic.
type FlowRule struct {
	// Resource is the name of the resource the rule protects.
	Resource string `json:"resource" yaml:"resource"`
	// Name names the rule in a *BlockError, the metrics' rule label, the
	// dashboard and events: unique among the rules of its resource, at
	// most MaxRuleNameLength bytes. Unset, the guard names the rule after
	// its type (see Rules.Named): "qps", "concurrency", "qps_per_key"…
	// A reload that changes only a rule's name keeps its counts, though
	// its event (RulesChanged) tells it as a rule removed and one added:
	// names tell rules apart. Among rules of a resource with the same
	// settings, a reload gives each the counts of the rule of its name.
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
	// cluster rule has at most MaxClusterBuckets buckets, each a whole
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
	// of 0 blocks the key. At most MaxOverrides keys, each at most
	// MaxKeyLength bytes. A reload that changes only a per-key concurrency
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

// The adaptive algorithms' names in rules (FlowRule.Algorithm).
var adaptiveAlgorithms = map[string]bool{"": true, "gradient": true, "aimd": true}

// MaxOverrides is the most keys a per-key rule lists in its Overrides.
const MaxOverrides = 10000

// MaxClusterBuckets is the most buckets a cluster rule (FlowRule.Cluster)
// divides its interval into: a cluster reads them at every decision.
const MaxClusterBuckets = 1000

// A BreakerStrategy is what opens a breaker (BreakerRule.Strategy).
type BreakerStrategy string

// The strategies of a breaker.
const (
	AdaptiveBreaker   BreakerStrategy = "adaptive"    // the Google SRE throttle: breaker.Adaptive
	ErrorRatioBreaker BreakerStrategy = "error_ratio" // breaker.ErrorRatio(Threshold)
	ErrorCountBreaker BreakerStrategy = "error_count" // breaker.ErrorCount(Count)
	SlowRatioBreaker  BreakerStrategy = "slow_ratio"  // breaker.SlowRatio(MaxRT, Threshold)
	// ConsecutiveFailuresBreaker opens after Count failures in a row in the
	// window: breaker.ConsecutiveFailures(Count).
	ConsecutiveFailuresBreaker BreakerStrategy = "consecutive_failures"
)

// A BreakerRule puts a circuit breaker (package breaker) in front of a
// resource. A request that ends with an error (Entry.Exit with a non-nil
// error) is a failure.
type BreakerRule struct {
	// Resource is the name of the resource the breaker protects.
	Resource string `json:"resource" yaml:"resource"`
	// Name names the rule as FlowRule.Name does; unset, "breaker".
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// Strategy is one of AdaptiveBreaker, ErrorRatioBreaker,
	// ErrorCountBreaker, SlowRatioBreaker, ConsecutiveFailuresBreaker.
	Strategy BreakerStrategy `json:"strategy" yaml:"strategy"`
	// Threshold is the ratio that opens an error_ratio or slow_ratio
	// breaker, in (0, 1].
	Threshold float64 `json:"threshold,omitempty" yaml:"threshold,omitempty"`
	// Count is the number of failures that opens an error_count breaker,
	// or the failures in a row that open a consecutive_failures breaker.
	Count int64 `json:"count,omitempty" yaml:"count,omitempty"`
	// MaxRT is the longest a request may take before a slow_ratio breaker
	// counts it as slow.
	MaxRT Duration `json:"max_rt,omitempty" yaml:"max_rt,omitempty"`
	// MinRequests is the minimum volume (breaker.WithMinRequests); unset,
	// the breaker's default: 10 for the ratio and count strategies, 0 for
	// consecutive_failures and adaptive.
	MinRequests *int64 `json:"min_requests,omitempty" yaml:"min_requests,omitempty"`
	// Interval and Buckets are the breaker's sliding window
	// (breaker.WithWindow); each unset takes the breaker's default: 10 s,
	// in 40 buckets for an adaptive breaker and 10 for the others.
	Interval Duration `json:"interval,omitempty" yaml:"interval,omitempty"`
	Buckets  int      `json:"buckets,omitempty" yaml:"buckets,omitempty"`
	// OpenTimeout, MaxOpenTimeout, Probes and ProbeTimeout configure a state
	// breaker (breaker.WithOpenTimeout, WithBackoff, WithProbes).
	OpenTimeout    Duration `json:"open_timeout,omitempty" yaml:"open_timeout,omitempty"`
	MaxOpenTimeout Duration `json:"max_open_timeout,omitempty" yaml:"max_open_timeout,omitempty"`
	Probes         int      `json:"probes,omitempty" yaml:"probes,omitempty"`
	ProbeTimeout   Duration `json:"probe_timeout,omitempty" yaml:"probe_timeout,omitempty"`
	// K, Protection and BlockPolicy configure an adaptive breaker
	// (breaker.WithK, WithProtection, WithBlockPolicy: "count_blocks_while_failing",
	// "count_blocks" or "ignore_blocks"); unset, the breaker's defaults.
	K           float64 `json:"k,omitempty" yaml:"k,omitempty"`
	Protection  *int64  `json:"protection,omitempty" yaml:"protection,omitempty"`
	BlockPolicy string  `json:"block_policy,omitempty" yaml:"block_policy,omitempty"`
	// Shadow, if true, puts the breaker in shadow (see FlowRule.Shadow):
	// it opens, half-opens and closes as it would enforced, and a request
	// it would have blocked goes on, counted in Totals.WouldBlockBy.
	Shadow bool `json:"shadow,omitempty" yaml:"shadow,omitempty"`
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
