// Package metrics exports a [slidegate.Guard]'s statistics, breakers and
// rules to Prometheus. It sits above the root package, as the middleware
// do. It carries the dependency on client_golang, so that the guard itself
// needs none.
//
// Register a [Collector] for the guard. Nothing runs until Prometheus
// scrapes:
//
//	prometheus.MustRegister(metrics.NewCollector(g))
//
// Each scrape reads the guard's statistics afresh
// ([slidegate.Guard.Resources], [slidegate.Guard.Stats] of [slidegate.InboundResource],
// [slidegate.Guard.Breakers], [slidegate.Guard.Rules]). The Collector keeps
// no state of its own. There is nothing to update, reset or stop.
//
// The notes in docs/metrics.md say why the families are made as they are,
// and what a scrape costs.
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
//	slidegate_overload_cap                        gauge      resource, rule, type
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
// [WithConstLabels] adds labels to every family. [WithTopKeys] sets how
// many keys the key families export (see Keys below).
//
// The label reason is one of rate_limited, concurrency_limited,
// exceeds_limit, wait_too_long, ref_limited, breaker_open and overloaded
// ([flow.RateLimited] ... [flow.Overloaded]). Every resource has
// all seven series, zeros included.
//
// The label rule is the rule's name: [slidegate.FlowRule].Name, or the one
// [slidegate.Rules.Named] gives it ("qps", "breaker"). It names the rule as
// a [*slidegate.BlockError] does. So it keeps its meaning when rules are
// added or reordered. The labels type and strategy are the rule's fields as
// rule files write them ("qps", "throttle", "error_count"). Resources whose
// names are not valid UTF-8 may read the same as label values. The second
// rule of a name there is then labelled "qps#2".
//
// The would-block families count the requests a shadow rule would have
// blocked and let through ([slidegate.FlowRule].Shadow,
// [slidegate.BreakerRule].Shadow, [slidegate.Rules].Shadow). They count
// them by the reason the rule would have blocked them for: what the rule
// would do enforced. They are there, every reason, for the resources a
// shadow rule names. They are there for any resource once a shadow rule
// would have blocked one of its requests.
//
// The cluster families are there only for a guard with a cluster that
// reports its health ([slidegate.WithCluster],
// [slidegate.Guard.ClusterHealth]). A redisflow.Cluster does. Alert on
// slidegate_cluster_misconfigured: a wrong password or a missing permission
// does not mend by itself.
//
// slidegate_breaker_state is a state set. It has three series per breaker,
// one per value of the label state (closed, open, half_open). The series of
// the state the breaker is in is 1, the other two are 0. So this alerts on
// any open breaker of a fleet:
//
//	max by (resource, rule) (slidegate_breaker_state{state="open"}) == 1
//
// And sum counts the instances whose breaker is open.
//
// # Overload rules
//
// The shed and adaptive rules ([slidegate.ShedRule],
// [slidegate.AdaptiveRule]) learn their limits from the traffic. So
// slidegate_flow_rule_limit leaves them out. The overload families say what
// each has learnt ([slidegate.Guard.Overload]):
//   - slidegate_overload_limit: what it has learnt: an adaptive rule's
//     limit, or the capacity a shed rule keeps to while it sheds.
//   - slidegate_overload_cap: the most requests in flight it admits now
//     ([slidegate.OverloadStatus].Cap). A shed rule caps nothing while the
//     CPU is cool, and has no series then.
//   - slidegate_overload_in_flight: the requests it allowed, not yet ended.
//   - slidegate_overload_shedding, for a shed rule: 1 while it sheds, or 0.
//   - slidegate_overload_baseline_seconds: an adaptive rule's baseline.
//   - slidegate_cpu_usage_ratio: the share of its CPU the process uses.
//
// The overload families have one series per rule in force, labelled as the
// rules' families are (type "shed" or "adaptive"). A rule on
// [slidegate.InboundResource] holds for all the inbound traffic. Its
// resource label is "(inbound)".
//
// An adaptive rule's limit is its limit now. A shed rule's is what it
// allows while it sheds: the service's capacity by Little's law. A shed
// rule that has not learnt it yet allows everything, and has no limit
// series. A shed rule sheds while the CPU is at or above its
// cpu_threshold, or within a second after it last shed. A rule without a
// CPU signal is never shown shedding. The baseline is the least response time
// an adaptive rule has seen. Its series is there once the rule has one.
//
// The CPU usage is a ratio of the process's CPU capacity, 0 to 1, as the
// shed rules read it ([slidegate.WithCPU]). It is one series, read once per
// scrape. It is there only while a shed rule reads the CPU; one with a
// cpu_threshold of -1 does not. It is sent as read, even out of range or
// NaN: that is a fault of the reading to show.
//
// The rules bound these series, whatever the traffic. There are at most
// four per rule, and one for the CPU.
//
// # Retry budgets
//
// The retry budget families are there for each budget given with
// [WithRetryBudget], such as a client's httpguard.WithRetry or
// grpcguard.WithRetry. They are labelled with the name it was given. They
// tell what [flow.RetryBudget.Stats] counts:
//   - slidegate_retry_budget_requests: the original requests of its interval.
//   - slidegate_retry_budget_retries: the retries of its interval.
//   - slidegate_retry_budget_blocked_total: the retries it blocked.
//   - slidegate_retry_budget_not_retried_total: the attempts it did not retry.
//
// A retry is blocked for want of budget. A failed attempt is not retried
// when it was a breaker's probe or met an open breaker.
//
// # Counters and windows
//
// The counters are the guard's Totals ([slidegate.Totals]). They count from
// when the guard began keeping statistics for the resource. A resource
// evicted for idleness (see [slidegate.WithMaxResources]) disappears from
// the scrape. If it comes back, it starts again from zero, which Prometheus
// reads as a counter reset. The guard counts the traffic of resources it
// has no room for under the resource "(other)" ([slidegate.OtherResource]).
// The scrape shows it once it has counted anything.
//
// The response-time summary's quantiles are the guard's window quantiles,
// not quantiles over all time. They cover the requests that ended in the
// last 5 to 10 seconds, within 4.43%. The summary's
// _sum and _count are totals since the statistics began. Its _count is
// succeeded plus failed.
//
// A resource with no request ended in the last 10 seconds has no
// quantiles. It has no slidegate_response_time_max_seconds series either.
// It has only the summary's _sum and _count: not NaN, and not 0.
// Prometheus marks the other series stale while the resource is idle. No
// family exports NaN for an idle resource.
//
// # Response-time histograms
//
// slidegate_request_duration_seconds and its inbound twin are histograms of
// response times ([slidegate.Guard.ResponseTimeTotals]). They count every
// request that ended since the guard began keeping statistics for the
// resource. Their counts only grow, and add up across the instances of a
// fleet; the summary's quantiles do not. The summary stays, for the
// dashboards and alerts that read it.
//
// A histogram's _count and _sum are the summary's. A batch
// ([slidegate.WithCount]) counts as its requests, each taking the batch's
// response time. The buckets (with _count, their total) and _sum are read
// one after the other. So a scrape during traffic may count a request in
// one and not yet in the other. The histograms hold counts since the
// statistics began, never NaN. A resource whose requests never ended has a
// histogram of zeros.
//
// The guard counts response times in bins, up to 2^38 ns (about 4 min
// 35 s). It reports each bin as one response time, within 4.43% of every
// one in the bin. Below 2.048 µs it
// is within 128 ns. A histogram counts each bin where that response time
// falls.
//
// The classic buckets are the upper bounds of [WithBuckets]
// (1 ms to 10 s by default). So le="B" counts every request up to
// B/1.0443, and none above B×1.0443 (128 ns either way below 2.048 µs). The
// requests within 4.43% of a bound may be on either side of it. Response
// times of 2^38 ns and more count in +Inf alone.
//
// The native buckets have schema 3: 8 buckets to each power of two of
// seconds. Bucket i holds (2^((i-1)/8), 2^(i/8)] seconds. A request from
// 2.048 µs up is counted in its own bucket, or in the next one up. It is
// counted in the next one if it lies within 1.56% below that bucket's lower
// bound. Below 2.048 µs, a request goes to the bucket of its bin's midpoint
// (the bins are 256 ns wide there). Below 256 ns, it goes to the zero
// bucket (zero threshold 256 ns). Response times of 2^38 ns and more
// count in the bucket holding 2^38 ns, (256 s, 279.2 s].
//
// A scrape in the text format shows the classic buckets. A scrape in the
// protobuf format carries both; a Prometheus with native histograms asks
// for it. Prometheus keeps the native buckets, and the classic ones too
// with always_scrape_classic_histograms. The histograms carry no created
// timestamp: the guard does not keep when a resource began.
//
// In the text format, each histogram costs a series per bound, +Inf, _sum
// and _count. That is 16 per resource with the default bounds. WithBuckets
// with fewer bounds, or none, lowers that. In the protobuf format, the
// native buckets are those that counted anything. There is one per 9% of
// response times seen, at most 225.
//
// # Keys
//
// A resource with per-key rules ([slidegate.FlowRule].PerKey) limits each
// key on its own ([slidegate.WithKey]). A key is a user, a tenant, a client
// address; there may be millions. The Collector never exports one series
// per key. For each such resource, it exports the keys the guard reports
// busiest ([slidegate.Guard.TopKeys]). It exports [WithTopKeys] of them in
// each family (10 by default):
//   - slidegate_top_key_requests_allowed: the keys with the most allowed.
//   - slidegate_top_key_requests_blocked: the keys with the most blocked.
//
// Each series's value is that number. The allowed family counts the last
// interval of the resource's first per-key rule. The blocked family counts
// the requests the per-key rules blocked, in that rule's current and
// previous intervals. A key with none blocked is not in it. Only keys that
// use more than half their limit, were blocked, or have overrides are
// reported. So a quiet key is in neither family.
//
// A scrape holds at most n series in each family per resource with per-key
// rules, however many keys there are. That is 2·n·R series for R such
// resources, which the rules bound. Over time, though, keys come and go as
// they get busy and quiet. Each key that takes a turn at the top leaves a
// series, which Prometheus marks stale once it is gone. A day's series are
// all the keys that took a turn. On a large fleet, where every instance
// exports its own top keys, lower n. Or export none (WithTopKeys(0)), and
// read the keys on the dashboard.
//
// A key is what a client sent. The guard shows it cut to 64 bytes. The
// Collector makes it valid UTF-8, as a label value must be: each run of
// invalid bytes becomes one U+FFFD. Keys that then read the same are added
// up into one series, such as a long key and another with the same first
// 64 bytes. The empty key, that of the requests that carry none, is
// exported as key="". Prometheus reads it as a series without the label
// key. A resource without per-key rules costs a scrape nothing here.
//
// slidegate_key_memory_bytes is the heap all the guard's per-key rules hold
// together. slidegate_key_memory_limit_bytes is the bound they share
// ([slidegate.WithKeyMemory], 64 MiB by default). Each is one series,
// always there. The first may pass the second by the few KiB each rule
// keeps whatever the bound. Near the bound, the rules stop growing their
// sketches and hot keys, and keys are refused early more often. Alert on
// their ratio staying above 0.9.
//
// # Direction
//
// The families labelled by resource are labelled by direction too, as
// [slidegate.ResourceStats].Inbound says:
//   - "inbound": a resource that any request entered with [slidegate.WithInbound].
//   - "outbound": the rest.
//
// An inbound resource is a route the service serves (httpguard.Handler,
// grpcguard's server interceptors). An outbound one is a call the service
// makes (httpguard.Transport, grpcguard's client interceptors, a
// database). A dashboard selects a direction ({direction="inbound"}), or
// adds up both (sum without (direction)). A resource has one direction, so
// the label adds no series.
//
// A resource entered outbound and later inbound changes direction once, for
// good. Its series then move from outbound to inbound, which Prometheus
// reads as one series ending and another starting. So does a route that a
// rule names. The guard keeps its resource from the moment the rules are
// set, with zero counts and outbound, until its first request comes in.
//
// # The guard's inbound traffic
//
// The guard's inbound traffic as a whole, all the requests entered with
// [slidegate.WithInbound], has families of its own (slidegate_inbound_...).
// They have no resource label. The inbound traffic is not a resource called
// "(inbound)" in the families above: a user's resource could have that
// name.
package metrics
