package metrics

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/exported"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// overload is the descriptors of the families of the shed and adaptive
// rules (Guard.Overload): what each has learnt, one series per rule in
// force, so that the rules bound them, not the traffic.
type overload struct {
	limit, capacity, inFlight, shedding *prometheus.Desc
	baseline, cpu                       *prometheus.Desc
}

func newOverload(desc func(name, help string, labels ...string) *prometheus.Desc) overload {
	return overload{
		limit: desc("overload_limit",
			"Most requests in flight a shed or adaptive rule in force allows now: an adaptive rule's limit, or what a shed rule allows while it sheds, the service's capacity by Little's law (no series until it has learnt it).",
			"resource", "rule", "type"),
		capacity: desc("overload_cap",
			"Most requests in flight a shed or adaptive rule in force admits now, before it refuses: an adaptive rule's limit, or the cap a shed rule applies at the CPU it reads (no series while it caps nothing).",
			"resource", "rule", "type"),
		inFlight: desc("overload_in_flight",
			"Requests a shed or adaptive rule in force allowed and that have not ended.",
			"resource", "rule", "type"),
		shedding: desc("overload_shedding",
			"1 while a shed rule in force sheds (the CPU at or above its threshold, or within a second of shedding; never without a CPU signal), 0 otherwise.",
			"resource", "rule", "type"),
		baseline: desc("overload_baseline_seconds",
			"Least response time an adaptive rule in force has seen, by which it judges whether requests queue (no series until it has one).",
			"resource", "rule", "type"),
		cpu: desc("cpu_usage_ratio",
			"Share of its CPU capacity the process uses, 0 to 1, as the guard's shed rules read it (slidegate.WithCPU); there only while a shed rule reads it."),
	}
}

func (o *overload) describe(ch chan<- *prometheus.Desc) {
	ch <- o.limit
	ch <- o.capacity
	ch <- o.inFlight
	ch <- o.shedding
	ch <- o.baseline
	ch <- o.cpu
}

// collect sends the state of every shed and adaptive rule, and the CPU
// once, as the first shed rule that reads it read it. No two series share
// their labels, whatever the resources are called (ruleLabels).
func (o *overload) collect(ch chan<- prometheus.Metric, rules []slidegate.OverloadStatus) {
	cpuSent := false
	var names exported.RuleNames
	for _, r := range rules {
		res := exported.Value(r.Resource)
		labels := []string{res, names.Of(res, r.Rule), string(r.Type)}
		// A limit of -1 is a shed rule that has not learnt the service's
		// capacity: it allows everything, and a series of -1 would drag
		// every min() and graph of the family down.
		if r.Limit >= 0 {
			constMetric(ch, o.limit, prometheus.GaugeValue, float64(r.Limit), labels...)
		}
		if r.Cap >= 0 { // -1: it caps nothing now
			constMetric(ch, o.capacity, prometheus.GaugeValue, float64(r.Cap), labels...)
		}
		constMetric(ch, o.inFlight, prometheus.GaugeValue, float64(r.InFlight), labels...)
		kind := rulekind.Of(string(r.Type))
		if kind.Sheds {
			constMetric(ch, o.shedding, prometheus.GaugeValue, flag(r.Shedding), labels...)
			// A shed rule without a CPU signal reads none (-1). A
			// reading out of [0, 1] is the guard's WithCPU at fault, and
			// is sent as it is, NaN too, for the scrape to show it.
			if !cpuSent && (r.CPU >= 0 || math.IsNaN(r.CPU)) {
				constMetric(ch, o.cpu, prometheus.GaugeValue, r.CPU)
				cpuSent = true
			}
		}
		if kind.Baseline && r.Baseline > 0 {
			constMetric(ch, o.baseline, prometheus.GaugeValue, r.Baseline.Seconds(), labels...)
		}
	}
}
