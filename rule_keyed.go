package slidegate

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowstate"
)

// A keyedRule enforces the per-key QPS rules of one resource together
// (flow.KeyedQPS): a window per rule, decided for the request's key all or
// nothing. Its binding's check names each window's rule, in window order.
type keyedRule struct {
	holdsNothing
	q *flow.KeyedQPS
}

func (*keyedRule) phase() phase { return phaseKeyed }

func (r *keyedRule) admit(_ context.Context, e *entry, now int64, _ *hold) flow.Decision {
	d, j := r.q.AllowNAt(now, e.key, e.count)
	e.window = int32(j)
	return d
}

// A keyedClusterRule enforces the per-key cluster QPS rules of one resource
// together, through the guard's KeyedCluster.
type keyedClusterRule struct {
	holdsNothing
	l KeyedClusterLimiter
}

func (*keyedClusterRule) phase() phase { return phaseCluster }

func (r *keyedClusterRule) admit(ctx context.Context, e *entry, _ int64, _ *hold) flow.Decision {
	d, j := r.l.AllowKeyN(ctx, e.key, e.count)
	e.window = int32(j)
	return d
}

// keyedTogether reports whether f is one of the per-key QPS rules that are
// decided together: per key, counting requests (not a throttle or a
// concurrency rule).
func (f FlowRule) keyedTogether() bool { return f.PerKey && f.flowType() == QPSRule }

// A keyGroup is the per-key QPS rules of one resource, local or cluster-wide,
// in rule order.
type keyGroup struct {
	resource string
	cluster  bool
	at       []int // the rules' indexes
}

// keyGroups returns the groups of the per-key QPS rules of rules, in the
// order of their first rules.
func keyGroups(rules []FlowRule) []*keyGroup {
	var gs []*keyGroup
	by := map[[2]any]*keyGroup{}
	for i, r := range rules {
		if !r.keyedTogether() {
			continue
		}
		k := [2]any{r.Resource, r.Cluster}
		g := by[k]
		if g == nil {
			g = &keyGroup{resource: r.Resource, cluster: r.Cluster}
			by[k] = g
			gs = append(gs, g)
		}
		g.at = append(g.at, i)
	}
	return gs
}

// shape identifies the group by everything but its rules' windows, limits
// and overrides: a local group of the same shape in the rules in force
// keeps its enforcer, which takes the new windows in place, counts and
// all (flow.KeyedQPS.Set: a window added or removed, a limit changed). A
// cluster group is identified by its whole rules: its cluster's limiter is
// made anew when they change.
func (g *keyGroup) shape(rules []FlowRule) string {
	if g.cluster {
		whole := make([]FlowRule, len(g.at))
		for j, i := range g.at {
			whole[j] = rules[i].normal()
		}
		b, _ := json.Marshal(whole) // rules marshal: see ruleKey
		return string(b)
	}
	var rest []string // what is left of each rule without its window, once
	for _, i := range g.at {
		r := rules[i].normal().shape()
		r.Interval, r.Buckets = 0, 0
		b, _ := json.Marshal(r)
		if !slices.Contains(rest, string(b)) {
			rest = append(rest, string(b))
		}
	}
	slices.Sort(rest)
	return strings.Join(rest, "\n")
}

// build makes the group's enforcer; a local one draws from mem, if any.
func (g *keyGroup) build(rules []FlowRule, c clock.Clock, cl Cluster, mem *flow.KeyMemory) (rule, error) {
	if g.cluster {
		if cl == nil {
			return nil, &fieldError{"cluster", errNoCluster}
		}
		kc, ok := cl.(KeyedCluster)
		if !ok {
			return nil, &fieldError{"per_key", errNoKeyedCluster}
		}
		shaped := make([]FlowRule, len(g.at))
		for j, i := range g.at {
			shaped[j] = rules[i].normal()
		}
		l, err := kc.KeyedLimiter(shaped)
		if err == nil && l == nil {
			err = errNoLimiter
		}
		if err != nil {
			return nil, err
		}
		return &keyedClusterRule{l: l}, nil
	}
	q, err := flow.NewKeyedQPS(flow.KeyedQPSSettings{Windows: g.windows(rules), KeyMemory: mem, Clock: c})
	if err != nil {
		return nil, err
	}
	return &keyedRule{q: q}, nil
}

// windows are the group's rules as the windows of a flow.KeyedQPS.
func (g *keyGroup) windows(rules []FlowRule) []flow.KeyWindow {
	ws := make([]flow.KeyWindow, len(g.at))
	for j, i := range g.at {
		r := rules[i]
		ws[j] = flow.KeyWindow{Limit: r.Limit, Interval: r.interval(), Buckets: r.buckets(), Overrides: r.Overrides}
	}
	return ws
}

// setLimits gives a group's enforcer, taken over from the rules in force,
// its rules' limits and overrides.
func (g *keyGroup) setLimits(r rule, rules []FlowRule) {
	k, ok := r.(*keyedRule)
	if !ok {
		return // a cluster group is rebuilt when its limits change
	}
	_ = k.q.Set(g.windows(rules)) // valid: the rules passed Validate, the shape is the same
}

// KeyStat is what TopKeys says of one key. Key is cut to 64 bytes and
// made valid UTF-8. Allowed counts the key's requests in its first
// window's last interval. Blocked counts those refused in that window's
// current interval and the one before.
type KeyStat = flowstate.KeyStat

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
	b := g.snap.Load().by[name]
	if b == nil {
		return nil
	}
	for _, ch := range b.checks {
		if k, ok := ch.rule.(*keyedRule); ok {
			return flowstate.TopKeys(k.q, now, n, byBlocked)
		}
	}
	return nil
}
