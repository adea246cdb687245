package slidegate

import (
	"context"
	"math"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowstate"
)

// The values of FlowRule.Share.
const (
	shareByResource = "resource"
	shareByKey      = "key"
)

// share returns whom an overload rule shares its limit among
// (FlowRule.Share), its default filled in.
func (f FlowRule) share() string {
	switch {
	case f.Share != "":
		return f.Share
	case f.Resource == InboundResource:
		return shareByResource
	}
	return shareByKey
}

// byKey reports whether an overload rule shares its limit among keys, not
// resources.
func (f FlowRule) byKey() bool { return f.share() == shareByKey }

// shareOf is whom an entry's request counts for in an overload rule that
// shares its limit by key or by resource.
func shareOf(e *entry, byKey bool) string {
	if byKey {
		return e.key
	}
	return e.res.name
}

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

// IsOverloaded reports whether err says that a request failed for want of
// capacity: a signal for an adaptive rule to back off. That is err is, or
// wraps, [context.DeadlineExceeded], or an error whose method Overloaded()
// bool says true. httpguard.StatusError says so for 429 and 503.
func IsOverloaded(err error) bool {
	// errors.As with an interface target would allocate on every failed
	// request; the tree is walked here instead, as errors.Is walks it,
	// asking Is methods too (net/http's client timeout says it is
	// context.DeadlineExceeded that way).
	for err != nil {
		if err == context.DeadlineExceeded {
			return true
		}
		if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(context.DeadlineExceeded) {
			return true
		}
		if o, ok := err.(interface{ Overloaded() bool }); ok && o.Overloaded() {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if IsOverloaded(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// An OverloadStatus is a shed or adaptive rule in force and what it has
// learnt.
type OverloadStatus struct {
	Resource string
	Rule     string   // its name (Rules.Named): "adaptive"
	Type     FlowType // ShedRule or AdaptiveRule
	// Limit is the most requests in flight the rule allows before it
	// shares them (see FlowRule.Share): an adaptive rule's limit now, or
	// what a shed rule allows while it sheds (twice that while the CPU is
	// warm, and always without a CPU signal; no cap while it is cool); -1
	// for a shed rule that has not learnt the service's capacity yet.
	Limit int64
	// Cap is the most requests in flight the rule admits now, before it
	// shares them. For an adaptive rule it is Limit. A shed rule admits
	// Limit while it sheds, and twice Limit while the CPU is warm or
	// unread. Cap is -1 (no cap) while the CPU is below half the
	// threshold, or before Limit is learnt.
	Cap      int64
	InFlight int64
	// Shedding, for a shed rule, says whether it sheds now: the CPU at or
	// above its threshold, or within a second of shedding. CPU is the
	// usage it read; -1 for a shed rule without a CPU signal, and for an
	// adaptive rule, which reads none.
	Shedding bool
	CPU      float64
	// Baseline, for an adaptive rule, is the least response time it judges
	// queueing by; 0 until it has one.
	Baseline time.Duration
}

// Overload returns the state of every shed and adaptive rule in force, in
// rule order.
func (g *Guard) Overload() []OverloadStatus { return g.OverloadAt(g.clock.Now()) }

// OverloadAt is Overload at time now, in nanoseconds on the guard's clock.
func (g *Guard) OverloadAt(now int64) []OverloadStatus {
	s := g.snap.Load()
	var out []OverloadStatus
	var names []string
	for i, f := range s.flows {
		r := s.rules.Flow[i]
		st := OverloadStatus{Resource: r.Resource, Type: r.flowType()}
		switch f := f.(type) {
		case *shedRule:
			o := flowstate.Shedder(f.s, now)
			st.Limit, st.InFlight, st.Shedding, st.CPU = o.Limit, o.InFlight, o.Shedding, -1
			if st.Limit == math.MaxInt64 {
				st.Limit = -1
			}
			if r.CPUThreshold >= 0 && g.cpu != nil {
				st.CPU = g.cpu()
			}
			st.Cap = shedCap(st, r.CPUThreshold)
		case *adaptiveRule:
			o := flowstate.Adaptive(f.a)
			st.Limit, st.InFlight, st.Baseline, st.CPU = o.Limit, o.InFlight, o.Baseline, -1
			st.Cap = st.Limit
		default:
			continue
		}
		if names == nil {
			names = s.names().flows
		}
		st.Rule = names[i]
		out = append(out, st)
	}
	return out
}
