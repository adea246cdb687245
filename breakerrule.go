package slidegate

import (
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/internal/breakerlimits"
)

// A BreakerStrategy is what opens a breaker (BreakerRule.Strategy).
type BreakerStrategy string

// The strategies of a breaker.
const (
	SREBreaker        BreakerStrategy = "sre"         // the Google SRE client-side throttle: breaker.SRE
	ErrorRatioBreaker BreakerStrategy = "error_ratio" // breaker.ErrorRatio(Threshold)
	ErrorCountBreaker BreakerStrategy = "error_count" // breaker.ErrorCount(Count)
	SlowRatioBreaker  BreakerStrategy = "slow_ratio"  // breaker.SlowRatio(MaxRT, Threshold)
	// ConsecutiveFailuresBreaker opens after Count failures in a row in the
	// window: breaker.ConsecutiveFailures(Count).
	ConsecutiveFailuresBreaker BreakerStrategy = "consecutive_failures"
)

// A BreakerRule puts a circuit breaker (package breaker) in front of a
// resource. A request that ends with an error (Entry.Exit with a non-nil
// error) is a failure.
//
// A reload that keeps the rule keeps its breaker, with its state and
// counts, whatever its Name and Shadow. So does a reload that changes
// only a circuit's thresholds: Threshold, Count, MaxRT, MinRequests,
// OpenTimeout, MaxOpenTimeout, Probes and ProbeTimeout. The circuit
// judges its next failure by the new ones, over the counts it holds. An
// open circuit stays open until the time set when it opened. A half-open
// one keeps its probes; its next half-open spell has the new number. Any
// other change makes a new breaker: a strategy, a window, an SRE
// breaker's fields.
type BreakerRule struct {
	// Resource is the name of the resource the breaker protects.
	Resource string `json:"resource" yaml:"resource"`
	// Name names the rule as FlowRule.Name does; unset, "breaker".
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// Strategy is one of SREBreaker, ErrorRatioBreaker,
	// ErrorCountBreaker, SlowRatioBreaker, ConsecutiveFailuresBreaker.
	Strategy BreakerStrategy `json:"strategy" yaml:"strategy"`
	// Threshold is the ratio that opens an error_ratio or slow_ratio
	// breaker, in (0, 1].
	Threshold float64 `json:"threshold,omitempty" yaml:"threshold,omitempty"`
	// Count is the number of failures that opens an error_count breaker,
	// or the failures in a row that open a consecutive_failures breaker.
	Count int64 `json:"count,omitempty" yaml:"count,omitempty"`
	// MaxRT is the longest a request may take before a slow_ratio breaker
	// counts it as slow.
	MaxRT Duration `json:"max_rt,omitempty" yaml:"max_rt,omitempty"`
	// MinRequests is the minimum volume (breaker.WithMinRequests); unset,
	// the breaker's default: 10 for the ratio and count strategies, 0 for
	// consecutive_failures and sre.
	MinRequests *int64 `json:"min_requests,omitempty" yaml:"min_requests,omitempty"`
	// Interval and Buckets are the breaker's sliding window
	// (breaker.WithWindow); each unset takes the breaker's default: 10 s,
	// in 40 buckets for an SRE breaker and 10 for the others.
	Interval Duration `json:"interval,omitempty" yaml:"interval,omitempty"`
	Buckets  int      `json:"buckets,omitempty" yaml:"buckets,omitempty"`
	// OpenTimeout, MaxOpenTimeout, Probes and ProbeTimeout configure a state
	// breaker (breaker.WithOpenTimeout, WithProbes).
	OpenTimeout    Duration `json:"open_timeout,omitempty" yaml:"open_timeout,omitempty"`
	MaxOpenTimeout Duration `json:"max_open_timeout,omitempty" yaml:"max_open_timeout,omitempty"`
	Probes         int      `json:"probes,omitempty" yaml:"probes,omitempty"`
	ProbeTimeout   Duration `json:"probe_timeout,omitempty" yaml:"probe_timeout,omitempty"`
	// K, Protection and BlockPolicy configure an SRE breaker
	// (breaker.WithFormula, WithBlockPolicy: "count_blocks_while_failing",
	// "count_blocks" or "ignore_blocks"); unset, the breaker's defaults.
	K           float64 `json:"k,omitempty" yaml:"k,omitempty"`
	Protection  *int64  `json:"protection,omitempty" yaml:"protection,omitempty"`
	BlockPolicy string  `json:"block_policy,omitempty" yaml:"block_policy,omitempty"`
	// Shadow, if true, puts the breaker in shadow (see FlowRule.Shadow):
	// it opens, half-opens and closes as it would enforced, and a request
	// it would have blocked goes on, counted in Totals.WouldBlockBy.
	Shadow bool `json:"shadow,omitempty" yaml:"shadow,omitempty"`
}

// normal returns the rule with the defaults of its breaker written out
// (breaker's defaults, internal/breakerlimits): the window, the minimum volume, and an
// SRE breaker's K, protection and block policy or a circuit's open
// timeout, backoff and probes.
func (b BreakerRule) normal() BreakerRule {
	b.Shadow = false // as for a flow rule: the breaker keeps its state
	b.Name = ""
	b.MinRequests = cloned(b.MinRequests)
	if b.Interval == 0 {
		b.Interval = Duration(breakerlimits.DefaultInterval)
	}
	if b.Strategy == SREBreaker {
		if b.Buckets == 0 {
			b.Buckets = breakerlimits.DefaultSREBuckets
		}
		if b.MinRequests == nil {
			b.MinRequests = new(int64)
		}
		if b.K == 0 {
			b.K = breakerlimits.DefaultK
		}
		if b.Protection == nil {
			n := int64(breakerlimits.DefaultProtection)
			b.Protection = &n
		}
		if b.BlockPolicy == "" {
			b.BlockPolicy = "count_blocks_while_failing"
		}
		return b
	}
	if b.Buckets == 0 {
		b.Buckets = breakerlimits.DefaultCircuitBuckets
	}
	if b.MinRequests == nil {
		n := int64(breakerlimits.DefaultMinRequests)
		if b.Strategy == ConsecutiveFailuresBreaker {
			n = 0
		}
		b.MinRequests = &n
	}
	if b.OpenTimeout == 0 {
		b.OpenTimeout = Duration(breakerlimits.DefaultOpenTimeout)
	}
	if b.MaxOpenTimeout == 0 {
		b.MaxOpenTimeout = b.OpenTimeout
	}
	if b.Probes == 0 {
		b.Probes = breakerlimits.DefaultProbes
	}
	if b.ProbeTimeout == 0 {
		b.ProbeTimeout = b.OpenTimeout
	}
	return b
}

// appendKey writes every field of r.
func (r *BreakerRule) appendKey(b []byte) []byte {
	b = appendString(b, r.Resource)
	b = appendString(b, r.Name)
	b = appendString(b, string(r.Strategy))
	b = appendFloat(b, r.Threshold)
	b = appendInt(b, r.Count)
	b = appendInt(b, int64(r.MaxRT))
	b = appendIntPointer(b, r.MinRequests)
	b = appendInt(b, int64(r.Interval))
	b = appendInt(b, int64(r.Buckets))
	b = appendInt(b, int64(r.OpenTimeout))
	b = appendInt(b, int64(r.MaxOpenTimeout))
	b = appendInt(b, int64(r.Probes))
	b = appendInt(b, int64(r.ProbeTimeout))
	b = appendFloat(b, r.K)
	b = appendIntPointer(b, r.Protection)
	b = appendString(b, r.BlockPolicy)
	return appendBool(b, r.Shadow)
}

// blockPolicies are the block policies of an SRE breaker, by their
// names in rules (BreakerRule.BlockPolicy).
var blockPolicies = map[string]breaker.BlockPolicy{
	"":                           breaker.CountBlocksWhileFailing,
	"count_blocks_while_failing": breaker.CountBlocksWhileFailing,
	"count_blocks":               breaker.CountBlocks,
	"ignore_blocks":              breaker.IgnoreBlocks,
}

// buildBreaker makes the rule that enforces breaker rule b, read as Validate
// leaves it. The breaker reads its clock through clk, a breaker.WithClock
// made once for every breaker, or clock.System if nil; a circuit tells its
// changes of state through hook, onTransition's option, if not nil.
func buildBreaker(b BreakerRule, clk, hook breaker.Option) (*breakerRule, error) {
	var buf [8]breaker.Option
	opts := breakerOptions(&b, clk, hook, &buf)
	if b.Strategy == SREBreaker {
		a, err := breaker.NewSRE(opts...)
		if err != nil {
			return nil, err
		}
		return &breakerRule{b: a}, nil
	}
	circuit, err := breaker.NewCircuit(circuitStrategy(&b), opts...)
	if err != nil {
		return nil, err
	}
	if sharesWindow(b) {
		return &breakerRule{b: circuit, shared: circuit}, nil
	}
	return &breakerRule{b: circuit}, nil
}

// newThresholds returns the thresholds of breaker rule b, read as Validate
// leaves it, for circuit c, which enforces a rule of b's shape, to give c
// with setThresholds; or the error buildBreaker would return for b. buf is
// room for the options, reused from one rule to the next.
func newThresholds(b *BreakerRule, c *breaker.Circuit, buf *[8]breaker.Option) (any, error) {
	return thresholdsOf(c, circuitStrategy(b), breakerOptions(b, nil, nil, buf)...)
}

// circuitStrategy returns the strategy of breaker rule b, not an SRE one.
func circuitStrategy(b *BreakerRule) breaker.Strategy {
	switch b.Strategy {
	case ErrorRatioBreaker:
		return breaker.ErrorRatio(b.Threshold)
	case ErrorCountBreaker:
		return breaker.ErrorCount(b.Count)
	case SlowRatioBreaker:
		return breaker.SlowRatio(time.Duration(b.MaxRT), b.Threshold)
	case ConsecutiveFailuresBreaker:
		return breaker.ConsecutiveFailures(b.Count)
	}
	return breaker.Strategy{}
}

// breakerOptions returns the options of the breaker of rule b, in buf:
// clk and hook (buildBreaker's) if not nil, then b's. Each option b sets
// is a closure on the heap, as it was when buildBreaker made them: a
// plain rule sets none.
func breakerOptions(b *BreakerRule, clk, hook breaker.Option, buf *[8]breaker.Option) []breaker.Option {
	opts := buf[:0]
	add := func(o breaker.Option) {
		opts = buf[:len(opts)+1]
		opts[len(opts)-1] = o
	}
	if clk != nil {
		add(clk)
	}
	if b.MinRequests != nil {
		add(breaker.WithMinRequests(*b.MinRequests))
	}
	if b.Interval != 0 || b.Buckets != 0 {
		add(breaker.WithWindow(b.Buckets, time.Duration(b.Interval))) // 0: the breaker's default
	}
	if b.Strategy == SREBreaker {
		if b.K != 0 || b.Protection != nil {
			protection := int64(breakerlimits.DefaultProtection)
			if b.Protection != nil {
				protection = *b.Protection
			}
			add(breaker.WithFormula(b.K, protection)) // K 0: the default
		}
		add(breaker.WithBlockPolicy(blockPolicies[b.BlockPolicy]))
		return opts
	}
	if b.OpenTimeout != 0 || b.MaxOpenTimeout != 0 {
		d := time.Duration(b.OpenTimeout)
		if d == 0 {
			d = breakerlimits.DefaultOpenTimeout
		}
		add(breaker.WithOpenTimeout(d, time.Duration(b.MaxOpenTimeout)))
	}
	if b.Probes != 0 || b.ProbeTimeout != 0 {
		n := b.Probes
		if n == 0 {
			n = 1
		}
		add(breaker.WithProbes(n, time.Duration(b.ProbeTimeout)))
	}
	if hook != nil {
		add(hook)
	}
	if sharesWindow(*b) {
		add(sharedOption())
	}
	return opts
}

// sharesWindow reports whether the circuit of breaker rule b can read its
// resource's counter instead of a window of its own (see breakerRule): its
// window is the resource's, and its strategy reads outcomes only.
func sharesWindow(b BreakerRule) bool {
	switch b.Strategy {
	case ErrorRatioBreaker, ErrorCountBreaker, ConsecutiveFailuresBreaker:
	default:
		return false
	}
	interval, buckets := time.Duration(b.Interval), b.Buckets
	if interval == 0 {
		interval = breakerlimits.DefaultInterval
	}
	if buckets == 0 {
		buckets = breakerlimits.DefaultCircuitBuckets
	}
	return interval == statsInterval && buckets == statsBuckets &&
		breakerlimits.DefaultInterval == statsInterval && breakerlimits.DefaultCircuitBuckets == statsBuckets
}

// strategyNames lists the breaker strategies, as rule files write them.
const strategyNames = "sre, error_ratio, error_count, slow_ratio, consecutive_failures"

// check adds the problems of b, rule at of list, to into: its fields, then,
// if it has none and judge, those its breaker's constructor finds.
func (b BreakerRule) check(list string, at int, into []Problem, judge bool) []Problem {
	p := problems{in: list, at: at, resource: b.Resource, list: into}
	p.name("resource", b.Resource, true)
	p.ruleName(b.Name)
	if b.Resource == InboundResource {
		p.add("resource", "%s is all the inbound traffic: a breaker protects one resource", InboundResource)
	}
	for _, d := range []struct {
		field string
		v     Duration
	}{{"max_rt", b.MaxRT}, {"interval", b.Interval}, {"open_timeout", b.OpenTimeout},
		{"max_open_timeout", b.MaxOpenTimeout}, {"probe_timeout", b.ProbeTimeout}} {
		p.nonNegative(d.field, d.v)
	}
	if b.MinRequests != nil && *b.MinRequests < 0 {
		p.add("min_requests", "%d must not be negative", *b.MinRequests)
	}
	if b.Buckets < 0 {
		p.add("buckets", "%d must not be negative", b.Buckets)
	}
	if b.Probes < 0 {
		p.add("probes", "%d must not be negative", b.Probes)
	}
	sreOnly := func(field string, set bool) {
		if set {
			p.add(field, "applies to an SRE breaker only")
		}
	}
	stateOnly := func(field string, set bool) {
		if set {
			p.add(field, "does not apply to an SRE breaker")
		}
	}
	switch b.Strategy {
	case SREBreaker:
		stateOnly("threshold", b.Threshold != 0)
		stateOnly("count", b.Count != 0)
		stateOnly("max_rt", b.MaxRT != 0)
		stateOnly("open_timeout", b.OpenTimeout != 0)
		stateOnly("max_open_timeout", b.MaxOpenTimeout != 0)
		stateOnly("probes", b.Probes != 0)
		stateOnly("probe_timeout", b.ProbeTimeout != 0)
		if b.K != 0 && !(b.K >= 1) {
			p.add("k", "%v must be at least 1", b.K)
		}
		if b.Protection != nil && *b.Protection < 0 {
			p.add("protection", "%d must not be negative", *b.Protection)
		}
		if _, ok := blockPolicies[b.BlockPolicy]; !ok {
			p.add("block_policy", "%q is not one of count_blocks_while_failing, count_blocks, ignore_blocks", b.BlockPolicy)
		}
	case ErrorRatioBreaker, ErrorCountBreaker, SlowRatioBreaker, ConsecutiveFailuresBreaker:
		sreOnly("k", b.K != 0)
		sreOnly("protection", b.Protection != nil)
		sreOnly("block_policy", b.BlockPolicy != "")
		uses := func(field string, set, applies bool) {
			if set && !applies {
				p.add(field, "does not apply to the %s strategy", b.Strategy)
			}
		}
		ratio, count := b.Strategy == ErrorRatioBreaker || b.Strategy == SlowRatioBreaker, b.Strategy == ErrorCountBreaker || b.Strategy == ConsecutiveFailuresBreaker
		uses("threshold", b.Threshold != 0, ratio)
		uses("count", b.Count != 0, count)
		uses("max_rt", b.MaxRT != 0, b.Strategy == SlowRatioBreaker)
		switch {
		case ratio:
			if !(b.Threshold > 0 && b.Threshold <= 1) {
				p.add("threshold", "%v must be above 0 and at most 1", b.Threshold)
			}
		case count:
			if b.Count < 1 {
				p.add("count", "%d must be at least 1", b.Count)
			}
		}
		if b.Strategy == SlowRatioBreaker && b.MaxRT <= 0 {
			p.add("max_rt", "%v must be positive", b.MaxRT)
		}
		if b.MaxOpenTimeout != 0 && b.MaxOpenTimeout < b.OpenTimeout {
			p.add("max_open_timeout", "%v must be at least open_timeout %v", b.MaxOpenTimeout, b.OpenTimeout)
		}
	case "":
		p.add("strategy", "missing: one of %s", strategyNames)
	case "adaptive": // its spelling until the word went to the adaptive limit
		p.add("strategy", `"adaptive" is now spelt %q: the Google SRE throttle (adaptive names a flow rule's limit)`, SREBreaker)
	default:
		p.add("strategy", "%q is not one of %s", b.Strategy, strategyNames)
	}
	if judge && len(p.list) == len(into) {
		if _, err := buildBreaker(b, nil, nil); err != nil {
			p.add(fieldOf(err), "%v", err)
		}
	}
	return p.list
}
