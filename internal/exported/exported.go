// Package exported holds what the exporters of a guard's statistics (the
// Prometheus collector, the OpenTelemetry instruments) share: how a name
// becomes a label or attribute value, and how rules that would share one
// are told apart.
package exported

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slidegate/slidegate/internal/latbin"
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

// The bins of a window.SketchTotals: how many there are, the first latency
// none holds (2^38 ns), and the largest relative error of the latency a
// window.Sketch reports for a bin (4.43%).
const (
	Bins     = latbin.Bins
	BinRange = time.Duration(latbin.Range)
	BinError = latbin.Error
)

// BinLow returns the lowest latency that bin i of a window.SketchTotals
// holds, exactly; i = Bins gives BinRange.
func BinLow(i int) time.Duration { return time.Duration(latbin.Low(i)) }

// BinValue returns the latency a window.Sketch reports for bin i: the
// midpoint of a linear bin, the geometric midpoint of the others.
func BinValue(i int) time.Duration { return time.Duration(latbin.Value(i)) }

// CheckBounds checks bounds, the upper bounds of the buckets of a histogram
// made from a window.Sketch's bins: at most most of them, each above zero
// and below BinRange, and each above the one before. It returns
// an error naming the first that is not ("buckets[2] = 0s: a bound must be
// above zero"), or nil.
func CheckBounds(bounds []time.Duration, most int) error {
	if len(bounds) > most {
		return fmt.Errorf("buckets: %d bounds, more than the %d a histogram takes", len(bounds), most)
	}
	for i, b := range bounds {
		switch {
		case b <= 0:
			return fmt.Errorf("buckets[%d] = %v: a bound must be above zero", i, b)
		case b >= BinRange:
			return fmt.Errorf("buckets[%d] = %v: a bound must be below %v, the longest response time the guard bins", i, b, BinRange)
		case i > 0 && b <= bounds[i-1]:
			return fmt.Errorf("buckets[%d] = %v: a bound must be above the one before, %v", i, b, bounds[i-1])
		}
	}
	return nil
}
