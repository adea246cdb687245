package slidegate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// A Problem is one thing wrong with a set of rules: which rule, which field,
// why, and where in a file.
type Problem struct {
	// Rule is the rule's place in its list, as BlockError.Rule names it:
	// "flow[2]" or "breakers[0]"; empty for a problem of the file or of
	// the set as a whole.
	Rule string
	// Resource is the rule's resource, when the rule names one.
	Resource string
	// Field is the rule's field as files name it ("limit", "max_wait").
	Field string
	// Reason says what is wrong, with the value.
	Reason string
	// Line is the line of the rules file the problem is on, when the rules
	// came from a file and the line is known; 0 otherwise.
	Line int
}

// Place names the rule and its resource: `flow[2] (resource "GET /a")`, or
// "" for a problem of the file or of the set as a whole.
func (p Problem) Place() string {
	switch {
	case p.Rule == "":
		return ""
	case p.Resource == "":
		return p.Rule
	case len(p.Resource) > 64:
		return fmt.Sprintf("%s (resource %q…)", p.Rule, p.Resource[:60])
	}
	return fmt.Sprintf("%s (resource %q)", p.Rule, p.Resource)
}

// String describes the problem: `line 4: flow[2] (resource "GET /a"):
// limit: -1 must not be negative`, leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		b.WriteString("line " + strconv.Itoa(p.Line) + ": ")
	}
	for _, part := range []string{p.Place(), p.Field} {
		if part != "" {
			b.WriteString(part + ": ")
		}
	}
	b.WriteString(p.Reason)
	return b.String()
}

// A RulesError lists every problem found in a set of rules. A guard given
// rules with problems keeps the rules it had.
type RulesError struct {
	// Source names where the rules came from (a file), or is empty.
	Source   string
	Problems []Problem
}

// Error lists the problems, one per line after the first.
func (e *RulesError) Error() string {
	var b strings.Builder
	b.WriteString("slidegate: invalid rules")
	if e.Source != "" {
		b.WriteString(" in " + e.Source)
	}
	b.WriteString(": " + strconv.Itoa(len(e.Problems)) + " problem")
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	for _, p := range e.Problems {
		b.WriteString("\n\t" + p.String())
	}
	return b.String()
}

// Validate checks every rule and returns a *RulesError listing every
// problem, or nil.
func (r Rules) Validate() error { return r.validate(judgeAll) }

// Whom validate has judge rules by building their enforcers: the
// limiters' and breakers' constructors judge a rule's fields together
// (bucket widths, interval splits), once each field is sound alone.
const (
	judgeAll = iota
	// judgeUnbuilt leaves out the rules that compile builds with the
	// constructor that would judge them, to the same verdict: a breaker,
	// and a flow rule that is neither per key nor a cluster rule (those
	// compile builds otherwise). SetRules then judges by the build itself.
	judgeUnbuilt
)

// validate is Validate, judging the rules that judge says.
func (r Rules) validate(judge int) error {
	var ps []Problem
	for i := range r.Flow {
		f := &r.Flow[i]
		ps = f.check("flow", i, ps, judge == judgeAll || !builtAlike(f))
	}
	for i, b := range r.Breakers {
		ps = b.check("breakers", i, ps, judge == judgeAll)
	}
	ps = sameNames(r, ps)
	ps = sharedClusterCounts(r.Flow, ps)
	ps = tooManyWindows(r.Flow, ps)
	if !r.Shadow { // every rule in shadow: none is enforced
		ps = mixedShadow(r.Flow, ps)
	}
	if len(ps) == 0 {
		return nil
	}
	return &RulesError{Problems: ps}
}

// builtAlike reports whether compile builds flow rule f's enforcer as
// validate judges it: with the same constructor and settings, so that the
// build refuses f if and only if the judging would.
func builtAlike(f *FlowRule) bool { return !f.PerKey && !f.Cluster }

// sharedClusterCounts finds cluster rules that would keep one count: a
// cluster keeps a count per resource, interval and buckets, which two such
// rules would each add every request to, and so each see twice.
func sharedClusterCounts(rules []FlowRule, into []Problem) []Problem {
	type count struct {
		resource string
		interval time.Duration
		buckets  int
		perKey   bool
	}
	first := make(map[count]int)
	for i, f := range rules {
		if !f.Cluster {
			continue
		}
		c := count{f.Resource, f.interval(), f.buckets(), f.PerKey}
		if j, ok := first[c]; ok {
			into = append(into, Problem{Rule: ruleAt("flow", i), Resource: f.Resource, Field: "cluster",
				Reason: fmt.Sprintf("flow[%d] is a cluster rule of the same resource, interval (%v) and buckets (%d): the two would keep one count in the cluster, each counting every request twice; give them different intervals, or keep one", j, c.interval, c.buckets)})
			continue
		}
		first[c] = i
	}
	return into
}

// tooManyWindows finds resources with more per-key QPS rules than are
// decided together.
func tooManyWindows(rules []FlowRule, into []Problem) []Problem {
	for _, g := range keyGroups(rules) {
		if len(g.at) > flowlimits.MaxKeyWindows {
			i := g.at[flowlimits.MaxKeyWindows]
			into = append(into, Problem{Rule: ruleAt("flow", i), Resource: rules[i].Resource, Field: "per_key",
				Reason: fmt.Sprintf("the resource has %d per-key QPS rules; at most %d are decided together", len(g.at), flowlimits.MaxKeyWindows)})
		}
	}
	return into
}

// mixedShadow finds resources whose per-key QPS rules, decided together,
// are some in shadow and some not.
func mixedShadow(rules []FlowRule, into []Problem) []Problem {
	for _, g := range keyGroups(rules) {
		first := rules[g.at[0]].Shadow
		for _, i := range g.at[1:] {
			if rules[i].Shadow != first {
				into = append(into, Problem{Rule: ruleAt("flow", i), Resource: rules[i].Resource, Field: "shadow",
					Reason: fmt.Sprintf("%v, but flow[%d] is %v: the per-key QPS rules of a resource are decided together, so all of them are in shadow or none", rules[i].Shadow, g.at[0], first)})
				break
			}
		}
	}
	return into
}

// ruleAt names the rule at index i of list: "flow[2]".
func ruleAt(list string, i int) string { return list + "[" + strconv.Itoa(i) + "]" }

// problems collects the problems of one rule, rule at of list in (its
// place is written only for a problem: most rules have none).
type problems struct {
	in       string
	at       int
	resource string
	list     []Problem
}

func (p *problems) add(field, format string, args ...any) {
	p.list = append(p.list, Problem{Rule: ruleAt(p.in, p.at), Resource: p.resource, Field: field, Reason: fmt.Sprintf(format, args...)})
}

// ruleName checks a rule's name.
func (p *problems) ruleName(name string) {
	if why := checkRuleName(name); why != "" {
		p.add("name", "%s", why)
	}
}

// name checks a resource's name.
func (p *problems) name(field, name string, required bool) {
	switch {
	case name == "":
		if required {
			p.add(field, "missing")
		}
	case name == OtherResource:
		p.add(field, "%q is the name of the resources the guard has no room for, not one a rule can name", name)
	case len(name) > bounds.MaxNameLength:
		p.add(field, "%d bytes: a resource's name is at most %d bytes long", len(name), bounds.MaxNameLength)
	}
}

// count checks a number of requests: from 0 to flowlimits.MaxLimit.
func (p *problems) count(field string, n int64) {
	switch {
	case n < 0:
		p.add(field, "%d must not be negative", n)
	case n > flowlimits.MaxLimit:
		p.add(field, "%d must be at most %d", n, int64(flowlimits.MaxLimit))
	}
}

func (p *problems) nonNegative(field string, d Duration) {
	if d < 0 {
		p.add(field, "%v must not be negative", d)
	}
}

// fieldOf returns the rule field a configuration error is about, or "":
// A flow configuration error names its setting as rule files name the field, and a
// breaker's window error names its interval or buckets.
func fieldOf(err error) string {
	var ce *config.Error
	if errors.As(err, &ce) {
		return ce.Field
	}
	var we *timegrid.WindowError
	if errors.As(err, &we) {
		return we.Arg
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return fe.field
	}
	return ""
}

// A fieldError is an error of the guard's own about one field of a rule.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }
