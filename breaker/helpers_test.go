package breaker

import (
	"math"
	"strings"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func nanValue() float64 { return math.NaN() }
