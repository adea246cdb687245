package redisflow

import (
	"context"

	"github.com/slidegate/slidegate/flow"
)

// Shorthands of the tests.

// allow is AllowN(ctx, 1).
func (l *Limiter) allow(ctx context.Context) flow.Decision { return l.AllowN(ctx, 1) }

// redisKey returns the limiter's key in Redis.
func (l *Limiter) redisKey() string { return l.keys[0] }

// allowKey is AllowKeyN(ctx, key, 1).
func (l *KeyedLimiter) allowKey(ctx context.Context, key string) (flow.Decision, int) {
	return l.AllowKeyN(ctx, key, 1)
}

// redisKeys returns the Redis keys of key's windows, in the order of the
// windows, as the limiter writes them.
func (l *KeyedLimiter) redisKeys(key string) []string { return l.keys(cut(key)) }
