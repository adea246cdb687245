package slidegate

import (
	"math"
	"sort"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/window"
)

// The read side of the guard: what it tells of its resources, rules,
// breakers, overload rules, keys and events. Every method reads the
// guard's clock once, or takes the time (...At); none takes a lock that a
// request takes.

// Totals are a resource's counts since the guard began keeping statistics for
// it: counters that only grow, for metrics. A resource evicted for idleness
// (see WithMaxResources) starts again from zero if it comes back.
type Totals struct {
	Allowed, Succeeded, Failed int64
	// BlockedBy counts the blocked requests by reason: BlockedBy[flow.RateLimited],
	// BlockedBy[flow.BreakerOpen], ... (BlockedBy[0] is unused).
	BlockedBy [numReasons]int64
	// WouldBlockBy counts, by reason, the requests that a shadow rule
	// (FlowRule.Shadow, BreakerRule.Shadow, Rules.Shadow) would have
	// blocked, and let through. They are among Allowed: a request is
	// counted once, with the reason of the first shadow rule that would
	// have blocked it, as the same rules enforced would have blocked it.
	WouldBlockBy [numReasons]int64
	// RT is the sum of the response times of the requests that ended, a batch
	// counting its response time once per request, each rounded to the
	// nearest microsecond. Like AvgRT, it counts at most 2^39 µs (6.4 days)
	// of response time ended in one 1 s bucket.
	RT time.Duration
}

// WouldBlock returns the requests shadow rules would have blocked,
// whatever the reason.
func (t Totals) WouldBlock() int64 { return sumSaturating(t.WouldBlockBy) }

// sumSaturating adds up counts that saturate at math.MaxInt64.
func sumSaturating(by [numReasons]int64) int64 {
	var n int64
	for _, b := range by {
		if n += b; n < 0 {
			return math.MaxInt64
		}
	}
	return n
}

// Blocked returns the blocked requests, whatever the reason.
func (t Totals) Blocked() int64 { return sumSaturating(t.BlockedBy) }

// ResourceStats are a resource's statistics over the last 10 seconds, and
// its totals. Its response times since its statistics began, by bin, which
// a histogram exports, are read apart: Guard.ResponseTimeTotals.
type ResourceStats struct {
	Resource string
	// Inbound is true once any request entered the resource with Inbound,
	// allowed or blocked: the resource is traffic into the service, a
	// route it serves. The rest are outbound, calls the service makes
	// (Outbound, the default). It stays true while the guard keeps the
	// resource; one evicted for idleness (see WithMaxResources) comes back
	// outbound until an inbound request enters it again. OtherResource,
	// which counts the traffic of many names, is inbound once any of them
	// was.
	Inbound bool
	// Allowed and Blocked count the requests allowed and blocked; Succeeded and
	// Failed those that ended (Entry.Exit) without and with an error.
	Allowed, Blocked, Succeeded, Failed int64
	// AvgRT is the mean response time of the requests that ended, each
	// request of a batch counting the batch's time. The response times of
	// one 1 s bucket sum to at most 2^39 µs (6.4 days), where they stop
	// growing: requests that together outlast that in one bucket (a batch
	// of 10^6 taking 3 s, a thousand hour-long streams ending at once) read
	// a mean too low. P50 to MaxRT, which count a batch once, do not.
	AvgRT time.Duration
	// P50, P90, P99 and MaxRT describe the response times of the requests
	// that ended in the last 5 to 10 seconds (the latencies are kept in two
	// halves of 10 s), the quantiles within 4.43% from
	// 2 µs up, the maximum exactly. A batch (WithCount) is one response
	// time.
	P50, P90, P99, MaxRT time.Duration
	// InFlight is how many requests have entered and not yet exited.
	InFlight int64
	// Totals count since the resource's statistics began.
	Totals Totals
}

func (r *resource) statsAt(now int64) ResourceStats {
	s := r.stats.SumsAt(now)
	out := ResourceStats{
		Resource:  r.name,
		Allowed:   s[window.Allowed],
		Blocked:   s[window.Blocked],
		Succeeded: s[window.Succeeded],
		Failed:    s[window.Failed],
	}
	if n := out.Succeeded + out.Failed; n > 0 {
		out.AvgRT = time.Duration(s[window.RT] * int64(time.Microsecond) / n)
	}
	l := r.lat.SummaryAt(now)
	out.P50, out.P90, out.P99, out.MaxRT = l.P50, l.P90, l.P99, l.Max
	out.Totals, out.InFlight, out.Inbound = r.totals()
	return out
}

// totals returns the resource's totals, its requests in flight, and
// whether it is inbound.
func (r *resource) totals() (Totals, int64, bool) {
	t := r.stats.Totals()
	// Read after the counts: Enter marks a resource inbound before it
	// counts the request, so counts that include an inbound request are
	// never read with the resource still outbound.
	inbound := r.inbound.Load()
	return Totals{
		Allowed:      t[window.Allowed],
		Succeeded:    t[window.Succeeded],
		Failed:       t[window.Failed],
		RT:           time.Duration(min(t[window.RT], math.MaxInt64/int64(time.Microsecond)) * int64(time.Microsecond)),
		BlockedBy:    r.blockedBy(),
		WouldBlockBy: r.wouldBlockBy(),
	}, inFlight(t), inbound
}

// Stats returns the statistics of the resource called name over the last 10
// seconds, and whether the guard keeps statistics for it.
// Stats([InboundResource]) is the traffic into the service as a whole: the
// requests entered with [WithInbound].
func (g *Guard) Stats(name string) (ResourceStats, bool) { return g.StatsAt(g.clock.Now(), name) }

// StatsAt is Stats at time now, in nanoseconds on the guard's clock.
func (g *Guard) StatsAt(now int64, name string) (ResourceStats, bool) {
	switch name {
	case InboundResource:
		return g.inbound.statsAt(now), true
	case OtherResource:
		return g.resources.other.statsAt(now), true
	}
	v, ok := g.resources.m.Load(name)
	if !ok {
		return ResourceStats{Resource: name}, false
	}
	return v.(*resource).statsAt(now), true
}

// ResponseTimeTotals sets *into to the response times of the requests to
// the resource called name, counted by bin ([window.SketchTotals]). It
// counts those that ended since the guard began keeping statistics for the
// resource. It reports whether the guard keeps statistics for it; if not,
// *into is all zeros.
//
// These are the counts a response-time histogram exports. They only grow,
// and they add up across instances, where quantiles do not. A batch
// ([WithCount]) counts as its requests, each with the batch's response
// time. So into.Count() is Totals.Succeeded plus Totals.Failed, while no
// request ends. A resource evicted for idleness ([WithMaxResources])
// starts again from zero if it comes back. ResponseTimeTotals allocates
// nothing: keep one window.SketchTotals and fill it again.
func (g *Guard) ResponseTimeTotals(name string, into *window.SketchTotals) bool {
	switch name {
	case InboundResource:
		g.inbound.lat.TotalsInto(into)
		return true
	case OtherResource:
		g.resources.other.lat.TotalsInto(into)
		return true
	}
	v, ok := g.resources.m.Load(name)
	if !ok {
		*into = window.SketchTotals{}
		return false
	}
	v.(*resource).lat.TotalsInto(into)
	return true
}

// Resources returns the statistics of every resource the guard keeps, and of
// OtherResource once it has counted anything, sorted by name. A request
// entered under the name OtherResource is counted there.
func (g *Guard) Resources() []ResourceStats { return g.ResourcesAt(g.clock.Now()) }

// ResourcesAt is Resources at time now, in nanoseconds on the guard's clock.
func (g *Guard) ResourcesAt(now int64) []ResourceStats {
	var out []ResourceStats
	g.resources.m.Range(func(_, v any) bool {
		out = append(out, v.(*resource).statsAt(now))
		return true
	})
	if o := g.resources.other.statsAt(now); o.Totals.Allowed+o.Totals.Blocked()+o.InFlight > 0 {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

// Clock returns the clock the guard reads: what its ...At methods take the
// time of, and what a dashboard or a simulation beside it must read too.
func (g *Guard) Clock() clock.Clock { return g.clock }

// Rules returns a copy of the rules in force.
func (g *Guard) Rules() Rules {
	s := g.snap.Load()
	return s.kept.rules().clone()
}

// A BreakerStatus is a breaker rule in force and the state of its breaker.
type BreakerStatus struct {
	Resource string
	Rule     string          // its name (Rules.Named): "breaker"
	Strategy BreakerStrategy // the rule's Strategy
	// Shadow says the rule is in shadow (BreakerRule.Shadow, Rules.Shadow):
	// its breaker opens and closes, and blocks nothing.
	Shadow bool
	breaker.Stats
}

// Breakers returns the state of the breaker of every breaker rule in force,
// in rule order.
func (g *Guard) Breakers() []BreakerStatus { return g.BreakersAt(g.clock.Now()) }

// BreakersAt is Breakers at time now, in nanoseconds on the guard's clock.
func (g *Guard) BreakersAt(now int64) []BreakerStatus {
	s := g.snap.Load()
	out := make([]BreakerStatus, 0, len(s.breakers))
	names := s.names().breakers
	for i, b := range s.breakers {
		r := s.kept.breakerAt(i)
		out = append(out, BreakerStatus{Resource: r.Resource, Rule: names[i], Strategy: r.Strategy,
			Shadow: r.Shadow || s.kept.shadow, Stats: b.b.StatsAt(now)})
	}
	return out
}

// ClusterHealth returns the health of the guard's Cluster, and false if the
// guard has none or its Cluster does not report its health.
func (g *Guard) ClusterHealth() (ClusterHealth, bool) {
	r, ok := g.cluster.(HealthReporter)
	if !ok {
		return ClusterHealth{}, false
	}
	return r.Health(), true
}

// A KeyStat is what [Guard.TopKeys] says of one key.
type KeyStat struct {
	// Key is the key, cut to 64 bytes and made valid UTF-8.
	Key string
	// Allowed is how many of the key's requests the rule's first window
	// counts now: those allowed in its last interval or so.
	Allowed int64
	// Blocked is how many of the key's requests were refused in the first
	// window's current interval and the one before.
	Blocked int64
}

// TopKeys returns the keys busiest under the per-key QPS rules of the
// resource called name (its first such rule's window), at most n of them,
// busiest first: by allowed requests, or by blocked ones if byBlocked.
// Only keys that use more than half their limit are tracked one by one; the
// rest are counted together (see flow.KeyedQPS), so what TopKeys shows is
// bounded however many keys there are. It returns nil for a resource
// without local per-key QPS rules.
func (g *Guard) TopKeys(name string, n int, byBlocked bool) []KeyStat {
	return g.TopKeysAt(g.clock.Now(), name, n, byBlocked)
}

// TopKeysAt is TopKeys at time now, in nanoseconds on the guard's clock.
func (g *Guard) TopKeysAt(now int64, name string, n int, byBlocked bool) []KeyStat {
	q := g.keyed(name)
	if q == nil {
		return nil
	}
	top := flowstate.TopKeys(q, now, n, byBlocked)
	out := make([]KeyStat, len(top))
	for i, t := range top {
		out[i] = KeyStat(t)
	}
	return out
}

// keyed returns the limiter of the first local per-key QPS rule of the
// resource called name, or nil.
func (g *Guard) keyed(name string) any {
	b := g.snap.Load().by[name]
	if b == nil {
		return nil
	}
	for _, ch := range b.checks {
		if k, ok := ch.rule.(*keyedRule); ok {
			return k.q
		}
	}
	return nil
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
		o, ok := f.(overloadRule)
		if !ok {
			continue
		}
		r := s.kept.flowAt(i)
		st := o.statusAt(now, r, g.cpu)
		if names == nil {
			names = s.names().flows
		}
		st.Resource, st.Rule, st.Type = r.Resource, names[i], r.flowType()
		out = append(out, st)
	}
	return out
}

// An overloadRule is a rule whose state Overload shows: a shed or an
// adaptive rule.
type overloadRule interface {
	rule
	// statusAt returns what the rule has learnt by time now, but its
	// resource, name and type. f is its rule; cpu the CPU the guard reads,
	// or nil.
	statusAt(now int64, f FlowRule, cpu func() float64) OverloadStatus
}

// OnEvent registers f to be told of every event of the guard from now on,
// in order, on a goroutine of its own that runs only while there are
// events to tell: f never holds up a request or SetRules. A listener more
// than 256 events behind loses the oldest it has not been told,
// counted in DroppedEvents. The returned func stops the telling (events
// queued already are still told); it is safe to call more than once.
func (g *Guard) OnEvent(f func(Event)) (stop func()) {
	if f == nil {
		return func() {}
	}
	return g.events.listen(f)
}

// Events returns the latest events of the guard, at most 128,
// oldest first.
func (g *Guard) Events() []Event { return g.events.latest() }

// DroppedEvents returns how many events listeners (OnEvent) were not told
// because they fell more than 256 events behind.
func (g *Guard) DroppedEvents() int64 { return g.events.droppedCount() }

// KeyMemory returns the bytes the guard's per-key rules hold now, and the
// bound WithKeyMemory set. A rule the guard no longer uses gives its bytes
// back once the garbage collector has found it so.
func (g *Guard) KeyMemory() (inUse, limit int64) {
	return flowstate.KeyMemory(g.keys)
}
