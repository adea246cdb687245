package slidegate

import "testing"

// The share of a shed or adaptive rule left out is "resource" on
// InboundResource and "key" elsewhere (FlowRule.share): its default
// depends on the rule's resource. So its matchKey must be written with the
// resource it has, or it is the default of another resource.

// inboundShares are rules of InboundResource that differ only in how
// their share is spelt: left out, or spelt "resource" or "key".
func inboundShares() []FlowRule {
	var rs []FlowRule
	for _, typ := range []FlowType{AdaptiveRule, ShedRule} {
		for _, share := range []string{"", shareByResource, shareByKey} {
			rs = append(rs, FlowRule{Resource: InboundResource, Type: typ, Share: share, CPUThreshold: -1})
		}
	}
	return rs
}

func TestMatchKeysOfInboundRulesAreEqualWhenRuleKeysAre(t *testing.T) {
	rules := inboundShares()
	var k1, k2 keyer
	for _, a := range rules {
		for _, b := range rules {
			if a.Type != b.Type {
				continue
			}
			want := ruleKey(a) == ruleKey(b)
			if got := k1.flow(&a) == k2.flow(&b); got != want {
				t.Errorf("%s rules of share %q and %q: matchKeys equal %v, rule keys equal %v", a.Type, a.Share, b.Share, got, want)
			}
		}
	}
}

// An adaptive rule of InboundResource that shares its limit among
// resources (its default there) and one that shares it among keys are two
// rules: a reload from one to the other makes the second's enforcer, which
// shares by key.
func TestAnInboundRuleThatSharesByKeyDoesNotTakeOverOneThatSharesByResource(t *testing.T) {
	byResource := FlowRule{Resource: InboundResource, Type: AdaptiveRule}
	g, _ := newGuard(t, Rules{Flow: []FlowRule{byResource}})
	was := g.snap.Load().flows[0].(*adaptiveRule)
	if was.byKey {
		t.Fatal("an inbound adaptive rule that leaves its share out shares by key, want by resource")
	}
	byKey := byResource
	byKey.Share = shareByKey
	setRules(t, g, Rules{Flow: []FlowRule{byKey}})
	now := g.snap.Load().flows[0].(*adaptiveRule)
	if now == was || !now.byKey {
		t.Fatalf("after a reload to share %q: the enforcer in force before %v, sharing by key %v; want a new one that shares by key",
			shareByKey, now == was, now.byKey)
	}
}

// The same rule with its default share spelt out is the same rule: it
// keeps its enforcer, and what an adaptive rule has learnt.
func TestAnInboundRuleWithItsDefaultShareSpeltOutKeepsItsEnforcer(t *testing.T) {
	left := FlowRule{Resource: InboundResource, Type: AdaptiveRule}
	g, _ := newGuard(t, Rules{Flow: []FlowRule{left}})
	was := g.snap.Load().flows[0]
	spelt := left
	spelt.Share = shareByResource
	setRules(t, g, Rules{Flow: []FlowRule{spelt}})
	if g.snap.Load().flows[0] != was {
		t.Fatalf("the rule with its default share %q spelt out has a new enforcer: it is the same rule (ruleKey)", shareByResource)
	}
}
