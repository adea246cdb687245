package metrics

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/exported"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// reasons gives each block reason its value of the label reason: its Code
// ("rate_limited"), part of the metrics' contract, which dashboards and
// alerts select on; not Reason.String, which is prose ("associated
// resource limited") and may be reworded.
var reasons = func() (out [flowlimits.NumReasons - 1]struct {
	reason flow.Reason
	label  string
}) {
	for i := range out {
		r := flow.Reason(i + 1)
		out[i].reason, out[i].label = r, r.Code()
	}
	return out
}()

// A traffic is the descriptors of the families that describe one stream of
// requests: a resource's, labelled by resource, or the guard's inbound
// traffic, without a label.
type traffic struct {
	allowed, blocked, succeeded, failed *prometheus.Desc
	wouldBlock                          *prometheus.Desc
	inFlight                            *prometheus.Desc
	responseTime, responseTimeMax       *prometheus.Desc
	requestDuration                     *prometheus.Desc
}

// newTraffic makes the descriptors with desc, their names prefixed with
// prefix, their help saying whose requests they count, and labels before
// any of their own.
//
// histogramErr and summaryErr, if not nil, make the histogram's and the
// summary's descriptors invalid, and registering fail with them.
func newTraffic(desc func(name, help string, labels ...string) *prometheus.Desc, histogramErr, summaryErr error, prefix, whose string, labels ...string) traffic {
	with := func(extra ...string) []string { return append(slices.Clip(labels), extra...) }
	requestDuration := desc(prefix+"request_duration_seconds",
		"Response time of the requests to "+whose+" that ended since the statistics began: from 2.048 µs up, the classic buckets count a request in the bucket of its response time within 4.5%, the native buckets (schema 3) in its own bucket, or the next one up if it lies within 1.6% below that bucket's lower bound; response times below 256 ns are in the zero bucket, and those between within 128 ns.",
		labels...)
	if histogramErr != nil {
		requestDuration = prometheus.NewInvalidDesc(histogramErr)
	}
	responseTime := desc(prefix+"response_time_seconds",
		"Response time of the requests to "+whose+": the quantiles over the requests that ended in the last 5 to 10 s (within 4.5%; none if no request ended in the last 10 s), _sum and _count since the statistics began.",
		labels...)
	if summaryErr != nil {
		responseTime = prometheus.NewInvalidDesc(summaryErr)
	}
	return traffic{
		responseTime:    responseTime,
		requestDuration: requestDuration,
		allowed: desc(prefix+"requests_allowed_total",
			"Requests to "+whose+" that the guard allowed.", labels...),
		// Every reason is exported for every resource, zeros included, so
		// that each series exists from the resource's first scrape: rate()
		// and increase() need a sample before the first block to count it,
		// and a series born at its first nonzero value hides that first
		// burst from an alert on rate(...{reason="breaker_open"}[5m]) > 0.
		// Seven series a resource is a bounded cost: the guard bounds its
		// resources (slidegate.WithMaxResources).
		blocked: desc(prefix+"requests_blocked_total",
			"Requests to "+whose+" that a rule blocked, by reason: rate_limited, concurrency_limited, exceeds_limit, wait_too_long, ref_limited, breaker_open, overloaded.",
			with("reason")...),
		wouldBlock: desc(prefix+"requests_would_block_total",
			"Requests to "+whose+" that a shadow rule would have blocked, and let through (counted among the allowed), by reason as requests_blocked_total; there for every reason while a shadow rule names them, and once one would have blocked.",
			with("reason")...),
		succeeded: desc(prefix+"requests_succeeded_total",
			"Allowed requests to "+whose+" that ended without an error.", labels...),
		failed: desc(prefix+"requests_failed_total",
			"Allowed requests to "+whose+" that ended with an error.", labels...),
		inFlight: desc(prefix+"requests_in_flight",
			"Requests to "+whose+" allowed and not yet ended.", labels...),
		responseTimeMax: desc(prefix+"response_time_max_seconds",
			"Longest response time of the requests to "+whose+" that ended in the last 5 to 10 s (no series if none ended in the last 10 s).",
			labels...),
	}
}

func (t *traffic) describe(ch chan<- *prometheus.Desc) {
	ch <- t.allowed
	ch <- t.blocked
	ch <- t.wouldBlock
	ch <- t.succeeded
	ch <- t.failed
	ch <- t.inFlight
	ch <- t.responseTime
	ch <- t.responseTimeMax
	ch <- t.requestDuration
}

// collect sends the metrics of s and its response times since the
// statistics began, d, as b bins them (none if d is not ok), labelled with
// labelValues; the would-block counts if shadowed (a shadow rule names
// them) or any is above zero.
func (t *traffic) collect(ch chan<- prometheus.Metric, s slidegate.ResourceStats, d durations, b *binning, shadowed bool, labelValues ...string) {
	tot := s.Totals
	constMetric(ch, t.allowed, prometheus.CounterValue, float64(tot.Allowed), labelValues...)
	withReason := append(slices.Clip(labelValues), "")
	for _, r := range reasons {
		withReason[len(labelValues)] = r.label
		constMetric(ch, t.blocked, prometheus.CounterValue, float64(blocked(tot.BlockedBy, r.reason)), withReason...)
	}
	if shadowed || tot.WouldBlock() > 0 {
		for _, r := range reasons {
			withReason[len(labelValues)] = r.label
			constMetric(ch, t.wouldBlock, prometheus.CounterValue, float64(blocked(tot.WouldBlockBy, r.reason)), withReason...)
		}
	}
	constMetric(ch, t.succeeded, prometheus.CounterValue, float64(tot.Succeeded), labelValues...)
	constMetric(ch, t.failed, prometheus.CounterValue, float64(tot.Failed), labelValues...)
	constMetric(ch, t.inFlight, prometheus.GaugeValue, float64(s.InFlight), labelValues...)

	// The latencies cover the last 5 to 10 s, in halves of 5 s aligned on
	// the clock as the counts' buckets of 1 s are, so they lie within
	// the counts' last 10 s: if no request ended there, the latencies hold
	// none, and their zeros describe no request. The quantiles and the
	// maximum are then left out, not sent as NaN (what a client_golang
	// summary sends for an empty window), which would make NaN every sum(),
	// avg() and max() taken over the instances of a fleet, nor as 0, a
	// latency no request had. The summary keeps its _sum and _count, totals
	// that are always defined.
	var q map[float64]float64
	if s.Succeeded+s.Failed > 0 {
		q = map[float64]float64{0.5: s.P50.Seconds(), 0.9: s.P90.Seconds(), 0.99: s.P99.Seconds()}
	}
	m, err := prometheus.NewConstSummary(t.responseTime, uint64(max(tot.Succeeded+tot.Failed, 0)), tot.RT.Seconds(), q, labelValues...)
	if err != nil {
		m = prometheus.NewInvalidMetric(t.responseTime, err)
	}
	ch <- m
	if q != nil {
		constMetric(ch, t.responseTimeMax, prometheus.GaugeValue, s.MaxRT.Seconds(), labelValues...)
	}
	if d.ok {
		b.histogram(ch, t.requestDuration, d, labelValues...)
	}
}

// blocked returns the count of reason r in by.
func blocked(by [flowlimits.NumReasons]int64, r flow.Reason) int64 {
	if int(r) < len(by) {
		return by[r]
	}
	return 0
}

// shadowedResources returns the resources a shadow rule names, and all
// those a rule names if every rule is in shadow (Rules.Shadow).
func shadowedResources(r slidegate.Rules) map[string]bool {
	out := map[string]bool{}
	for _, f := range r.Flow {
		if f.Shadow || r.Shadow {
			out[f.Resource] = true
		}
	}
	for _, b := range r.Breakers {
		if b.Shadow || r.Shadow {
			out[b.Resource] = true
		}
	}
	return out
}

// A row is what the Collector exports of one resource: its statistics and
// its response times since they began.
type row struct {
	stats slidegate.ResourceStats
	rt    durations
}

// byLabel returns the resources' rows with their names made label values,
// sorted, and those that share a name merged into one, for two series with
// the same labels would fail the whole scrape. Names that are not valid
// UTF-8 may read the same once made valid.
func byLabel(rs []row) []row {
	for i := range rs {
		rs[i].stats.Resource = exported.Value(rs[i].stats.Resource)
	}
	slices.SortStableFunc(rs, func(a, b row) int { return strings.Compare(a.stats.Resource, b.stats.Resource) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].stats.Resource == r.stats.Resource {
			merge(&out[n-1].stats, r.stats)
			out[n-1].rt.add(r.rt)
			continue
		}
		out = append(out, r)
	}
	return out
}

// merge adds the statistics of b, a resource of the same name, to a, in the
// fields the Collector exports: the counts and totals add up, and each
// response time is the larger of the two, which bounds the quantile of the
// requests of both from above (AvgRT is left as it was).
func merge(a *slidegate.ResourceStats, b slidegate.ResourceStats) {
	a.Inbound = a.Inbound || b.Inbound // as the guard marks a resource: once any request was
	a.Allowed += b.Allowed
	a.Blocked += b.Blocked
	a.Succeeded += b.Succeeded
	a.Failed += b.Failed
	a.InFlight += b.InFlight
	a.P50, a.P90, a.P99, a.MaxRT = max(a.P50, b.P50), max(a.P90, b.P90), max(a.P99, b.P99), max(a.MaxRT, b.MaxRT)
	a.Totals.Allowed += b.Totals.Allowed
	a.Totals.Succeeded += b.Totals.Succeeded
	a.Totals.Failed += b.Totals.Failed
	a.Totals.RT += b.Totals.RT
	for i := range a.Totals.BlockedBy {
		a.Totals.BlockedBy[i] += b.Totals.BlockedBy[i]
	}
}
