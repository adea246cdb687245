package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/breaker"
)

// collectBreakers sends the state and the block ratio of every breaker.
func (c *Collector) collectBreakers(ch chan<- prometheus.Metric, bs []slidegate.BreakerStatus) {
	for _, b := range bs {
		labels := []string{labelValue(b.Resource), b.Rule, string(b.Strategy)}
		constMetric(ch, c.breakerState, prometheus.GaugeValue, stateValue(b.State), labels...)
		constMetric(ch, c.breakerBlockRatio, prometheus.GaugeValue, b.BlockRatio, labels...)
	}
}

// stateValue is the value of breaker_state for s, as its help says. The
// values are spelt out rather than taken from breaker.State's numbering,
// which is the breaker package's to change; a state this package does not
// know is -1.
func stateValue(s breaker.State) float64 {
	switch s {
	case breaker.Closed:
		return 0
	case breaker.Open:
		return 1
	case breaker.HalfOpen:
		return 2
	}
	return -1
}

// collectRules sends the limit of every flow rule and the threshold of every
// breaker rule that has one. A shed rule has no limit, and an adaptive
// rule's Limit is only where it starts: their limits now are in the
// overload families, and a flow_rule_limit of 0 would read as a rule that
// blocks everything.
func (c *Collector) collectRules(ch chan<- prometheus.Metric, rules slidegate.Rules) {
	for i, f := range rules.Flow {
		typ := f.Type
		switch typ {
		case "":
			typ = slidegate.QPSRule
		case slidegate.ShedRule, slidegate.AdaptiveRule:
			continue
		}
		constMetric(ch, c.flowRuleLimit, prometheus.GaugeValue, float64(f.Limit),
			labelValue(f.Resource), place("flow", i), string(typ))
	}
	for i, b := range rules.Breakers {
		var threshold float64
		switch b.Strategy {
		case slidegate.ErrorRatioBreaker, slidegate.SlowRatioBreaker:
			threshold = b.Threshold
		case slidegate.ErrorCountBreaker, slidegate.ConsecutiveFailuresBreaker:
			threshold = float64(b.Count)
		default: // adaptive: it follows the failures and trips at no threshold
			continue
		}
		constMetric(ch, c.breakerRuleThreshold, prometheus.GaugeValue, threshold,
			labelValue(b.Resource), place("breakers", i), string(b.Strategy))
	}
}

// place names the i-th rule of a list as the guard does ("flow[2]").
func place(list string, i int) string {
	return list + "[" + strconv.Itoa(i) + "]"
}
