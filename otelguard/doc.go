// Package otelguard exports a slidegate.Guard's statistics, breakers and
// rules as OpenTelemetry metrics. It is the OpenTelemetry twin of package
// metrics, which exports the same to Prometheus, and a module of its own,
// so that neither the guard nor a user of package metrics pulls in
// OpenTelemetry.
//
// Register the guard's instruments with a MeterProvider, and give the
// guard's Producer to the SDK's reader for the response-time histograms:
//
//	p, err := otelguard.NewProducer(g)
//	...
//	reader := sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithProducer(p))
//	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
//	reg, err := otelguard.Register(g, mp)
//	...
//	defer reg.Close()
//
// # Read at collection, nothing on the request path
//
// Every instrument is observable, with one callback for them all, which
// reads the guard when a reader collects (Guard.Resources,
// Guard.InboundStats, Guard.Breakers, Guard.Rules().Named(),
// Guard.Overload, Guard.ClusterHealth); the Producer reads
// Guard.ResponseTimeTotals and Guard.InboundResponseTimeTotals likewise.
// The guard counts all of it anyway, so Enter and Exit run no code of this
// package, cost what they cost without it, and allocate nothing (see the
// tests); nothing runs between collections, and no goroutine is started.
// A collection costs O(resources + rules) and allocates its data points:
// about 80 ms and 24 MB for 4,096 resources on a 2-core VM, most of it
// Guard.Resources, which the callback and the Producer each call once
// (BenchmarkCollect).
//
// # Instruments
//
// All under the meter and scope ScopeName. Units are UCUM, as the
// semantic conventions write them. Attributes are named by the Key
// constants (ResourceKey ...), and WithAttributes adds attributes of one's
// own to every data point: a process with several guards that share a
// MeterProvider registers each with its own (attribute.String("guard",
// "api")), or two guards' resources of the same name would be one series
// observed twice. Each guard has its Producer, all given to the reader;
// their histograms come as one scope each, of the same name.
//
//	name                                  instrument                 unit        attributes
//	slidegate.requests                    counter (observable)       {request}   slidegate.resource, slidegate.direction, slidegate.outcome, slidegate.reason (blocked, would_block)
//	slidegate.in_flight_requests          up-down counter (obs.)     {request}   slidegate.resource, slidegate.direction
//	slidegate.request.duration            histogram (Producer)       s           slidegate.resource, slidegate.direction
//	slidegate.inbound.requests            counter (observable)       {request}   slidegate.outcome, slidegate.reason (blocked, would_block)
//	slidegate.inbound.in_flight_requests  up-down counter (obs.)     {request}   -
//	slidegate.inbound.request.duration    histogram (Producer)       s           -
//	slidegate.breaker.state               gauge (observable)         1           slidegate.resource, slidegate.rule.name, slidegate.breaker.strategy, slidegate.breaker.state
//	slidegate.rule.limit                  gauge (observable)         {request}   slidegate.resource, slidegate.rule.name, slidegate.rule.type
//	slidegate.overload.limit              gauge (observable)         {request}   slidegate.resource, slidegate.rule.name, slidegate.rule.type
//	slidegate.cluster.healthy             gauge (observable)         1           -
//	slidegate.cluster.failures            counter (observable)       {call}      -
//	slidegate.cluster.fallbacks           counter (observable)       {decision}  -
//
// slidegate.requests counts since the guard began keeping a resource's
// statistics (slidegate.Totals), one series per outcome: "allowed" (the
// requests let in), "blocked" (one series for each reason that blocked
// any: "rate_limited", "concurrency_limited", "exceeds_limit",
// "wait_too_long", "ref_limited", "breaker_open", "overloaded"),
// "would_block" (the requests a shadow rule would have blocked and let
// through, by the reason it would have blocked them for:
// slidegate.FlowRule.Shadow, BreakerRule.Shadow, Rules.Shadow), "succeeded"
// and "failed" (the allowed requests that exited without and with an
// error). Allowed, succeeded and failed are there from the resource's
// first request, zeros included; a blocked or would_block series appears
// with the first request blocked, or that would have been, for its reason
// (see Bounds below for why). The outcomes overlap: would_block, succeeded
// and failed are among allowed, so select an outcome rather than add them
// all up; allowed plus blocked is every request. slidegate.direction is
// "inbound" for a resource any request entered with slidegate.WithInbound,
// "outbound" for the rest (slidegate.ResourceStats.Inbound). The inbound
// instruments count the guard's inbound traffic as a whole, whatever its
// resources, without a resource attribute: a resource name is any string,
// and one called like the total would clash with it.
//
// slidegate.breaker.state is a state set: three data points per breaker
// rule, 1 for the state its breaker is in ("closed", "open",
// "half_open") and 0 for the other two, so that it adds up across
// instances (a sum over the value "open" counts the instances whose
// breaker is open). slidegate.rule.limit is each flow rule's Limit; shed
// and adaptive rules learn theirs, which slidegate.overload.limit tells
// (Guard.Overload: the most requests in flight the rule allows now;
// nothing for a shed rule that has not learnt the service's capacity).
// slidegate.rule.name is the rule's name as Rules.Named gives it, as a
// *slidegate.BlockError names it. The cluster instruments have data only
// for a guard whose cluster reports its health (a redisflow.Cluster).
//
// The names follow the semantic conventions' rule that a name does not
// coincide with a namespace: the rule's name is slidegate.rule.name, not
// slidegate.rule, which is the namespace of slidegate.rule.type and
// slidegate.rule.limit; the requests in flight are
// slidegate.in_flight_requests (as http.server.active_requests is), not
// slidegate.requests.in_flight, which would make slidegate.requests both
// an instrument and a namespace.
//
// # Response-time histograms
//
// The OpenTelemetry metric API (go.opentelemetry.io/otel/metric) has
// observable counters, up-down counters and gauges, and no observable
// histogram: a histogram records one measurement at a time, which would
// mean a call on every request's Exit. The guard already counts every
// response time since a resource began, in its bins; the Producer, an
// external producer of the SDK's readers (sdkmetric.WithProducer), hands
// them to the reader at collection time as one cumulative explicit-bucket
// histogram data point per resource. This is the only part of the package
// that uses the SDK's types (metricdata). The cost of the choice: the
// MeterProvider's views do not apply to the histograms, and they are
// cumulative whatever temporality the reader asks for (a delta exporter
// would need its own conversion).
//
// The buckets are DefaultBuckets (those the semantic conventions advise
// for http.server.request.duration, 5 ms to 10 s) or WithBuckets. The guard
// bins response times 8 to each power of two of nanoseconds (256 ns wide
// below 2.048 µs) and reports each bin as one response time within 4.43%
// (window.SketchError) of every one in it: a bin counts in the bucket of
// the lowest bound at or above that response time. So a bucket up to B
// counts every request up to B/1.0443 and none above B×1.0443. Response
// times of window.SketchRange (about 4 min 35 s) and more count in the last
// bucket, to +Inf. Count is Totals.Succeeded plus Totals.Failed, a batch
// (slidegate.WithCount) counting as its requests; Sum is Totals.RT in
// seconds. The bins and the sum are read one after the other, so a
// collection during traffic may count a request in one and not yet in the
// other. A histogram has no Min or Max: the guard keeps none since a
// resource began.
//
// # Bounds, resets and hostile names
//
// No instrument has a per-key attribute: keys (slidegate.WithKey) are
// unbounded. A resource's name is bounded by the guard: at most
// slidegate.MaxNameLength (256) bytes, and at most WithMaxResources
// (slidegate.DefaultMaxResources, 4096) resources besides those rules name,
// plus slidegate.OtherResource ("(other)"), under which the guard counts
// the traffic it has no room for. So a collection holds, per resource, at
// most 10 data points of slidegate.requests (17 with shadow rules; 3 while
// nothing is blocked), one of slidegate.in_flight_requests and one
// histogram; and 3 per breaker rule, and one per flow or overload rule,
// whatever the traffic.
//
// The SDK holds at most 2,000 data points per instrument in a collection
// unless told otherwise (sdkmetric.WithCardinalityLimit), and folds the
// rest into one series with the attribute otel.metric.overflow=true: with
// the default, slidegate.requests overflows from about 600 resources with
// traffic (fewer if many are blocked for several reasons). A guard that
// keeps more, up to WithMaxResources, wants a MeterProvider with a limit
// of 10 × (resources + 1) (17 × with shadow rules), or none (0), as a test
// shows. The Producer's histograms are not the MeterProvider's, and no
// limit applies to them.
//
// A name is what a caller entered (a path, a method), and OTLP carries
// attribute values as protobuf strings, which must be valid UTF-8: names
// are made valid UTF-8, each run of invalid bytes one U+FFFD, and
// resources whose names then read the same (and have the same direction)
// are added up into one series.
//
// The counters count since the guard began keeping the resource. A
// resource evicted for idleness comes back from zero: its counters then
// fall, which backends read as a reset, and the Producer gives its
// histogram a new StartTime when its count falls (a resource evicted and
// back with more requests than before between two collections is not told
// apart). The observable instruments' start times are the SDK's.
//
// # Beside resilience4j and Polly
//
// What the same things are called by resilience4j-micrometer (Micrometer
// meters of resilience4j, Java) and by Polly v8's telemetry (the meter
// "Polly", .NET); attributes here without their prefix slidegate.:
//
//	slidegate                                 resilience4j-micrometer                             Polly
//	requests{outcome=blocked,                 resilience4j.circuitbreaker.not.permitted.calls     resilience.polly.strategy.events
//	  reason=breaker_open|rate_limited...}      (a counter, breaker open)                           {event.name=OnRateLimiterRejected}
//	requests{outcome=succeeded|failed}        resilience4j.circuitbreaker.calls                   -
//	                                            {kind=successful|failed|ignored} (a timer)
//	requests{outcome=allowed}                 -                                                   -
//	breaker.state{breaker.state=...}          resilience4j.circuitbreaker.state                   resilience.polly.strategy.events
//	                                            {state=closed|open|half_open|forced_open|           {event.name=OnCircuitOpened|
//	                                            disabled}, 1 active and 0 not                       OnCircuitClosed|OnCircuitHalfOpened}
//	rule.limit                                resilience4j.bulkhead.max.allowed.concurrent.calls  -
//	                                            (a concurrency limit)
//	in_flight_requests                        - (resilience4j.ratelimiter.available.permissions   -
//	                                            and bulkhead.available.concurrent.calls
//	                                            say what is left)
//	request.duration (s)                      resilience4j.circuitbreaker.calls (the timer)       resilience.polly.pipeline.duration,
//	                                                                                                resilience.polly.strategy.attempt.duration (ms)
//
// resilience4j tags its meters with the protection's name (name=...),
// Polly with pipeline.name and strategy.name; here the attributes are the
// resource and its rule's name. resilience4j's breaker state is, like
// slidegate.breaker.state, one series per state; Polly counts the
// breaker's transitions as events and has no state. Polly records
// durations as they happen, in milliseconds; here every instrument is
// read from the guard's totals at collection time, and durations are in
// seconds, as the semantic conventions ask.
package otelguard
