package compare

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/zeromicro/go-zero/core/limit"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/redisflow"
)

// The per-key cluster-wide rows: one decision for one key of many, through
// limits kept in Redis (on the shared redis-server of redis.go, each row on
// keys of its own), the limit never reached. The rows take 10,000 keys in
// turn, each once per 10,000 decisions, as a service's users might come;
// each Setup decides once for every key before the timer starts, so that
// the rows measure keys Redis holds. At a round trip's pace a key comes
// back every half second or so: a one-second window has moved on by a few
// buckets since, the common case of a key's traffic, and longer windows
// have not. script-µs/op is what Redis spends per decision, which a cluster
// runs out of first.
//
//   - slidegate redisflow: a KeyedLimiter (Cluster as in redislimit.go) of
//     one window, 10^6 per second in 10 buckets, and of three, with 10^8
//     per minute and 10^9 per hour: a string per window and key, all
//     decided in one EVALSHA.
//   - go-redis/redis_rate v10: Limiter.Allow with PerSecond(10^6), on a
//     Redis key per user key (GCRA: a string per key).
//   - go-zero core/limit: PeriodLimit.TakeCtx with the user key, quota
//     10^6 per 1s period (a fixed window: a counter per key and period).

func init() {
	Shapes = append(Shapes, redisKeysShape)
}

const (
	redisKeyCount  = 10_000        // keys taken in turn
	redisKeysLimit = 1_000_000     // per second: never reached
	redisKeysHour  = 1_000_000_000 // per hour, the three-window row's longest
)

var redisKeysShape = &Shape{
	ID:          "RedisKeys",
	Name:        "Allow 1 through Redis for one of 10,000 keys in turn, limit never reached",
	Unavailable: RedisUnavailable,
	Impls: []Impl{
		pingRow,
		{Name: "slidegate redisflow KeyedLimiter, 1 window", Role: Ours, Setup: func(b *testing.B) Op {
			return keyedLimiterRow(b, flow.KeyWindow{Limit: redisKeysLimit, Interval: time.Second})
		}},
		{Name: "slidegate redisflow KeyedLimiter, 3 windows", Role: Ours, Setup: func(b *testing.B) Op {
			return keyedLimiterRow(b,
				flow.KeyWindow{Limit: redisKeysLimit, Interval: time.Second},
				flow.KeyWindow{Limit: 100 * redisKeysLimit, Interval: time.Minute},
				flow.KeyWindow{Limit: redisKeysHour, Interval: time.Hour})
		}},
		{Name: "redis_rate Allow (GCRA), per key", Setup: func(b *testing.B) Op {
			lim := redis_rate.NewLimiter(goRedis(b, sharedRedis(b)))
			keys, per := redisUserKeys(redisKey("redis_rate")+":"), redis_rate.PerSecond(redisKeysLimit)
			next := redisKeyCursor()
			ctx := context.Background()
			return redisRow(b, "redis_rate", allowEvery, 1, warmKeys(func() int64 {
				res, err := lim.Allow(ctx, keys[next()], per)
				if err != nil {
					return -1
				}
				return int64(res.Allowed)
			}))
		}},
		{Name: "go-zero PeriodLimit.Take, per key", Setup: func(b *testing.B) Op {
			pl := limit.NewPeriodLimit(1, redisKeysLimit, zeroRedis(b), redisKey("go-zero-period")+":")
			keys, next := redisUserKeys(""), redisKeyCursor()
			ctx := context.Background()
			return redisRow(b, "PeriodLimit", allowEvery, 1, warmKeys(func() int64 {
				switch code, err := pl.TakeCtx(ctx, keys[next()]); {
				case err != nil:
					return -1
				case code == limit.Allowed || code == limit.HitQuota:
					return 1
				}
				return 0
			}))
		}},
	},
}

// keyedLimiterRow returns a redisflow KeyedLimiter's decision for the
// next key, under windows.
func keyedLimiterRow(b *testing.B, windows ...flow.KeyWindow) Op {
	rdb := goRedis(b, sharedRedis(b))
	c, err := redisflow.New(rdb, redisflow.WithPrefix("compare"), redisflow.WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	b.Cleanup(func() {
		if s := c.Stats(); s.Failures != 0 || s.Fallbacks != 0 {
			b.Errorf("redisflow: %d round trips failed, %d decisions fell back: want Redis deciding throughout", s.Failures, s.Fallbacks)
		}
	})
	l, err := c.NewKeyedLimiter(redisKey("slidegate-keyed"), windows)
	if err != nil {
		b.Fatal(err)
	}
	keys, next := redisUserKeys(""), redisKeyCursor()
	ctx := context.Background()
	return redisRow(b, "redisflow keyed", allowEvery, 1, warmKeys(func() int64 {
		d, _ := l.AllowKeyN(ctx, keys[next()], 1)
		return b2i(d.Allowed)
	}))
}

// warmKeys decides once for every key with op, and returns op, whose next
// decision is for the first key again.
func warmKeys(op Op) Op {
	for range redisKeyCount {
		op()
	}
	return op
}

// redisUserKeys returns the rows' user keys, each after prefix.
func redisUserKeys(prefix string) []string {
	keys := make([]string, redisKeyCount)
	for i := range keys {
		keys[i] = prefix + "user-" + strconv.Itoa(i)
	}
	return keys
}

// redisKeyCursor returns the index of the next key, taken in turn by the
// goroutines of a parallel row together.
func redisKeyCursor() func() int {
	var c atomic.Uint64
	return func() int { return int(c.Add(1) % redisKeyCount) }
}
