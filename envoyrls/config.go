package envoyrls

import (
	"slices"
	"strings"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// A Config is a set of domains and their rules, as [LoadDir] reads them
// from a directory of envoyproxy/ratelimit's YAML files. It never changes
// once loaded, and is safe for concurrent use.
type Config struct {
	domains map[string]*level
	files   int
}

// Domains returns the names of the config's domains, sorted.
func (c *Config) Domains() []string {
	names := make([]string, 0, len(c.domains))
	for d := range c.domains {
		names = append(names, d)
	}
	slices.Sort(names)
	return names
}

// A level is the descriptors of one depth under a domain or a descriptor:
// by "key" or "key_value" exactly, then the patterns whose value holds a
// '*', in the order of the file.
type level struct {
	exact map[string]*descNode
	wild  []wildNode
}

type wildNode struct {
	parts []string // the pattern "key_value" split at each '*'
	node  *descNode
}

// A descNode is one descriptor of a file.
type descNode struct {
	rule     *rule // nil without rate_limit
	children level
	// share makes every value that matches the pattern count as one: the
	// pattern's value stands for them in the key.
	share   bool
	pattern string // the value with its '*', when share
	// name is the descriptor in its rule's stats key: "key" or "key_value"
	// as the file gives them. toMetric puts the request's value there
	// instead, for a descriptor matched by its key alone or a pattern.
	name     string
	toMetric bool
}

// A rule is a descriptor's rate_limit.
type rule struct {
	// id names the rule: the domain and the path of "key" or "key_value"
	// to its descriptor, joined by dots, as envoyproxy/ratelimit's stats
	// name it. Limits kept across reloads follow it.
	id        string
	unlimited bool
	unit      rlsv3.RateLimitResponse_RateLimit_Unit
	limit     uint32
	shadow    bool
	quota     bool
	name      string
	replaces  []string
	detailed  bool                               // a stats series per value
	toMetric  bool                               // a descriptor on its path has value_to_metric
	answer    *rlsv3.RateLimitResponse_RateLimit // current_limit, shared by every answer
}

// unitLength is how long each unit lasts, as envoyproxy/ratelimit counts
// it: a month is 30 days, a year 365.
func unitLength(u rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	const day = 24 * time.Hour
	switch u {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return time.Second
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return time.Minute
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return time.Hour
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return day
	case rlsv3.RateLimitResponse_RateLimit_WEEK:
		return 7 * day
	case rlsv3.RateLimitResponse_RateLimit_MONTH:
		return 30 * day
	case rlsv3.RateLimitResponse_RateLimit_YEAR:
		return 365 * day
	}
	return 0
}

// A match is the rule a descriptor found and, per entry, the value that
// stands for it in the descriptor's key: its own, or a shared pattern's.
type match struct {
	rule  *rule
	share []string // nil unless an entry matched a share_threshold pattern; "" where none did
}

// find returns the rule of the descriptor's entries in domain d: each entry
// looked up at its depth by key and value, then by the patterns, then by
// key alone; the rule of the descriptor the last entry found, if any. A
// descriptor with more entries than the rules go deep finds none, as
// envoyproxy/ratelimit's does.
func (l *level) find(entries []*commonv3.RateLimitDescriptor_Entry) match {
	var m match
	cur := l
	for i, e := range entries {
		n, how := cur.step(e)
		if n == nil {
			return match{}
		}
		if how == byPattern && n.share {
			if m.share == nil {
				m.share = make([]string, len(entries))
			}
			m.share[i] = n.pattern
		}
		if i == len(entries)-1 {
			m.rule = n.rule
			return m
		}
		if len(n.children.exact) == 0 && len(n.children.wild) == 0 {
			return match{}
		}
		cur = &n.children
	}
	return match{}
}

// How a descriptor of the file matched a request's entry.
const (
	byValue = iota
	byPattern
	byKey
)

// step finds the descriptor of the level that entry e matches: by key and
// value, then by the patterns in order, then by key alone.
func (l *level) step(e *commonv3.RateLimitDescriptor_Entry) (*descNode, int) {
	kv := e.Key + "_" + e.Value
	if n := l.exact[kv]; n != nil {
		return n, byValue
	}
	for _, w := range l.wild {
		if wildMatch(w.parts, kv) {
			return w.node, byPattern
		}
	}
	return l.exact[e.Key], byKey
}

// statsKey returns the stats key of a descriptor whose rule asks for one
// by value, as envoyproxy/ratelimit names it. With detailed, each entry
// is its key and value (a shared pattern standing for the values it
// matches). Otherwise each is its descriptor's name, but where
// value_to_metric puts the request's value.
func (l *level) statsKey(domain string, entries []*commonv3.RateLimitDescriptor_Entry, detailed bool) string {
	var b strings.Builder
	b.WriteString(domain)
	cur := l
	for _, e := range entries {
		n, how := cur.step(e)
		if n == nil {
			break
		}
		b.WriteByte('.')
		switch {
		case detailed && how == byPattern && n.share:
			b.WriteString(e.Key + "_" + n.pattern)
		case detailed:
			b.WriteString(e.Key)
			if e.Value != "" {
				b.WriteString("_" + e.Value)
			}
		case how == byPattern && n.share:
			b.WriteString(e.Key + "_" + n.pattern)
		case how != byValue && n.toMetric:
			b.WriteString(e.Key)
			if e.Value != "" {
				b.WriteString("_" + e.Value)
			}
		default:
			b.WriteString(n.name)
		}
		cur = &n.children
	}
	return b.String()
}

// wildMatch reports whether s matches the pattern split at its '*'s, each
// '*' standing for any run of bytes, none included.
func wildMatch(parts []string, s string) bool {
	if len(parts) == 1 {
		return parts[0] == s
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	rest := s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}
