package slidegate

import (
	"context"
	"errors"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// AdaptiveRule is a concurrency limit that finds itself from the response
// times of the requests it allows ([flow.Adaptive]). It comes down when
// they queue, or end overloaded ([IsOverloaded]). It grows while they do
// not and the limit is in use. Limit is where it starts.
const AdaptiveRule FlowType = "adaptive"

// adaptiveKind is the adaptive rule. Its Limit is only where it starts: a
// reload that changes nothing else keeps what it has learnt.
var adaptiveKind = kind{
	Kind:   rulekind.Kind{Name: string(AdaptiveRule), Learnt: true, Baseline: true},
	fields: []string{"limit", "algorithm", "min_limit", "max_limit", "tolerance", "share"},
	normal: func(f *FlowRule) {
		if f.Algorithm == "" {
			f.Algorithm = flowlimits.DefaultAdaptiveAlgorithm
		}
		def := func(v *int64, d int64) {
			if *v == 0 {
				*v = d
			}
		}
		def(&f.Limit, flowlimits.DefaultAdaptiveInitialLimit)
		def(&f.MinLimit, flowlimits.DefaultAdaptiveMinLimit)
		def(&f.MaxLimit, flowlimits.DefaultAdaptiveMaxLimit)
		if f.Tolerance == 0 {
			f.Tolerance = flowlimits.DefaultAdaptiveTolerance
		}
		f.Share = f.share()
	},
	build: buildAdaptive,
}

// The adaptive algorithms' names in rules (FlowRule.Algorithm).
var adaptiveAlgorithms = map[string]bool{"": true, "gradient": true, "aimd": true}

// adaptiveSettings returns an adaptive rule's settings, its defaults left
// to flow.NewAdaptive.
func adaptiveSettings(f FlowRule) flow.AdaptiveSettings {
	return flow.AdaptiveSettings{Algorithm: f.Algorithm, InitialLimit: f.Limit, MinLimit: f.MinLimit, MaxLimit: f.MaxLimit, Tolerance: f.Tolerance}
}

// buildAdaptive makes an adaptive rule's enforcer.
func buildAdaptive(f FlowRule, on builder) (rule, error) {
	set := adaptiveSettings(f)
	set.Clock = on.clock
	a, err := flow.NewAdaptive(set)
	var ce *config.Error
	if errors.As(err, &ce) && ce.Field == "initial_limit" {
		ce.Field = "limit" // the rule's field
	}
	if err != nil {
		return nil, err
	}
	return &adaptiveRule{a: a, byKey: f.byKey()}, nil
}

// An adaptiveRule is a concurrency limit that finds itself (flow.Adaptive).
type adaptiveRule struct {
	a     *flow.Adaptive
	byKey bool // shares the limit among keys, not resources
}

func (*adaptiveRule) phase() phase { return phaseConcurrency }

func (r *adaptiveRule) admit(_ context.Context, e *entry, now int64, h *hold) flow.Decision {
	d := r.a.AcquireAt(now, &h.permit, shareOf(e, r.byKey))
	if d.Allowed {
		h.by = r
	}
	return d
}

// release ends the request: a sample if it succeeded, a signal to back
// off if it ended overloaded. A request that failed otherwise (a bad
// argument, a bug) may have taken any time, often none: its response time
// says little of the service, and a run of quick errors would make the
// service look faster than it is (flow.Failed).
func (r *adaptiveRule) release(h *hold, now int64, o breaker.Outcome, blocked bool) {
	h.permit.DoneAt(now, outcome(h, o, blocked))
}

// An adaptive rule's Limit is only where it starts: a reload that changes
// nothing else keeps the limiter, and what it has learnt.
func (*adaptiveRule) resizable() bool        { return true }
func (*adaptiveRule) setLimit(_ int64) error { return nil }

func (r *adaptiveRule) statusAt(_ int64, _ FlowRule, _ func() float64) OverloadStatus {
	o := flowstate.Adaptive(r.a)
	return OverloadStatus{Limit: o.Limit, Cap: o.Limit, InFlight: o.InFlight, Baseline: o.Baseline, CPU: -1}
}
