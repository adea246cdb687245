package slidegate

import (
	"errors"
	"strings"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// A kind is a kind of flow rule (FlowRule.Type), all of it in one value:
// what readers and exporters of rules know of it (rulekind.Kind), which
// optional fields apply to it, its defaults, its own checks, and how its
// enforcer is made. Each kind's value sits in its rule_<kind>.go, beside
// its FlowType and the enforcer it makes, and is listed in kinds.
type kind struct {
	rulekind.Kind
	// fields are the optional fields that apply to the kind, by their
	// names in files (flowFields). A rule that sets another is refused.
	fields []string
	// interval and buckets are the defaults of FlowRule.Interval and
	// Buckets: 0 for a second and flowlimits.DefaultBuckets.
	interval time.Duration
	buckets  int
	// normal writes out the defaults a rule of the kind leaves out, so
	// that a rule and the same rule with a default spelled out are one
	// rule (see ruleKey). Nil: none.
	normal func(f *FlowRule)
	// check returns the problems of a rule of the kind beyond those of its
	// fields one by one, nil if none. (Returned, not added to a problems:
	// a pointer given to a function value escapes, and every rule would
	// allocate one.) Nil: none.
	check func(f *FlowRule) []kindProblem
	// build makes the enforcer of rule f, read as Validate leaves it.
	build func(f FlowRule, on builder) (rule, error)
}

// A kindProblem is a problem a kind's check finds: the field and why.
type kindProblem struct{ field, reason string }

// kinds are the kinds of flow rule, in the order messages list them. The
// first is the kind of a rule that leaves its type out. (Set by init: the
// kinds' functions read it.)
var kinds []*kind

func init() {
	kinds = []*kind{&qpsKind, &throttleKind, &concurrencyKind, &shedKind, &adaptiveKind}
	for _, k := range kinds {
		rulekind.Register(k.Kind)
	}
}

// kindOf returns the kind of type t, the first kind for "", or nil for a
// type that no kind has.
func kindOf(t FlowType) *kind {
	if t == "" {
		return kinds[0]
	}
	for _, k := range kinds {
		if k.Name == string(t) {
			return k
		}
	}
	return nil
}

// kindNames lists the kinds as a message does: "qps", "throttle" or "shed".
func kindNames() string {
	var b strings.Builder
	for i, k := range kinds {
		switch {
		case i == len(kinds)-1:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString(`"` + k.Name + `"`)
	}
	return b.String()
}

// A builder is what making a flow rule's enforcer needs from the guard.
type builder struct {
	clock clock.Clock // nil: clock.System
	// cluster keeps the counts of cluster rules. Nil: a cluster rule is
	// built as a local QPS rule of the same shape, to judge it.
	cluster Cluster
	cpu     func() float64  // the CPU shed rules read; nil: the guard reads none
	keys    *flow.KeyMemory // what per-key rules draw from; nil: each its own
	// judging says the rule is built only to have the limiters judge its
	// fields together: what only enforcing it needs is left out (a per-key
	// rule's overrides, which checkKeys judges, and its table of keys).
	judging bool
}

// buildFlow makes the rule that enforces flow rule f, read as Validate
// leaves it, by its kind; the error names what the limiter refused. A rule
// on another resource is returned without that resource's statistics,
// which binding it gives it.
func buildFlow(f FlowRule, on builder) (rule, error) {
	if on.clock == nil {
		on.clock = clock.System
	}
	if on.judging && f.PerKey {
		f.Overrides = nil
	}
	return f.kind().build(f, on)
}

// checkFlow has the limiters judge flow rule f's fields together, as
// buildFlow would, with a CPU that reads nothing: whether the guard reads
// one is the guard's to say, when it is given the rule.
func checkFlow(f FlowRule) error {
	_, err := buildFlow(f, builder{cpu: func() float64 { return 0 }, judging: true})
	return err
}

// The errors of a guard that cannot serve a rule.
var (
	errNoLimiter      = errors.New("the cluster made no limiter")
	errNoKeyedCluster = errors.New("the guard's cluster keeps no per-key limits (it is not a slidegate.KeyedCluster)")
	errNoCluster      = errors.New("the guard has no cluster to keep the counts in: make it with slidegate.WithCluster")
)

// defaultBuckets is the buckets of a rule of a kind without a default of
// its own.
const defaultBuckets = flowlimits.DefaultBuckets
