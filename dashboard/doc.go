// Package dashboard is a live web dashboard for a slidegate.Guard, served by
// the service it watches: an http.Handler with its page, scripts and styles
// embedded, so there is no separate server to run and nothing is loaded from a
// CDN. The page works offline and under any path prefix.
//
// Mount it beside the service's guarded handlers, not behind the guard:
//
//	d, err := dashboard.New(g) // g is the service's *slidegate.Guard; nil: slidegate.Default()
//	defer d.Close()
//	root := http.NewServeMux()
//	root.Handle("/", httpguard.Middleware(g)(mux)) // the service's routes
//	root.Handle("/slidegate/", http.StripPrefix("/slidegate", d))
//
// and open /slidegate/ in a browser. Behind the guard's middleware, its
// page and API would count as the service's traffic. Its event streams
// would each be a request in flight for a minute; so a stream there ends
// its entry in the guard as it starts (see httpguard.Middleware). The page lists every resource the guard
// keeps statistics for, with its requests allowed, blocked and failed per
// second (and, tagged "would block", those that rules in shadow would have
// blocked and let through), its requests in flight, its P50 and P99 response times and the
// state of its breakers; the shed and adaptive rules with the limits they
// have learnt, their requests in flight and the CPU they read; the retry
// budgets given by WithRetryBudget, with their requests and retries; for each resource with per-key rules
// (slidegate.FlowRule.PerKey), its busiest keys and its most blocked ones; a
// chart per resource over the last minutes; the guard's events
// (slidegate.Event: breakers changing state, rules put in force, refused or
// unused, the cluster's health changing, the resource table full), newest first,
// those that tell of trouble in the warning colour; the health of the
// guard's cluster, if it has one (slidegate.WithCluster); and the rules in
// force, each by its name (slidegate.Rules.Named), which it can also edit
// if WithRuleEditing allows it, each rule in shadow tagged "shadow".
//
// A sampler goroutine reads the guard every second (WithInterval) and keeps
// the last 300 samples of each resource (WithHistory). The rates are exact:
// differences of the guard's totals (slidegate.Totals) between two samples,
// divided by the time between them. Memory is bounded by the history, by the
// guard's own bound on resources (slidegate.WithMaxResources) and not by the
// clients (see below): a resource the guard no longer keeps is dropped from
// the dashboard too.
//
// The handler serves, relative to where it is mounted:
//
//	GET /                           the page
//	GET /assets/...                 its scripts and styles, and the vendored uPlot
//	GET /api/snapshot               every resource with its newest history, its current statistics, the breakers, the overload rules, the retry budgets and the rules, as JSON
//	GET /api/history?resource=NAME  one resource with its whole history, as JSON (404 if the dashboard keeps none of that name)
//	GET /api/events                 the same as Server-Sent Events: a "snapshot" event, then a "sample" event per sample, for at most a minute
//	GET /api/rules                  the rules in force, as JSON
//	PUT /api/rules                  new rules, with WithRuleEditing's token (405 without the option)
//
// In the JSON, times are Unix seconds, durations seconds, rates requests per
// second, and names are written as slidegate.Rules writes them. A snapshot is
//
//	{"seq": 42, "time": 1763800000.123, "interval": 1, "history": 300, "top_keys": 10, "editing": false,
//	 "inbound":   {"name": "inbound", "stats": {...}, "history": {...}},
//	 "resources": [{"name": "GET /orders", "breaker": "closed",
//	                "stats":   {"allowed": 950, "blocked": 12, "succeeded": 940, "failed": 10,
//	                            "avg_rt": 0.012, "p50": 0.01, "p90": 0.02, "p99": 0.05, "max_rt": 0.2,
//	                            "in_flight": 3, "totals": {"allowed": ..., "blocked": ..., "succeeded": ..., "failed": ..., "rt": ..., "would_block": ...}},
//	                "history": {"t": [...], "allowed_rate": [...], "blocked_rate": [...], "failed_rate": [...],
//	                            "in_flight": [...], "p50": [...], "p99": [...], "breaker": [...], "would_block_rate": [...]},
//	                "keys":    {"interval": 1, "top": [{"key": "user-42", "allowed": 20, "blocked": 80}, ...]}}],
//	 "breakers":  [{"resource": "GET /orders", "rule": "breaker", "strategy": "error_ratio", "state": "closed",
//	                "block_ratio": 0, "requests": 950, "succeeded": 940, "failed": 10, "slow": 0,
//	                "blocked": 0, "probes_in_flight": 0, "retry_after": 0}],
//	 "overload":  [{"resource": "(inbound)", "rule": "shed", "type": "shed", "limit": 96, "learnt": 48, "in_flight": 12,
//	                "shedding": false, "cpu": 0.62, "baseline": 0},
//	               {"resource": "GET /orders", "rule": "adaptive", "type": "adaptive", "limit": 120, "learnt": 120, "in_flight": 30,
//	                "shedding": false, "cpu": -1, "baseline": 0.008}],
//	 "retries":   [{"budget": "orders", "requests": 950, "retries": 40, "blocked": 12, "not_retried": 3}],
//	 "rules":     {"flow": [{"name": "shed", ...}, ...], "breakers": [{"name": "breaker", ...}]},
//	 "events":    [{"seq": 7, "time": 1763799990.5, "kind": "breaker_changed", "warn": true,
//	                "text": "breaker \"breaker\" of \"GET /orders\": closed → open (tripped: ...)"}],
//	 "dropped_events": 0,
//	 "cluster":   {"state": "healthy", "failures": 2, "fallbacks": 40}}
//
// A rule is named by its name (slidegate.Rules.Named: its own, or its
// type's, "qps", "qps_2", "breaker"), unique among its resource's rules:
// the breakers and the overload rules say which rule they are by their
// resource and rule, and the rules are sent with every name written out
// (so is the body of PUT api/rules' 200).
// events are the guard's latest events (slidegate.Guard.Events), oldest
// first, at most slidegate.KeptEvents (128), numbered by the guard (seq):
// kind is a slidegate.EventKind, text the event's description
// (slidegate.Event.String) on one line, cut to 512 bytes, and warn marks a
// breaker that opened, rules refused or unused, the cluster unhealthy and
// the resource table full. The dashboard reads the guard's events each sample;
// events beyond the latest 128 between two samples are not seen, and their
// seq is missing. dropped_events is slidegate.Guard.DroppedEvents: the
// events the guard's listeners fell too far behind to be told. cluster is
// there only for a guard with a cluster that reports its health
// (slidegate.Guard.ClusterHealth): state is "healthy", "unhealthy" (the
// cluster rules' limiters use their fallback) or "misconfigured" (an error
// that retrying will not fix, in error, on one line, cut to 512 bytes),
// with the calls to the cluster that failed and the decisions the fallback
// made.
//
// where stats are the guard's slidegate.ResourceStats (the last 10 seconds,
// and the totals): the requests allowed and blocked, and of the allowed ones
// those that succeeded and failed (ended with an error); history the
// samples, oldest first, one array per field, each rate the requests
// allowed, blocked and failed per second since the sample before, and
// would_block_rate those that rules in shadow (slidegate.FlowRule.Shadow,
// BreakerRule.Shadow, Rules.Shadow) would have blocked and let through, per
// second (among allowed_rate; to 7 significant digits, as a point keeps
// it), and totals.would_block their number since the resource's
// statistics began (slidegate.Totals.WouldBlock); the rules say which are
// in shadow ("shadow": true on a rule, or on all of them); and
// breaker the worst state of the resource's breakers ("closed",
// "half-open", "open"; absent without one). A breaker's counts are of its
// interval: the requests it counted an outcome of, those that succeeded,
// failed and were slow, and those it blocked; block_ratio is the share of
// requests it blocks now, 0 to 1. overload is the shed and adaptive rules
// in force (slidegate.Guard.Overload), in rule order, one entry per rule,
// so the rules bound it, not the traffic: limit is the most requests in
// flight the rule allows now (slidegate.OverloadStatus.Cap: an adaptive
// rule's limit; a shed rule's learnt bound while it sheds, twice it while
// the CPU is warm or unread, -1 while the CPU is cool or nothing is learnt
// yet, and the rule allows everything), learnt what the rule has learnt
// (OverloadStatus.Limit: a shed rule's bound, -1 until it has one; an
// adaptive rule's limit), in_flight the requests it allowed that have not
// ended, shedding whether a shed rule sheds now, cpu the CPU usage a shed
// rule read, 0 to 1 (-1: none, for an adaptive rule, a shed rule without a
// CPU signal, or a reading that is not a number), and baseline an adaptive
// rule's least response time (0 until it has one); the resource
// "(inbound)" is slidegate.InboundResource, a rule for all the inbound
// traffic. retries is the retry budgets of WithRetryBudget, in the order
// given ([] without any), each read on its own clock
// (flow.RetryBudget.Stats): requests and retries are the original requests
// and the retries it allowed in its interval, blocked the retries it has
// blocked for want of budget and not_retried the failed attempts it has not
// retried (a breaker's probe, or one that met an open breaker), both since
// it was made. keys is there for a resource with a per-key
// QPS rule of its own (not a cluster's): the top_keys keys (WithTopKeys)
// with the most requests allowed and those with the most blocked, together,
// busiest first, as the guard tracks them (Guard.TopKeys: only keys over
// half their limit); for each, the requests allowed in the last interval of
// the resource's first per-key rule (interval, in seconds) and those the
// per-key rules blocked in that interval and the one before. A key is any
// text a client sent, cut to 64 bytes, its invalid UTF-8 replaced by
// U+FFFD; keys that then read the same are added up. The page shows keys as
// text, never as markup. The keys of at most 16 resources are sent, those
// with the most requests blocked in the last 10 seconds. A snapshot carries at most
// WithSnapshotPoints points of history in all: when the resources have more,
// each one's history is its newest points only, and the resource has
// "partial": true; api/history then serves it whole, as
//
//	{"seq": 42, "name": "GET /orders", "breaker": "closed", "stats": {...}, "history": {...}}
//
// The inbound traffic's history is always whole. A "sample" event is
//
//	{"seq": 43, "time": ..., "inbound": {...}, "resources": [...], "breakers": [...], "overload": [...], "retries": [...], "rules": {...},
//	 "events": [...], "dropped_events": 0, "cluster": {...}}
//
// with, for each resource the guard keeps, its stats and its new point
// ({"t": ..., "allowed_rate": ..., "blocked_rate": ..., "failed_rate": ...,
// "in_flight": ..., "p50": ..., "p99": ..., "breaker": ..., "would_block_rate": ...}) instead of its
// history, and its keys as of the sample; a resource missing from it is gone. The rules are there only when
// they changed, and events only when the sample saw new ones: those, oldest
// first (a client that has one already, by its seq, leaves it).
//
// # What clients can make it hold
//
// Whatever is sent is encoded once and shared: a sample's event when the
// sample is taken (and only while a stream is served, or was in the last
// 10 seconds), a snapshot when a client first asks for one after a sample. Every client writes the same
// bytes, holds one encoded event at a time and no lock while it writes, and
// must take each write within 5 seconds, or it is dropped and lets go of
// what it held. A new stream starts from the latest snapshot and the events
// since, which the dashboard keeps for the last 8 samples; so does a stream
// that falls behind, or from a new snapshot if it fell further. So, with R
// resources (at most the guard's bound, slidegate.WithMaxResources, and
// OtherResource), H points of history each (WithHistory) and P points in a
// snapshot (WithSnapshotPoints), the dashboard holds at most
//
//	R·H·64 bytes               the history
//	+ (1+k)·S + (8+k)·E        the latest snapshot and the last 8 events, and k older
//	                           ones that clients are still writing
//
// where k is the number of samples taken within a write timeout (6 at the
// default interval) and at most the number of clients writing; S is a
// snapshot's size, about R·0.4 KiB of names and statistics and min(P, R·H)
// points of 30 to 140 bytes each; and E is an event's size, about R·0.4 KiB.
// A resource whose name is long, and escaped in JSON, adds up to 1.5 KiB to
// both. The top keys add to both at most 16·2·T keys (T of WithTopKeys) of
// at most 0.45 KiB each, a key of 64 bytes escaped in JSON at 6 bytes a
// byte, and some 60 bytes each for keys like "user-42": at most 140 KiB, and
// some 20 KiB, with the default T of 10, however many keys the clients
// send (measured: a flood of hostile keys on 20 resources adds 54 KiB). The
// overload rules add to both some 120 bytes per shed or adaptive rule in
// force, and its resource's name, whatever the traffic; the retry budgets
// some 80 bytes each and their names: at most MaxRetryBudgets (100) budgets
// of names of at most slidegate.MaxNameLength (256) bytes, at most some
// 160 KiB if every name is escaped at 6 bytes a byte, and a few KiB for
// names like "orders". The guard's events add at most 128 of at most 512
// bytes of text each: at most some 400 KiB if every byte is escaped at 6
// bytes, and some 20 KiB for events like a breaker opening (measured: 128
// events of rule sets of 1,000 problems on names of 256 bytes made a
// sample of 121 KiB). With the
// guard's default 4,096 resources and the default options, that is 75 MiB
// of history, S ≈ 3 MiB and E ≈ 1.6 MiB: about 120 MiB in all, whatever
// the number of clients. Beyond it, a stream costs only its
// connection, goroutine and timer, a few KiB; the dashboard serves at most
// WithMaxStreams streams at once and answers any more with 503. A stream
// lasts at most a minute (WithMaxStreamAge), and its client then comes back
// and goes on from the last event it got (Last-Event-ID): so a client that
// reads nothing holds a slot no longer than that and a write timeout,
// however long its connection's buffers take to fill. An api/history
// response costs one resource's history, H points, while it is written.
// Time is bounded likewise: at most one snapshot and one event are encoded
// per sample (some 30 ms and 50 ms with 4,096 resources), whatever the
// clients ask. Reading a resource's top keys costs a sample up to some 2 ms
// when its rules track as many keys as they can (4,096;
// BenchmarkSampleTopKeys), so at most some 35 ms for the 16 resources.
//
// The dashboard reads the guard only through its exported API (ResourcesAt,
// BreakersAt, OverloadAt, InboundStatsAt, StatsAt, Rules, SetRules, TopKeys,
// Events, DroppedEvents, ClusterHealth), each sample
// at one reading of the guard's clock (Guard.Clock), but for TopKeys, which
// reads the clock itself, and the retry budgets (package flow), each read
// on its own clock; it sits above the root package and below nothing.
package dashboard
