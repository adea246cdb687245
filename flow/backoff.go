package flow

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff returns how long to wait before retry number retry+1, counting
// from 0. It is drawn uniformly from [0, min(ceiling, base × 2^retry)]: the
// "full jitter" of exponential backoff. So clients that failed together do
// not retry together. A negative retry, base or ceiling counts as 0. The
// doubling stops at ceiling without overflowing. Backoff is safe for
// concurrent use and allocates nothing.
func Backoff(retry int, base, ceiling time.Duration) time.Duration {
	base, ceiling, retry = max(base, 0), max(ceiling, 0), max(retry, 0)
	bound := ceiling
	if retry < 62 && base <= ceiling>>retry {
		bound = base << retry
	}
	// [0, bound], without bound+1 overflowing at the longest Duration.
	return time.Duration(rand.Int64N(int64(min(bound, math.MaxInt64-1)) + 1))
}
