package slidegate

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/slidegate/slidegate/internal/bounds"
)

// Named returns a copy of r in which every rule has its name, and every
// flow rule its Type ("qps" where it is left out). A rule's name is its
// own Name, or the one the guard gives a rule without one. A flow rule's
// default name is its type ("qps", "throttle", "concurrency", "shed",
// "adaptive"), with "_per_key" after it for a per-key rule. A breaker
// rule's is "breaker". When several rules of a resource would share a
// name, the second is "qps_2", the third "qps_3", in rule order, past any
// name a rule of the resource has of its own. So a default name survives
// a change of the rule's limit, or a rule added to another resource. Give
// rules names of their own to keep them through any edit.
//
// The names of r must be valid (Validate); Named leaves a name given twice
// as it is.
func (r Rules) Named() Rules {
	out := r.clone()
	flows, breakers := r.names()
	for i := range out.Flow {
		out.Flow[i].Name, out.Flow[i].Type = flows[i], out.Flow[i].flowType()
	}
	for i := range out.Breakers {
		out.Breakers[i].Name = breakers[i]
	}
	return out
}

// names returns the name of every flow rule and every breaker rule of r, as
// Named gives them.
func (r Rules) names() (flows, breakers []string) {
	if flows, breakers, ok := r.defaultNames(); ok {
		return flows, breakers
	}
	return r.numberedNames()
}

// numberedNames is names, for any rules.
func (r Rules) numberedNames() (flows, breakers []string) {
	flows, breakers = make([]string, len(r.Flow)), make([]string, len(r.Breakers))
	taken := map[[2]string]bool{} // resource, name
	for i, f := range r.Flow {
		if f.Name != "" {
			flows[i] = f.Name
			taken[[2]string{f.Resource, f.Name}] = true
		}
	}
	for i, b := range r.Breakers {
		if b.Name != "" {
			breakers[i] = b.Name
			taken[[2]string{b.Resource, b.Name}] = true
		}
	}
	name := func(resource, base string) string {
		n := base
		for k := 2; taken[[2]string{resource, n}]; k++ {
			n = base + "_" + strconv.Itoa(k)
		}
		taken[[2]string{resource, n}] = true
		return n
	}
	for i, f := range r.Flow {
		if f.Name == "" {
			base := string(f.flowType())
			if f.PerKey {
				base += "_per_key"
			}
			flows[i] = name(f.Resource, base)
		}
	}
	for i, b := range r.Breakers {
		if b.Name == "" {
			breakers[i] = name(b.Resource, "breaker")
		}
	}
	return flows, breakers
}

// breakerName returns the name of breaker rule i, as names gives it, from
// the rules of its resource alone: a breaker's change of state is told on
// the way of a request, which must not name every rule of the guard.
func (r Rules) breakerName(i int) string {
	b := r.Breakers[i]
	if b.Name != "" {
		return b.Name
	}
	var same Rules // the rules of b's resource
	for _, f := range r.Flow {
		if f.Resource == b.Resource {
			same.Flow = append(same.Flow, f)
		}
	}
	at := 0
	for j, x := range r.Breakers {
		if x.Resource == b.Resource {
			if j == i {
				at = len(same.Breakers)
			}
			same.Breakers = append(same.Breakers, x)
		}
	}
	_, names := same.names()
	return names[at]
}

// defaultNames returns the names of the rules of r as names does, when
// every rule's is its default and none needs a number: no rule has a name
// of its own, and no resource two rules of one default name. ok is false
// otherwise. It asks one map lookup of each rule's resource, where names
// asks several of the resource and the name.
func (r Rules) defaultNames() (flows, breakers []string, ok bool) {
	bases := defaultBases()
	const breakerBit = 1 << 15 // beside those of the kinds' bases (2 a kind)
	if len(bases) > 15 {
		return nil, nil, false
	}
	used := make(map[string]uint16, max(len(r.Flow), len(r.Breakers)))
	flows = make([]string, len(r.Flow))
	for i := range r.Flow {
		f := &r.Flow[i]
		k := slices.Index(kinds, f.kind())
		if f.Name != "" || k < 0 {
			return nil, nil, false
		}
		if f.PerKey {
			k = 2*k + 1
		} else {
			k = 2 * k
		}
		bit := uint16(1) << k
		if used[f.Resource]&bit != 0 {
			return nil, nil, false
		}
		used[f.Resource] |= bit
		flows[i] = bases[k]
	}
	breakers = make([]string, len(r.Breakers))
	for i := range r.Breakers {
		b := &r.Breakers[i]
		if b.Name != "" || used[b.Resource]&breakerBit != 0 {
			return nil, nil, false
		}
		used[b.Resource] |= breakerBit
		breakers[i] = "breaker"
	}
	return flows, breakers, true
}

// defaultBases returns the default names of flow rules, 2k for kind k and
// 2k+1 for a per-key rule of it: "qps", "qps_per_key", ...
var defaultBases = sync.OnceValue(func() []string {
	var b []string
	for _, k := range kinds {
		b = append(b, k.Name, k.Name+"_per_key")
	}
	return b
})

// ownNames returns the names the rules of r have of their own (Name), ""
// for those without.
func (r Rules) ownNames() (flows, breakers []string) {
	flows, breakers = make([]string, len(r.Flow)), make([]string, len(r.Breakers))
	for i, f := range r.Flow {
		flows[i] = f.Name
	}
	for i, b := range r.Breakers {
		breakers[i] = b.Name
	}
	return flows, breakers
}

// checkRuleName reports what is wrong with a rule's name, or "".
func checkRuleName(name string) string {
	switch {
	case name == "":
		return ""
	case len(name) > bounds.MaxRuleNameLength:
		return fmt.Sprintf("%q is %d bytes long; at most %d", name[:bounds.MaxRuleNameLength]+"…", len(name), bounds.MaxRuleNameLength)
	case !utf8.ValidString(name):
		return fmt.Sprintf("%q is not valid UTF-8", name)
	}
	for _, c := range name {
		if !unicode.IsPrint(c) {
			return fmt.Sprintf("%q has a character that does not print (%U)", name, c)
		}
	}
	if name != trimSpace(name) {
		return fmt.Sprintf("%q begins or ends with a space", name)
	}
	return ""
}

// trimSpace is strings.TrimSpace for the spaces IsPrint lets through.
func trimSpace(s string) string {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

// sameNames finds names given to two rules of one resource.
func sameNames(r Rules, into []Problem) []Problem {
	type named struct{ resource, name string }
	first := map[named]string{}
	note := func(list string, i int, resource, name string) {
		if name == "" {
			return
		}
		k, rule := named{resource, name}, ruleAt(list, i)
		if at, ok := first[k]; ok {
			into = append(into, Problem{Rule: rule, Resource: resource, Field: "name",
				Reason: fmt.Sprintf("%q is the name of %s too: the rules of a resource have names of their own", name, at)})
			return
		}
		first[k] = rule
	}
	for i, f := range r.Flow {
		note("flow", i, f.Resource, f.Name)
	}
	for i, b := range r.Breakers {
		note("breakers", i, b.Resource, b.Name)
	}
	return into
}
