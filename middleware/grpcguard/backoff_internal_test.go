package grpcguard

import (
	"math"
	"testing"
	"time"
)

// A backoff bound at the longest Duration does not overflow.
func TestBackoffAtTheLongestDuration(t *testing.T) {
	for _, p := range []RetryPolicy{
		{BaseBackoff: time.Millisecond, MaxBackoff: math.MaxInt64},
		{BaseBackoff: math.MaxInt64, MaxBackoff: math.MaxInt64},
	} {
		for retry := range 70 {
			if d := p.backoff(retry); d < 0 || d > p.MaxBackoff {
				t.Fatalf("%+v: backoff(%d) = %v, want within [0, MaxBackoff]", p, retry, d)
			}
		}
	}
}
