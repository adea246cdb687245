package slidegate

import (
	"math"
	"time"

	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/window"
)

// unusedAfter is how long after rules are set the guard looks for rules
// whose resource no request has entered: time enough for a service's
// routes and calls to have run.
const unusedAfter = time.Minute

// A rule's resource is a name that requests must enter exactly: a rule on
// "GET 127.0.0.1" never sees the calls httpguard.Transport names
// "GET 127.0.0.1:9101". Validation cannot tell, and such a rule never
// acts; the "rules_unused" event says so. SetRules arms the look
// (Guard.unusedAt), which runs once, on the first Enter after unusedAfter:
// Enter pays one atomic load for it. A resource counts its requests from
// when it was made, so the look keeps nothing per resource: a rule is
// unused if its resource has never counted a request.

// requests returns the requests r has counted, allowed and blocked.
func (r *resource) requests() int64 {
	t := r.stats.Totals()
	return t[window.Allowed] + t[window.Blocked]
}

// checkUnused looks, once for each set of rules, for the rules whose
// resource no request has entered, and records a "rules_unused" event listing
// them.
func (g *Guard) checkUnused(now int64) {
	at := g.unusedAt.Load()
	if now < at || !g.unusedAt.CompareAndSwap(at, math.MaxInt64) {
		return
	}
	s := g.snap.Load()
	unused := func(name string) bool {
		if name == InboundResource {
			return len(s.inbound) > 0 && g.inbound.requests() == 0
		}
		b := s.by[name]
		return b != nil && b.res.requests() == 0
	}
	names := s.names()
	var changes []RuleChange
	for i, f := range s.kept.flow {
		if unused(f.resource) {
			changes = append(changes, RuleChange{Resource: f.resource, Rule: names.flows[i], Change: "unused"})
		}
	}
	for i, b := range s.kept.breakers {
		if unused(b.resource) {
			changes = append(changes, RuleChange{Resource: b.resource, Rule: names.breakers[i], Breaker: true, Change: "unused"})
		}
	}
	if len(changes) == 0 {
		return
	}
	more := max(len(changes)-bounds.MaxEventChanges, 0)
	g.events.record(Event{At: now, Kind: rulesUnused, Changes: changes[:len(changes)-more], MoreChanges: more})
}
