// Package exported holds what the exporters of a guard's statistics (the
// Prometheus collector, the OpenTelemetry instruments) share: how a name
// becomes a label or attribute value, and how rules that would share one
// are told apart.
package exported

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Value returns s as a label or attribute value: s itself if it is valid
// UTF-8, else s with each invalid byte sequence made U+FFFD. Names that are
// not valid UTF-8 may so read the same.
func Value(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// RuleNames gives the rules of one family their rule values: their names,
// which are unique among the rules of a resource, made unique among those
// of its value (Value) too, for two data points with the same labels would
// fail a scrape or be one series with two values. The second rule of a
// name there is "qps#2", the third "qps#3", in the order asked, each the
// first such value no rule there has yet. The zero value is ready to use.
type RuleNames map[[2]string]bool // resource value, rule value → used

// Of returns the rule value of the rule named name, of a resource whose
// value is resource.
func (n *RuleNames) Of(resource, name string) string {
	if *n == nil {
		*n = RuleNames{}
	}
	v := name
	for i := 2; (*n)[[2]string{resource, v}]; i++ {
		v = name + "#" + strconv.Itoa(i)
	}
	(*n)[[2]string{resource, v}] = true
	return v
}
