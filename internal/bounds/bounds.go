// Package bounds holds the guard's bounds on what its input can make, for
// the guard and the packages beside it (the middleware, the exporters, the
// dashboard, redisflow). Users never pass them; the guard's docs and
// docs/ARCHITECTURE.md ("What is bounded") state their values.
package bounds

const (
	// MaxNameLength is the longest resource name, in bytes, that a guard
	// keeps statistics under. Rules naming a longer one are invalid; a
	// request entered under one is counted as slidegate.OtherResource.
	// Names are label values in metrics and rows in the dashboard, and a
	// name built from a client's input could be as long as a header: the
	// bound keeps what a resource costs near slidegate.ResourceBytes.
	MaxNameLength = 256
	// MaxKeyLength is the longest key (slidegate.WithKey) the guard tells
	// apart: what it hashes, keeps and shows of a key is bounded by it.
	MaxKeyLength = 256
	// MaxRuleNameLength is the longest rule name, in bytes: a name is a
	// label value in the metrics and a cell in the dashboard.
	MaxRuleNameLength = 64
	// MaxOverrides is the most keys a per-key rule lists in its Overrides.
	MaxOverrides = 10000
	// MaxClusterBuckets is the most buckets a cluster rule divides its
	// interval into: a cluster reads them at every decision.
	MaxClusterBuckets = 1000
	// DefaultMaxResources is how many resources a guard keeps statistics
	// for unless slidegate.WithMaxResources says otherwise.
	DefaultMaxResources = 4096
	// EventQueue is how many events a listener (Guard.OnEvent) or the log
	// may fall behind before the oldest it has not been told are dropped.
	EventQueue = 256
	// KeptEvents is how many of the latest events Guard.Events returns.
	KeptEvents = 128
	// MaxEventChanges is how many rule changes an event lists
	// (Event.Changes): a reload of thousands of rules makes an event, a
	// log line and a dashboard row of bounded size.
	MaxEventChanges = 64
)
