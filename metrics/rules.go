package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/internal/exported"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// collectBreakers sends the state and the block ratio of every breaker.
func (c *Collector) collectBreakers(ch chan<- prometheus.Metric, bs []slidegate.BreakerStatus) {
	var names exported.RuleNames
	for _, b := range bs {
		res := exported.Value(b.Resource)
		labels := []string{res, names.Of(res, b.Rule), string(b.Strategy)}
		withState := append(slices.Clip(labels), "")
		for _, st := range breakerStates {
			withState[len(labels)] = st.label
			constMetric(ch, c.breakerState, prometheus.GaugeValue, flag(b.State == st.state), withState...)
		}
		constMetric(ch, c.breakerBlockRatio, prometheus.GaugeValue, b.BlockRatio, labels...)
	}
}

// breakerStates gives each breaker state its value of the label state of
// breaker_state. The values are part of the metrics' contract, so they are
// spelt here once, in snake_case as the reasons are, and not taken from
// breaker.State.String ("half-open"), which is the breaker package's to
// reword.
//
// breaker_state is a state set, as Prometheus conventions model an enum:
// one series per state, 1 for the state the breaker is in and 0 for the
// others. Unlike one number per state, it adds up across instances:
// max by (resource, rule) (breaker_state{state="open"}) is 1 while any
// instance's breaker is open, and sum counts them. A state this package
// does not know sets every series to 0.
var breakerStates = [...]struct {
	state breaker.State
	label string
}{
	{breaker.Closed, "closed"},
	{breaker.Open, "open"},
	{breaker.HalfOpen, "half_open"},
}

// collectRules sends the limit of every flow rule and the threshold of every
// breaker rule that has one. A shed rule has no limit, and an adaptive
// rule's Limit is only where it starts: their limits now are in the
// overload families, and a flow_rule_limit of 0 would read as a rule that
// blocks everything.
func (c *Collector) collectRules(ch chan<- prometheus.Metric, rules slidegate.Rules) {
	rules = rules.Named()
	var names exported.RuleNames
	for _, f := range rules.Flow {
		if rulekind.Of(string(f.Type)).Learnt {
			continue
		}
		res := exported.Value(f.Resource)
		constMetric(ch, c.flowRuleLimit, prometheus.GaugeValue, float64(f.Limit), res, names.Of(res, f.Name), string(f.Type)) // Named wrote the type out
	}
	for _, b := range rules.Breakers {
		var threshold float64
		switch b.Strategy {
		case slidegate.ErrorRatioBreaker, slidegate.SlowRatioBreaker:
			threshold = b.Threshold
		case slidegate.ErrorCountBreaker, slidegate.ConsecutiveFailuresBreaker:
			threshold = float64(b.Count)
		default: // sre: it follows the failures and trips at no threshold
			continue
		}
		res := exported.Value(b.Resource)
		constMetric(ch, c.breakerRuleThreshold, prometheus.GaugeValue, threshold, res, names.Of(res, b.Name), string(b.Strategy))
	}
}
