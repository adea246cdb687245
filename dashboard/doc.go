// Package dashboard is a live web dashboard for a [slidegate.Guard],
// served by the service it watches. It is an [http.Handler] with its page,
// scripts and styles embedded: there is no separate server to run, and
// nothing is loaded from a CDN. The page works offline and under any path
// prefix.
//
// Mount it beside the service's guarded handlers, not behind the guard:
//
//	d, err := dashboard.New(g) // g is the service's *slidegate.Guard; nil: slidegate.Default()
//	defer d.Close()
//	root := http.NewServeMux()
//	root.Handle("/", httpguard.Middleware(g)(mux)) // the service's routes
//	root.Handle("/slidegate/", http.StripPrefix("/slidegate", d))
//
// Behind the guard's middleware, its page and API would count as the
// service's traffic. An event stream would be a request in flight for a
// minute, so a stream there ends its entry in the guard as it starts.
//
// Then open /slidegate/ in a browser. The page shows these.
//
//   - Every resource the guard keeps statistics for. It shows requests
//     allowed, blocked and failed per second, and those that rules in
//     shadow would have blocked. It shows requests in flight, P50 and P99
//     response times, and the state of the resource's breakers.
//   - The shed and adaptive rules, with their limits, requests in flight
//     and the CPU they read.
//   - The retry budgets given by [WithRetryBudget].
//   - The busiest and most blocked keys of each resource with per-key
//     rules.
//   - A chart per resource over the last minutes.
//   - The guard's events, newest first, trouble in the warning colour:
//     breakers changing state, rules put in force, refused or unused.
//   - The health of the guard's cluster, if it has one.
//   - The rules in force, by name, editable if [WithRuleEditing] allows.
//
// A sampler goroutine reads the guard every second ([WithInterval]). It
// keeps the last 300 samples of each resource ([WithHistory]). The rates
// are exact: differences of the guard's totals between two samples,
// divided by the time between them. A resource the guard no longer keeps
// is dropped from the dashboard too.
//
// The handler serves, relative to where it is mounted:
//
//	GET /                           the page
//	GET /assets/...                 its scripts and styles
//	GET /api/snapshot               the whole state as JSON
//	GET /api/history?resource=NAME  one resource with its whole history
//	GET /api/events                 Server-Sent Events: a snapshot, then a sample each interval
//	GET /api/rules                  the rules in force
//	PUT /api/rules                  new rules, with WithRuleEditing's token
//
// The JSON of each, and what clients can make the dashboard hold, are in
// docs/dashboard.md in the repository. Memory is bounded by the history and
// by the guard's own bound on resources, never by the clients. Every
// client is sent the same bytes, encoded once per sample. The dashboard
// serves at most [WithMaxStreams] streams at once, and answers more with
// 503. A stream lasts at most [WithMaxStreamAge], then its client comes
// back and goes on from its last event. So a client that reads nothing
// holds a slot no longer than that, plus a write timeout.
//
// The dashboard reads the guard only through its exported API. It reads
// the guard's clock ([slidegate.Guard.Clock]) once per sample, and the
// sampler sleeps on it, so a clock.Manual given to the guard drives it.
package dashboard
