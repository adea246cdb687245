package otelguard

import (
	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"go.opentelemetry.io/otel/attribute"
)

// The attribute keys of the instruments. Their values are bounded by the
// guard and its rules, never by the traffic. No instrument has a key
// attribute ([slidegate.WithKey]): keys are unbounded.
const (
	// ResourceKey is the resource's name, at most 256
	// bytes, made valid UTF-8 (see the package doc).
	ResourceKey = attribute.Key("slidegate.resource")
	// DirectionKey is "inbound" or "outbound" ([slidegate.ResourceStats].Inbound).
	DirectionKey = attribute.Key("slidegate.direction")
	// OutcomeKey is "allowed", "blocked", "would_block", "succeeded" or
	// "failed".
	OutcomeKey = attribute.Key("slidegate.outcome")
	// ReasonKey is why a request was blocked, or would have been:
	// "rate_limited", "concurrency_limited", "exceeds_limit",
	// "wait_too_long", "ref_limited", "breaker_open" or "overloaded".
	ReasonKey = attribute.Key("slidegate.reason")
	// RuleKey is the rule's name ([slidegate.Rules.Named]): "qps", "breaker".
	// It is not "slidegate.rule", which is the namespace of [RuleTypeKey]
	// and of the instrument slidegate.rule.limit.
	RuleKey = attribute.Key("slidegate.rule.name")
	// RuleTypeKey is a flow rule's type as rule files write it: "qps",
	// "throttle", "concurrency", "shed", "adaptive" ...
	RuleTypeKey = attribute.Key("slidegate.rule.type")
	// BreakerStrategyKey is a breaker rule's strategy: "error_ratio" ...
	BreakerStrategyKey = attribute.Key("slidegate.breaker.strategy")
	// BreakerStateKey is "closed", "open" or "half_open".
	BreakerStateKey = attribute.Key("slidegate.breaker.state")
)

// reasons spells each blocking reason as a value of ReasonKey: its Code
// ("rate_limited"), as the Prometheus collector does; not Reason.String,
// which is prose and may be reworded.
var reasons = func() (out [flowlimits.NumReasons - 1]struct {
	reason flow.Reason
	value  string
}) {
	for i := range out {
		r := flow.Reason(i + 1)
		out[i].reason, out[i].value = r, r.Code()
	}
	return out
}()

// breakerStates spells each breaker state as a value of BreakerStateKey.
var breakerStates = [...]struct {
	state breaker.State
	value string
}{
	{breaker.Closed, "closed"},
	{breaker.Open, "open"},
	{breaker.HalfOpen, "half_open"},
}

// direction is the value of DirectionKey for a resource.
func direction(inbound bool) string {
	if inbound {
		return "inbound"
	}
	return "outbound"
}
