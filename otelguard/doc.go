// Package otelguard exports a [slidegate.Guard]'s statistics, breakers and
// rules as OpenTelemetry metrics. It is the OpenTelemetry twin of package
// metrics, which exports the same to Prometheus. It is a module of its own,
// so that neither the guard nor a user of package metrics pulls in
// OpenTelemetry.
//
// [Register] the guard's instruments with a MeterProvider. Give the guard's
// [Producer] to the SDK's reader for the response-time histograms:
//
//	p, err := otelguard.NewProducer(g)
//	...
//	reader := sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithProducer(p))
//	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
//	reg, err := otelguard.Register(g, mp)
//	...
//	defer reg.Unregister()
//
// # Read at collection
//
// Every instrument is observable. One callback reads the guard for them
// all when a reader collects. The Producer reads the guard's response-time
// totals likewise. The guard counts all of it anyway, so this package adds
// nothing to the request path. [slidegate.Guard.Enter] and
// [slidegate.Entry.Exit] run no code of this package, and allocate nothing
// more. Nothing runs between
// collections, and no goroutine is started. A collection costs
// O(resources + rules) and allocates its data points. BENCHMARKS.md gives
// its cost.
//
// # Instruments
//
// All are made under the meter and scope [ScopeName]. Units are UCUM, as
// the semantic conventions write them. The attributes are named by the Key
// constants ([ResourceKey] ...).
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
//	slidegate.overload.cap                gauge (observable)         {request}   slidegate.resource, slidegate.rule.name, slidegate.rule.type
//	slidegate.cluster.healthy             gauge (observable)         1           -
//	slidegate.cluster.failures            counter (observable)       {call}      -
//	slidegate.cluster.fallbacks           counter (observable)       {decision}  -
//
// slidegate.requests counts since the guard began keeping a resource's
// statistics ([slidegate.Totals]). It has one series per outcome:
//   - "allowed": the requests let in.
//   - "blocked": the requests blocked, one series per reason.
//   - "would_block": the requests a shadow rule would have blocked.
//   - "succeeded": the allowed requests that exited without an error.
//   - "failed": the allowed requests that exited with an error.
//
// The reasons are "rate_limited", "concurrency_limited", "exceeds_limit",
// "wait_too_long", "ref_limited", "breaker_open" and "overloaded". A shadow
// rule lets through the requests it would have blocked
// ([slidegate.FlowRule].Shadow, [slidegate.BreakerRule].Shadow,
// [slidegate.Rules].Shadow). Its would_block series are by the reason it
// would have blocked them for.
//
// Allowed, succeeded and failed are there from the resource's first
// request, zeros included. A blocked or would_block series appears with the
// first request blocked, or that would have been, for its reason. The
// outcomes overlap: would_block, succeeded and failed are among allowed.
// So select an outcome rather than add them all up. Allowed plus blocked
// is every request.
//
// slidegate.direction is "inbound" for a resource any request entered with
// [slidegate.WithInbound], and "outbound" for the rest
// ([slidegate.ResourceStats].Inbound). The inbound instruments count the
// guard's inbound traffic as a whole, whatever its resources. They have no
// resource attribute: a resource name is any string, and one called like
// the total would clash with it.
//
// slidegate.breaker.state is a state set. It has three data points per
// breaker rule: 1 for the state its breaker is in ("closed", "open",
// "half_open") and 0 for the other two. So it adds up across instances: a
// sum over the value "open" counts the instances whose breaker is open.
//
// slidegate.rule.limit is each flow rule's Limit. Shed and adaptive rules
// learn theirs, which slidegate.overload.limit tells ([slidegate.Guard.Overload]).
// A shed rule that has not learnt the service's capacity has no data point.
// slidegate.overload.cap is the most requests in flight the rule admits
// now. A shed rule caps nothing while the CPU is cool, and has no data
// point then.
// slidegate.rule.name is the rule's name as [slidegate.Rules.Named] gives
// it, as a [*slidegate.BlockError] names it. The cluster instruments have
// data only for a guard whose cluster reports its health (a
// redisflow.Cluster).
//
// # Response-time histograms
//
// The OpenTelemetry metric API has no observable histogram. The Producer,
// an external producer of the SDK's readers, gives the reader the guard's
// response times at collection time. It hands over one cumulative
// explicit-bucket histogram data point per resource. It is the only part
// of the package that uses the SDK's types (metricdata). The
// MeterProvider's views do not apply to these histograms. They are
// cumulative whatever temporality the reader asks for: a delta exporter
// needs its own conversion.
//
// The buckets are [WithBuckets]'s. The guard bins
// response times, and reports each bin as one response time within 4.43%
// of every one in it. A bin counts in the bucket of
// the lowest bound at or above that response time. So a bucket up to B
// counts every request up to B/1.0443, and none above B×1.0443. Response
// times of 2^38 ns (about 4 min 35 s) and more count in the
// last bucket, to +Inf.
//
// Count is Totals.Succeeded plus Totals.Failed. A batch
// ([slidegate.WithCount]) counts as its requests. Sum is Totals.RT in
// seconds. The bins and the sum are read one after the other. So a
// collection during traffic may count a request in one and not yet in the
// other. A histogram has no Min or Max: the guard keeps none since a
// resource began.
//
// # Bounds, resets and hostile names
//
// No instrument has a per-key attribute: keys ([slidegate.WithKey]) are
// unbounded. The guard bounds the resources' names and their number. A
// name has at most 256 bytes. There are at
// most [slidegate.WithMaxResources] resources
// (4096 by default) besides those rules name.
// [slidegate.OtherResource] ("(other)") counts the traffic the guard has
// no room for.
//
// So, whatever the traffic, a collection holds at most:
//   - 10 data points of slidegate.requests per resource.
//   - 17 of them per resource with shadow rules, and 3 while none is blocked.
//   - one of slidegate.in_flight_requests and one histogram per resource.
//   - 3 per breaker rule, and one per flow or overload rule.
//
// The SDK holds at most 2,000 data points per instrument in a collection,
// unless told otherwise (sdkmetric.WithCardinalityLimit). It folds the rest
// into one series with the attribute otel.metric.overflow=true. With the
// default, slidegate.requests overflows from about 600 resources with
// traffic (fewer if many are blocked for several reasons). A guard that
// keeps more, up to [slidegate.WithMaxResources], wants a MeterProvider
// with a limit of 10 × (resources + 1), 17 × with shadow rules, or no
// limit (0). No limit applies to the Producer's histograms, which are not the
// MeterProvider's.
//
// A process with several guards that share a MeterProvider registers each
// with attributes of its own ([WithAttributes]). Otherwise two guards'
// resources of the same name would be one series observed twice. Each
// guard has its Producer, all given to the reader. Their histograms come as
// one scope each, of the same name.
//
// A name is what a caller entered (a path, a method). OTLP carries
// attribute values as protobuf strings, which must be valid UTF-8. So names
// are made valid UTF-8, each run of invalid bytes one U+FFFD. Resources
// whose names then read the same, with the same direction, are added up
// into one series.
//
// The counters count since the guard began keeping the resource. A
// resource evicted for idleness comes back from zero. Its counters then
// fall, which backends read as a reset. The Producer gives its histogram a
// new StartTime when its count falls. A resource evicted and back with more
// requests than before between two collections is not told apart. The
// observable instruments' start times are the SDK's.
//
// The notes in docs/otelguard.md say why the names and the histograms are
// made as they are, and how the names compare with resilience4j's and
// Polly's.
package otelguard
