package slidegate

import (
	"math"
	"time"

	"github.com/slidegate/slidegate/internal/breakerlimits"
)

// A matchKey is a rule's key (ruleKey) in two parts, its resource and the
// key of the rest of the rule, for a new set of rules to be matched
// against the rules in force: two rules of equal matchKeys have equal
// keys, and the other way round. The rest of a plain rule (a resource and
// a limit, or a resource, a strategy and its threshold) is the same for
// every rule of that limit or threshold: a keyer writes it once, not once
// for each of thousands of resources.
type matchKey struct{ resource, rest string }

// A keyer writes the matchKeys of rules, remembering the rest of the last
// plain rule's key of each list.
type keyer struct {
	buf []byte

	flowLimit int64
	flowRest  string // "": none yet

	plainBreaker struct {
		strategy  BreakerStrategy
		threshold uint64 // its bits: -0 is not 0
		count     int64
	}
	breakerRest string // "": none yet
}

// flow returns the matchKey of flow rule f.
func (k *keyer) flow(f *FlowRule) matchKey {
	if f.plain() {
		if k.flowRest == "" || k.flowLimit != f.Limit {
			k.flowLimit, k.flowRest = f.Limit, flowKey(&FlowRule{Limit: f.Limit}, &k.buf)
		}
		return matchKey{f.Resource, k.flowRest}
	}
	// Normal before the resource is left out: a default may follow from
	// it (an overload rule's share on InboundResource).
	rest := f.normal()
	rest.Resource = ""
	k.buf = rest.appendKey(k.buf[:0], false)
	return matchKey{f.Resource, string(k.buf)}
}

// breaker returns the matchKey of breaker rule b.
func (k *keyer) breaker(b *BreakerRule) matchKey {
	if b.plain() {
		p := &k.plainBreaker
		if bits := math.Float64bits(b.Threshold); k.breakerRest == "" || p.strategy != b.Strategy || p.threshold != bits || p.count != b.Count {
			p.strategy, p.threshold, p.count = b.Strategy, bits, b.Count
			k.breakerRest = breakerKey(&BreakerRule{Strategy: b.Strategy, Threshold: b.Threshold, Count: b.Count}, &k.buf)
		}
		return matchKey{b.Resource, k.breakerRest}
	}
	rest := *b
	rest.Resource = ""
	return matchKey{b.Resource, breakerKey(&rest, &k.buf)}
}

// A breakerShape is what a circuit keeps when its rule changes: the rule
// without its thresholds, the fields it takes in place (newThresholds).
// Two circuit rules of one shape differ only in those (but for their
// names and shadow, which a circuit keeps too). Its zero value is no
// shape.
type breakerShape struct {
	resource string
	strategy BreakerStrategy
	interval time.Duration
	buckets  int
}

// circuitShape returns the shape of breaker rule b, which is not an SRE
// breaker's: its window written out.
func circuitShape(b *BreakerRule) breakerShape {
	s := breakerShape{b.Resource, b.Strategy, time.Duration(b.Interval), b.Buckets}
	if s.interval == 0 {
		s.interval = breakerlimits.DefaultInterval
	}
	if s.buckets == 0 {
		s.buckets = breakerlimits.DefaultCircuitBuckets
	}
	return s
}
