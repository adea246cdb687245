// Package metrics exports a slidegate.Guard's statistics, breakers and rules
// to Prometheus. It sits above the root package, as the middleware do, and
// carries the dependency on client_golang so that the guard itself needs
// none.
//
// Register a Collector for the guard; nothing runs until Prometheus scrapes:
//
//	prometheus.MustRegister(metrics.NewCollector(g))
//
// Each scrape reads the guard's statistics afresh (Guard.Resources,
// Guard.InboundStats, Guard.Breakers, Guard.Rules): the Collector keeps no state
// of its own, so there is nothing to update, reset or stop.
//
// # Metric families
//
// With the default namespace "slidegate":
//
//	family                                        type       labels
//	slidegate_requests_allowed_total              counter    resource, direction
//	slidegate_requests_blocked_total              counter    resource, direction, reason
//	slidegate_requests_would_block_total          counter    resource, direction, reason
//	slidegate_requests_succeeded_total            counter    resource, direction
//	slidegate_requests_failed_total               counter    resource, direction
//	slidegate_requests_in_flight                  gauge      resource, direction
//	slidegate_response_time_seconds               summary    resource, direction; quantile 0.5, 0.9, 0.99
//	slidegate_response_time_max_seconds           gauge      resource, direction
//	slidegate_request_duration_seconds            histogram  resource, direction; classic and native buckets
//	slidegate_inbound_requests_allowed_total      counter    -
//	slidegate_inbound_requests_blocked_total      counter    reason
//	slidegate_inbound_requests_would_block_total  counter    reason
//	slidegate_inbound_requests_succeeded_total    counter    -
//	slidegate_inbound_requests_failed_total       counter    -
//	slidegate_inbound_requests_in_flight          gauge      -
//	slidegate_inbound_response_time_seconds       summary    quantile 0.5, 0.9, 0.99
//	slidegate_inbound_response_time_max_seconds   gauge      -
//	slidegate_inbound_request_duration_seconds    histogram  classic and native buckets
//	slidegate_breaker_state                       gauge      resource, rule, strategy, state
//	slidegate_breaker_block_ratio                 gauge      resource, rule, strategy
//	slidegate_flow_rule_limit                     gauge      resource, rule, type
//	slidegate_breaker_rule_threshold              gauge      resource, rule, strategy
//	slidegate_overload_limit                      gauge      resource, rule, type
//	slidegate_overload_in_flight                  gauge      resource, rule, type
//	slidegate_overload_shedding                   gauge      resource, rule, type
//	slidegate_overload_baseline_seconds           gauge      resource, rule, type
//	slidegate_cpu_usage_ratio                     gauge      -
//	slidegate_top_key_requests_allowed            gauge      resource, key
//	slidegate_top_key_requests_blocked            gauge      resource, key
//	slidegate_key_memory_bytes                    gauge      -
//	slidegate_key_memory_limit_bytes              gauge      -
//	slidegate_cluster_healthy                     gauge      -
//	slidegate_cluster_misconfigured               gauge      -
//	slidegate_cluster_failures_total              counter    -
//	slidegate_cluster_fallbacks_total             counter    -
//	slidegate_retry_budget_requests               gauge      budget
//	slidegate_retry_budget_retries                gauge      budget
//	slidegate_retry_budget_blocked_total          counter    budget
//	slidegate_retry_budget_not_retried_total      counter    budget
//
// The would-block families count the requests a shadow rule
// (slidegate.FlowRule.Shadow, BreakerRule.Shadow, Rules.Shadow) would have
// blocked and let through, by the reason it would have blocked them for:
// what the rule would do enforced. They are there, every reason, for the
// resources a shadow rule names, and for any resource once one would have
// blocked.
//
// The cluster families are there only for a guard with a cluster that
// reports its health (slidegate.WithCluster, Guard.ClusterHealth; a
// redisflow.Cluster does). Alert on slidegate_cluster_misconfigured: a
// wrong password or a missing permission does not mend by itself.
//
// WithConstLabels adds labels to every family. WithTopKeys sets how many
// keys the key families export (see Keys below).
//
// slidegate_breaker_state is a state set: three series per breaker, one per
// value of the label state (closed, open, half_open), 1 for the state the
// breaker is in and 0 for the other two. An alert on any open breaker of a
// fleet is max by (resource, rule) (slidegate_breaker_state{state="open"})
// == 1, and sum counts the instances whose breaker is open; a single number
// per state could not be aggregated (the largest of closed, open and
// half-open is no state any instance is in).
//
// The label reason is one of rate_limited, concurrency_limited,
// exceeds_limit, wait_too_long, ref_limited, breaker_open and overloaded
// (slidegate.RateLimited ... slidegate.Overloaded), and every resource has
// all seven series, zeros included. The label rule is the rule's name
// (slidegate.FlowRule.Name, or the one slidegate.Rules.Named gives it:
// "qps", "breaker"), as a *slidegate.BlockError names it, so that it keeps
// its meaning when rules are added or reordered; type and strategy are the
// rule's fields as rule files write them ("qps", "throttle",
// "error_count"). Where resources' names are not valid UTF-8 and read the
// same as label values, the second rule of a name there is labelled
// "qps#2".
//
// # Overload rules
//
// The shed and adaptive rules (slidegate.ShedRule, slidegate.AdaptiveRule)
// learn their limits from the traffic, so slidegate_flow_rule_limit leaves
// them out, and the overload families say what each has learnt
// (Guard.Overload), one series per rule in force, labelled as the rules'
// families are (type "shed" or "adaptive"; the resource "(inbound)" for a
// rule on slidegate.InboundResource, which holds for all the inbound
// traffic):
//
//   - slidegate_overload_limit: the most requests in flight the rule
//     allows now: an adaptive rule's limit, or what a shed rule allows
//     while it sheds (the service's capacity by Little's law); a shed rule
//     that has not learnt it yet, and allows everything, has no series;
//   - slidegate_overload_in_flight: the requests it allowed that have not
//     ended;
//   - slidegate_overload_shedding, for a shed rule: 1 while it sheds (the
//     CPU at or above its cpu_threshold, or within a second of shedding;
//     never for a rule without a CPU signal), else 0;
//   - slidegate_overload_baseline_seconds, for an adaptive rule: the least
//     response time it has seen, once it has one;
//   - slidegate_cpu_usage_ratio: the share of its CPU capacity the process
//     uses, 0 to 1, as the shed rules read it (slidegate.WithCPU): one
//     series, read once per scrape, there only while a shed rule reads the
//     CPU (one with a cpu_threshold of -1 does not). It is sent as read,
//     even when out of range.
//
// The rules bound these series, whatever the traffic: at most four per
// rule, and one for the CPU.
//
// The retry budget families are there for each budget given with
// WithRetryBudget (a client's httpguard.WithRetry or grpcguard.WithRetry),
// labelled with the name it was given: the original requests and the
// retries of the budget's interval, the retries it blocked for want of
// budget, and the failed attempts it did not retry because they were a
// breaker's probe or met an open breaker (flow.RetryBudget.Stats).
//
// # Counters and windows
//
// The counters are the guard's Totals: they count from when the guard began
// keeping statistics for the resource. A resource evicted for idleness (see
// slidegate.WithMaxResources) disappears from the scrape and starts again
// from zero if it comes back, which Prometheus reads as a counter reset.
// The traffic of resources the guard has no room for is counted under the
// resource "(other)" (slidegate.OtherResource), which the scrape shows once
// it has counted anything.
//
// The response-time summary's quantiles are the guard's window quantiles,
// over the requests that ended in the last 5 to 10 seconds and within
// 4.43% (window.SketchError), not over all time; its _sum and _count are
// totals since the statistics began (_count is succeeded plus failed). A
// resource with no request ended in the last 10 seconds has no quantiles
// and no slidegate_response_time_max_seconds series, only the summary's
// _sum and _count: not NaN, as a client_golang summary reports an empty
// window, for one idle instance's NaN would make NaN every sum(), avg()
// and max() over a fleet; and not 0, a latency no request had. Prometheus
// marks the series stale while the resource is idle. No family exports NaN
// for an idle resource; slidegate_cpu_usage_ratio sends a CPU reading as it
// is, NaN included, for that is a fault of the reading to show.
//
// # Response-time histograms
//
// slidegate_request_duration_seconds and its inbound twin are histograms of
// the response times of every request that ended since the guard began
// keeping statistics for the resource (slidegate.Guard.ResponseTimeTotals):
// counts that only grow, which add up across the instances of a fleet, where
// the summary's quantiles cannot (the mean of two P99s is no P99). The
// summary stays, for the dashboards and alerts that read it; the histogram
// has a name of its own, as Prometheus wants (a family is one type), the
// one OpenTelemetry's http.server.request.duration takes in Prometheus.
// Its _count is the summary's (succeeded plus failed), and its _sum too; a
// batch (slidegate.WithCount) counts as its requests, each taking the
// batch's response time. The buckets (with _count, their total) and _sum
// are read one after the other, so a scrape during traffic may count a
// request in one and not yet in the other.
//
// The guard counts response times in bins of 256 ns below 2.048 µs and 8 to
// each power of two of nanoseconds above, up to window.SketchRange (about
// 4 min 35 s), and reports each bin as one response time, within
// window.SketchError (4.43%) of every one in the bin (128 ns below
// 2.048 µs): exported.BinValue. A histogram counts each bin where that
// response time falls:
//
//   - Classic buckets, the upper bounds of WithBuckets (DefaultBuckets, 1 ms
//     to 10 s): a bin straddling a bound B is counted in le="B" if its
//     reported response time is at most B, and above it if not. So le="B"
//     counts every request up to B/1.0443 and none above B×1.0443 (128 ns
//     either way below 2.048 µs): the requests within 4.43% of a bound may
//     be on either side of it. Response times of SketchRange and more count
//     in +Inf alone.
//   - Native buckets, schema 3: 8 buckets to each power of two of seconds,
//     bucket i holding (2^((i-1)/8), 2^(i/8)] s. Their edges do not fall
//     on the guard's, for a power of two of nanoseconds is not one of
//     seconds (10^9 = 2^29.897): each bin straddles two buckets, 18% of it
//     (on a log scale) in the lower and 82% in the upper, and goes whole to
//     the upper, which holds its reported response time. So a request from
//     2.048 µs up is counted in its own bucket, or in the next one up if it
//     lies within 1.56% below that bucket's lower bound (2^(0.179/8)); the
//     buckets' own width is 9%. Below 2.048 µs, the guard's bins are 256 ns
//     wide, and each goes to the bucket of its midpoint; below 256 ns, to
//     the zero bucket (zero threshold 256 ns). Response times of
//     SketchRange and more count in the bucket holding SketchRange,
//     (256 s, 279.2 s].
//
// A scrape in the text format shows the classic buckets; one in the
// protobuf format, what a Prometheus with native histograms asks for,
// carries both, and Prometheus keeps the native ones (and the classic too
// with always_scrape_classic_histograms). The histograms carry no created
// timestamp: the guard does not keep when a resource began. Each costs, in
// the text format, a series per bound, +Inf, _sum and _count: 16 per
// resource with the default bounds; WithBuckets with fewer bounds, or
// none, lowers that. In the protobuf format, the native buckets are those
// that counted anything: one per 9% of response times seen, at most 225.
// The histograms hold counts since the statistics began, never NaN: a
// resource whose requests never ended has a histogram of zeros.
//
// # Keys
//
// A resource with per-key rules (slidegate.FlowRule.PerKey) limits each key
// (a user, a tenant, a client address: slidegate.WithKey) on its own, and
// there may be millions of keys. The Collector never exports one series
// per key: for each such resource, it exports the keys the guard reports
// busiest (Guard.TopKeys), WithTopKeys of them (DefaultTopKeys, 10) in each
// family:
//
//   - slidegate_top_key_requests_allowed: the keys with the most requests
//     allowed in the last interval of the resource's first per-key rule,
//     and that number;
//   - slidegate_top_key_requests_blocked: the keys with the most requests
//     blocked by the per-key rules in that rule's current and previous
//     intervals, and that number; a key with none blocked is not there.
//
// Only keys that use more than half their limit, were blocked, or have
// overrides are reported, so a quiet key is in neither family. A scrape holds at most n series per
// resource with per-key rules in each family (2·n·R for R such resources,
// which the rules bound), however many keys there are: a flood of 100,000
// keys adds no more than those lines to a scrape (see the tests). Over
// time, though, keys come and go as they get busy and quiet: each key that
// takes a turn at the top leaves a series that Prometheus marks stale once
// it is gone, and a day's series are all the keys that took a turn. On a
// large fleet, where every instance exports its own top keys, lower n, or
// export none (WithTopKeys(0)) and read the keys on the dashboard.
//
// A key is what a client sent: the guard shows it cut to 64 bytes, and the
// Collector makes it valid UTF-8 (each run of invalid bytes becomes one U+FFFD), as a
// label value must be; keys that then read the same (a long key and
// another with the same first 64 bytes) are added up into one series, for
// two series with the same labels would fail the whole scrape. The empty
// key, that of the requests that carry none, is exported as key="", which
// Prometheus reads as a series without the label key. Reading the keys
// costs a scrape about 2 ms on a 2-core VM for a resource that tracks
// 4,096 keys (BenchmarkCollectTopKeys), and nothing for a resource without
// per-key rules.
//
// slidegate_key_memory_bytes is the heap all the guard's per-key rules
// hold together, and slidegate_key_memory_limit_bytes the bound they
// share (slidegate.WithKeyMemory, 64 MiB by default): one series each,
// always there. The first may pass the second by the few KiB each rule
// keeps whatever the bound. Near the bound, the rules stop growing their
// sketches and hot keys, and keys are refused early more often; alert on
// their ratio staying above 0.9.
//
// # Direction
//
// The families labelled by resource are labelled by direction too:
// "inbound" for a resource that any request entered with slidegate.Inbound
// (a route the service serves: httpguard.Handler, grpcguard's server
// interceptors), "outbound" for the rest (the calls the service makes:
// httpguard.Transport, grpcguard's client interceptors, a database),
// as slidegate.ResourceStats.Inbound says. A label rather than families of
// their own: the requests of both directions are the same quantities, which
// a dashboard selects ({direction="inbound"}) or adds up over both
// (sum without (direction)) with one query, where separate families would
// double the families and need an or; and a resource has one direction, so
// the label adds no series. A resource entered outbound and later inbound
// changes direction once, for good: its series then move from outbound to
// inbound, which Prometheus reads as one series ending and another
// starting. So does a route that a rule names: the guard keeps its
// resource from the moment the rules are set, with zero counts and
// outbound, until its first request comes in.
//
// # The guard's inbound traffic
//
// The requests entered with slidegate.WithInbound are exported in families of
// their own (slidegate_inbound_...), without a resource label, not as a
// resource called "(inbound)" in the families above: a resource name is any
// string, so a user's resource could be called "(inbound)", and two series
// with the same labels would make the whole scrape fail.
package metrics
