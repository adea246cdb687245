package slidegate

import (
	"context"
	"errors"
	"math"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// ShedRule sheds requests while the service is overloaded
// ([flow.Shedder]). While the CPU the guard reads ([WithCPU]) is at or
// above CPUThreshold, or was within a second, it allows a request only
// while fewer are in flight than the service completes at its best. On
// [InboundResource] it protects the whole service.
const ShedRule FlowType = "shed"

// shedKind is the shed rule. It has no limit: it learns the service's
// capacity over its interval.
var shedKind = kind{
	Kind:     rulekind.Kind{Name: string(ShedRule), Learnt: true, Sheds: true},
	fields:   []string{"interval", "buckets", "cpu_threshold", "share"},
	interval: flowlimits.DefaultShedInterval,
	buckets:  flowlimits.DefaultShedBuckets,
	normal: func(f *FlowRule) {
		f.Interval, f.Buckets = Duration(f.interval()), f.buckets()
		if f.CPUThreshold == 0 {
			f.CPUThreshold = flowlimits.DefaultShedCPUThreshold
		}
		f.Share = f.share()
	},
	build: buildShed,
}

// buildShed makes a shed rule's enforcer, reading the CPU the guard reads.
func buildShed(f FlowRule, on builder) (rule, error) {
	set := flow.ShedderSettings{CPU: on.cpu, CPUThreshold: f.CPUThreshold, Interval: f.interval(), Buckets: f.buckets(), Clock: on.clock}
	if f.CPUThreshold < 0 {
		set.CPU, set.CPUThreshold = nil, 0
	} else if on.cpu == nil {
		return nil, &fieldError{"cpu_threshold", errNoCPU}
	}
	s, err := flow.NewShedder(set)
	if err != nil {
		return nil, err
	}
	return &shedRule{s: s, byKey: f.byKey()}, nil
}

// errNoCPU is the error of a shed rule that reads the CPU in a guard that
// reads none.
var errNoCPU = errors.New("a shed rule reads the CPU, and the guard reads none: make it with slidegate.WithCPU (the Usage of a cpu.Sampler), or set cpu_threshold to -1 for no CPU signal (a cap of twice the requests in flight the service completes, shared fairly)")

// A shedRule sheds requests while the service is overloaded
// (flow.Shedder): a request holds its place in flight until it exits, its
// response time then a sample of the service's.
type shedRule struct {
	s     *flow.Shedder
	byKey bool // shares the bound among keys, not resources
}

func (*shedRule) phase() phase { return phaseConcurrency }

func (r *shedRule) admit(_ context.Context, e *entry, now int64, h *hold) flow.Decision {
	d := r.s.AcquireAt(now, &h.permit, shareOf(e, r.byKey))
	if d.Allowed {
		h.by = r
	}
	return d
}

// release ends the request: a sample, unless it never ran (blocked later)
// or its caller gave up (its response time says nothing of the service).
func (r *shedRule) release(h *hold, now int64, o breaker.Outcome, blocked bool) {
	h.permit.DoneAt(now, outcome(h, o, blocked))
}

func (r *shedRule) statusAt(now int64, f FlowRule, cpu func() float64) OverloadStatus {
	o := flowstate.Shedder(r.s, now)
	st := OverloadStatus{Limit: o.Limit, InFlight: o.InFlight, Shedding: o.Shedding, CPU: -1}
	if st.Limit == math.MaxInt64 {
		st.Limit = -1
	}
	if f.CPUThreshold >= 0 && cpu != nil {
		st.CPU = cpu()
	}
	st.Cap = shedCap(st, f.CPUThreshold)
	return st
}

// shedCap is the most requests in flight a shed rule admits, as
// flow.Shedder decides: its bound while it sheds (the CPU at or above the
// threshold, or in the cool-off); no cap while the CPU is below half the
// threshold; twice the bound in between, and always without a CPU signal
// (a threshold of -1). st is the rule's status (Limit the bound, -1 until
// learnt; CPU the usage read); threshold its FlowRule.CPUThreshold.
func shedCap(st OverloadStatus, threshold float64) int64 {
	if threshold == 0 {
		threshold = flowlimits.DefaultShedCPUThreshold
	}
	switch {
	case st.Limit < 0:
		return -1
	case st.Shedding:
		return st.Limit
	case threshold > 0 && st.CPU < threshold/2:
		return -1
	}
	return 2 * st.Limit
}
