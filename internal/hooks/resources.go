package hooks

import (
	"time"

	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/window"
)

// Totals are a resource's counts since its statistics began. They are
// slidegate.Totals field for field, so that each converts to the other.
type Totals struct {
	Allowed, Succeeded, Failed int64
	BlockedBy                  [flowlimits.NumReasons]int64
	WouldBlockBy               [flowlimits.NumReasons]int64
	RT                         time.Duration
}

// A Resource is what an exporter reads of one resource in a collection:
// what only grows, not the last seconds' counts or quantiles.
type Resource struct {
	Name     string
	Inbound  bool
	InFlight int64
	Totals   Totals
	// Latency holds its response times: Latency.TotalsInto reads those
	// since its statistics began.
	Latency *window.Sketch
}

// Resources calls f with each resource g, a *slidegate.Guard, keeps, and
// with slidegate.OtherResource once it has counted anything: the
// resources slidegate.Guard.Resources returns, in no order. *r is reused
// from one call to the next. It reads each resource once, and no window
// of the last seconds: the exporters of totals (otelguard) read every
// resource at each collection without the quantiles they do not send.
var Resources func(g any, f func(r *Resource))

// Keys returns the keys of the resource called name that
// slidegate.Guard.TopKeys chooses from, at its clock's time, in no order;
// nil for a resource without local per-key QPS rules. A reader that adds
// keys up further before it chooses the busiest (the Prometheus
// collector) so sorts none.
var Keys func(g any, name string) []flowstate.KeyStat
