// Package clusterkeys lets the rate limit service (module envoyrls) ask
// redisflow's keyed limiters what redisflow does not export: a key's room,
// counting nothing, and the keys of one request counted together, all or
// none. Package redisflow sets each func as it is initialized, before any
// package that imports it runs. A limiter is taken as an any: this package
// cannot name redisflow's types, for redisflow is another module that
// imports this one.
package clusterkeys

import (
	"context"
	"math"

	"github.com/slidegate/slidegate/flow"
)

// An Ask is N permits of Key under every window of Limiter, a
// *redisflow.KeyedLimiter. AllowAll sets Room.
type Ask struct {
	Limiter any
	Key     string
	N       int64
	// Room is what Key had left under every window, at least 0, before
	// AllowAll counted: Left's answer, read in the same step. It is not
	// set for an ask of no permits.
	Room int64
}

var (
	// Left returns how many permits key may take at now under every window
	// of l, a *redisflow.KeyedLimiter: the least, over the windows, of the
	// key's limit less what the window holds. It counts nothing. While
	// Redis cannot answer, it is the cluster's fallback's answer.
	Left func(ctx context.Context, l any, now int64, key string) int64
	// AllowAll counts every ask at now, all or none, and returns -1 and an
	// allowed decision; or the index of an ask refused and its decision,
	// nothing counted. Either way it sets each ask's Room. Every limiter
	// must be of one cluster. Asks of no permits are left out. While Redis
	// cannot answer, the cluster's fallback decides.
	AllowAll func(ctx context.Context, now int64, asks []Ask) (int, flow.Decision)
)

// Sum is a + b for counts of permits, which are not negative, saturating
// at math.MaxInt64 where the sum would wrap: a hostile count must not
// wrap a request's sum to one that fits.
func Sum(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
