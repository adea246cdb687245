package metrics

import (
	"fmt"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/window"
)

// defaultNamespace is the prefix of every metric name unless
// WithNamespace says otherwise: "slidegate_requests_allowed_total".
const defaultNamespace = "slidegate"

// A Collector is a [prometheus.Collector] that exports a guard's statistics,
// breakers and rules. The package doc lists the families. It reads the
// guard afresh on every [Collector.Collect] and keeps no state of its own.
// So it needs no updating and nothing to stop, and concurrent scrapes are
// safe.
//
// A Collector is checked: [Collector.Describe] sends the fixed set of its
// descriptors. So a registry refuses to register a Collector when:
//   - its names collide with another's.
//   - its [WithConstLabels] are invalid.
//   - its [WithTopKeys] is negative.
//
// Collect is not a hot path. It reads each resource's windows once. It
// sends fourteen metrics per resource, seven of them the blocked requests
// (one per reason). The shed and adaptive rules cost four metrics each at
// most, and the CPU one. The notes in docs/metrics.md give what a scrape
// costs.
type Collector struct {
	guard *slidegate.Guard

	resources traffic // the requests of each resource, labelled by resource
	inbound   traffic // the guard's inbound requests, without a label
	binning   *binning

	breakerState         *prometheus.Desc
	breakerBlockRatio    *prometheus.Desc
	flowRuleLimit        *prometheus.Desc
	breakerRuleThreshold *prometheus.Desc

	overload overload // the shed and adaptive rules
	retries  retries  // the retry budgets (WithRetryBudget)

	topKeys                   int // keys a family exports per resource; 0: none
	keyAllowed, keyBlocked    *prometheus.Desc
	keyMemory, keyMemoryLimit *prometheus.Desc

	clusterHealthy, clusterMisconfigured *prometheus.Desc
	clusterFailures, clusterFallbacks    *prometheus.Desc
}

// An Option customises a Collector.
type Option func(*options)

type options struct {
	namespace   string
	constLabels prometheus.Labels
	topKeys     int
	budgets     []namedBudget
	buckets     []time.Duration
	bucketsSet  bool // WithBuckets was given, with bounds or none
}

// WithNamespace sets the prefix of every metric name. It is "slidegate"
// unless set. WithNamespace("edge") exports
// edge_requests_allowed_total. An empty ns leaves the names without a
// prefix (requests_allowed_total). Two Collectors in one registry need
// different namespaces or different [WithConstLabels].
func WithNamespace(ns string) Option {
	return func(o *options) { o.namespace = ns }
}

// WithConstLabels adds labels with fixed values to every metric. It tells
// apart two guards registered in one registry, say. The map is copied.
//
// Registering the Collector fails, with the reason, for an invalid label
// name. It fails too for a label that is also one of the Collector's own:
// resource, direction, reason, rule, type, strategy, state, key, budget,
// and le and quantile (those of the histograms' buckets and the summaries'
// quantiles).
func WithConstLabels(labels prometheus.Labels) Option {
	return func(o *options) { o.constLabels = maps.Clone(labels) }
}

// NewCollector returns a Collector for g, or for [slidegate.Default] if g
// is nil. Register it, once per registry:
//
//	prometheus.MustRegister(metrics.NewCollector(g))
func NewCollector(g *slidegate.Guard, opts ...Option) *Collector {
	if g == nil {
		g = slidegate.Default()
	}
	o := options{namespace: defaultNamespace, topKeys: defaultTopKeys}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(o.namespace, "", name), help, labels, o.constLabels)
	}
	keyAllowed, keyBlocked := keyDescs(desc, o.topKeys)
	if !o.bucketsSet {
		o.buckets = defaultBuckets()
	}
	histogramErr := checkBuckets(o.buckets)
	if histogramErr != nil {
		o.buckets = nil
	}
	// The client library adds the labels le and quantile to a histogram's
	// buckets and a summary's quantiles: a constant label of the same name
	// would make two labels of one name, which fails the whole scrape.
	var summaryErr error
	if v, ok := o.constLabels["le"]; ok && histogramErr == nil {
		histogramErr = fmt.Errorf("metrics: constant label le=%q: the histograms' buckets are labelled le", v)
	}
	if v, ok := o.constLabels["quantile"]; ok {
		summaryErr = fmt.Errorf("metrics: constant label quantile=%q: the summaries' quantiles are labelled quantile", v)
	}
	return &Collector{
		guard:      g,
		binning:    newBinning(o.buckets),
		topKeys:    o.topKeys,
		keyAllowed: keyAllowed,
		keyBlocked: keyBlocked,
		keyMemory: desc("key_memory_bytes",
			"Bytes the per-key rules hold now, together: sketches and hot keys (Guard.KeyMemory)."),
		keyMemoryLimit: desc("key_memory_limit_bytes",
			"Bytes the per-key rules may hold together (slidegate.WithKeyMemory); past it they stop growing and refuse some keys early, never letting one over its limit."),
		resources: newTraffic(desc, histogramErr, summaryErr, "", "the resource", "resource", "direction"),
		inbound:   newTraffic(desc, histogramErr, summaryErr, "inbound_", "the service (requests entered with slidegate.WithInbound)"),
		breakerState: desc("breaker_state",
			"1 if the breaker of a breaker rule in force is in the state the label state names, else 0: closed, open (a circuit blocks every request; an SRE breaker blocks some) or half_open (a circuit lets probes through). One series per state, so that max() and sum() across instances work.",
			"resource", "rule", "strategy", "state"),
		breakerBlockRatio: desc("breaker_block_ratio",
			"Share of requests the breaker of a breaker rule blocks now, 0 to 1: an SRE breaker's probability of blocking one; for a circuit 0 closed, 1 open, and the share of probe places taken when half-open.",
			"resource", "rule", "strategy"),
		flowRuleLimit: desc("flow_rule_limit",
			"Limit of a flow rule in force: requests per the rule's interval (type qps or throttle; for a rule with a ref_resource, that resource's requests) or requests in flight (type concurrency). Shed and adaptive rules are not here: their limits move (overload_limit).",
			"resource", "rule", "type"),
		breakerRuleThreshold: desc("breaker_rule_threshold",
			"Threshold at which the breaker of a breaker rule in force opens: the share of failed (error_ratio) or slow (slow_ratio) requests, 0 to 1, the number of failures (error_count), or of failures in a row (consecutive_failures), in the breaker's window. SRE breakers have none.",
			"resource", "rule", "strategy"),
		overload: newOverload(desc),
		retries:  newRetries(desc, o.budgets),
		clusterHealthy: desc("cluster_healthy",
			"1 while the guard's cluster (slidegate.WithCluster) decides the cluster-wide rules, 0 while they fall back to local decisions."),
		clusterMisconfigured: desc("cluster_misconfigured",
			"1 while the cluster answers with an error that retrying will not fix (a wrong password, a missing permission or command: see the logs), 0 otherwise."),
		clusterFailures: desc("cluster_failures_total",
			"Calls to the guard's cluster that failed or timed out."),
		clusterFallbacks: desc("cluster_fallbacks_total",
			"Decisions of cluster-wide rules made by their local fallback while the cluster did not answer."),
	}
}

// Describe sends the descriptors of every metric the Collector exports. It
// always sends the same set, whatever the guard holds.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.resources.describe(ch)
	c.inbound.describe(ch)
	ch <- c.breakerState
	ch <- c.breakerBlockRatio
	ch <- c.flowRuleLimit
	ch <- c.breakerRuleThreshold
	c.overload.describe(ch)
	c.retries.describe(ch)
	ch <- c.keyAllowed
	ch <- c.keyBlocked
	ch <- c.keyMemory
	ch <- c.keyMemoryLimit
	ch <- c.clusterHealthy
	ch <- c.clusterMisconfigured
	ch <- c.clusterFailures
	ch <- c.clusterFallbacks
}

// Collect reads the guard and sends its metrics:
//   - the statistics of every resource, and of the inbound traffic.
//   - the state of every breaker, and the rules in force.
//   - what the shed and adaptive rules have learnt, and the CPU they read.
//   - the busiest keys of each resource with per-key rules.
//   - the memory of the per-key rules.
//   - the health of the guard's cluster, if it reports it.
//
// It reads them with [slidegate.Guard.Resources],
// [slidegate.Guard.Stats] of [slidegate.InboundResource], [slidegate.Guard.Breakers],
// [slidegate.Guard.Rules], [slidegate.Guard.Overload],
// [slidegate.Guard.KeyMemory] and [slidegate.Guard.ClusterHealth]. It
// reads the keys [slidegate.Guard.TopKeys] chooses from, unsorted, and
// chooses itself.
//
// The breakers and the rules are read separately. So a scrape that races
// [slidegate.Guard.SetRules] may show the breakers or the overload rules of
// one set of rules beside the limits of the next.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	rules := c.guard.Rules()
	shadowed := shadowedResources(rules)
	var buf window.SketchTotals // 1.8 KB, filled for one resource after another
	stats := c.guard.Resources()
	rows := make([]row, len(stats))
	for i, s := range stats {
		// Read by the guard's name, before byLabel makes it a label value.
		rows[i] = row{stats: s, rt: c.binning.resourceDurations(c.guard, &buf, s.Resource, s.Totals.RT)}
	}
	for _, r := range byLabel(rows) {
		s := r.stats
		c.resources.collect(ch, s, r.rt, c.binning, shadowed[s.Resource], s.Resource, direction(s.Inbound))
	}
	in, _ := c.guard.Stats(slidegate.InboundResource)
	c.guard.ResponseTimeTotals(slidegate.InboundResource, &buf)
	c.inbound.collect(ch, in, c.binning.read(&buf, in.Totals.RT), c.binning, shadowed[slidegate.InboundResource])
	c.collectBreakers(ch, c.guard.Breakers())
	c.collectRules(ch, rules)
	c.overload.collect(ch, c.guard.Overload())
	c.retries.collect(ch)
	c.collectKeys(ch, rules)
	inUse, limit := c.guard.KeyMemory()
	constMetric(ch, c.keyMemory, prometheus.GaugeValue, float64(inUse))
	constMetric(ch, c.keyMemoryLimit, prometheus.GaugeValue, float64(limit))
	if h, ok := c.guard.ClusterHealth(); ok {
		constMetric(ch, c.clusterHealthy, prometheus.GaugeValue, flag(h.Healthy))
		constMetric(ch, c.clusterMisconfigured, prometheus.GaugeValue, flag(h.Err != nil))
		constMetric(ch, c.clusterFailures, prometheus.CounterValue, float64(h.Failures))
		constMetric(ch, c.clusterFallbacks, prometheus.CounterValue, float64(h.Fallbacks))
	}
}

// direction is the value of the label direction of a resource that is
// inbound or not (slidegate.ResourceStats.Inbound).
func direction(inbound bool) string {
	if inbound {
		return "inbound"
	}
	return "outbound"
}

// flag is 1 for true and 0 for false.
func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// constMetric sends a metric with one value. Should the client library refuse
// it, it sends instead an invalid metric that fails the scrape with the
// reason: the Must... constructors would panic on the registry's collecting
// goroutine, which brings the whole program down.
func constMetric(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labelValues ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labelValues...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}
