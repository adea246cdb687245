package clusterkeys

import (
	"math"
	"testing"
)

func TestSumSaturatesWhereItWouldWrap(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{1, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{0, math.MaxInt64, math.MaxInt64},
	} {
		if got := Sum(c.a, c.b); got != c.want {
			t.Errorf("Sum(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
