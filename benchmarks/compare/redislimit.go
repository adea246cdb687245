package compare

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/zeromicro/go-zero/core/limit"
	"github.com/zeromicro/go-zero/core/logx"
	zredis "github.com/zeromicro/go-zero/core/stores/redis"

	"github.com/slidegate/slidegate/redisflow"
)

// The cluster-wide rate limiters' rows: one decision through a limit kept in
// Redis, on one redis-server on loopback shared by every row (redis.go), each
// row on keys of its own. Every limiter decides with one Lua script run by
// its digest (EVALSHA), so the rows compare a round trip plus what the script
// does in Redis, and what the library does around it. Each row reports
// roundtrips/op, rediscalls/op (the commands its script runs) and
// decisions/s; the baseline is a bare PING with go-redis.
//
// In RedisAllow the limit is never reached, so every decision is allowed
// and the rows measure the round-trip path: 10^6 per second, beyond any
// round-trip row here (and low enough that redis_rate's floating-point
// arithmetic still counts: see below), except the leasing row, 10^9,
// which decides locally faster than 10^6 per second. In RedisBlock the
// limit, 1 per second, was reached before the timer started, and the rows
// measure blocking under overload.
//
// The libraries, with their defaults otherwise:
//
//   - slidegate redisflow: a Cluster over a go-redis client with
//     ContextTimeoutEnabled, its timeout raised from 50ms to 1s so that a
//     stall of a loaded machine does not send decisions to the fallback (a
//     row whose Cluster fell back fails), discovering instances with its
//     heartbeat (one round trip a second); a Limiter over 1s in 25 buckets,
//     without a lease and with WithLease(100, 0).
//   - go-redis/redis_rate v10: Limiter.Allow with PerSecond(n) (GCRA, burst
//     n), over a go-redis client with ContextTimeoutEnabled. Its script keeps
//     the theoretical arrival time as a float of seconds since 2017, whose
//     step at today's dates is about 60ns: at 10^9 per second (1ns per
//     request) a request no longer moves it, and the script skips its SET.
//   - go-zero core/limit: PeriodLimit.TakeCtx (a fixed window: INCRBY, and
//     EXPIRE on the window's first request) and TokenLimiter.AllowCtx (a
//     token bucket refilled by whole seconds of the caller's clock: two GETs
//     and two SETEXs), over core/stores/redis.NewRedis, whose client goes
//     through go-zero's breaker and its duration, metrics and tracing hooks
//     on every command, as in service. TokenLimiter starts a goroutine only
//     when Redis fails (it then decides with an in-process x/time/rate
//     limiter and pings Redis every 100ms until it answers); a row in which
//     it made fewer round trips than decisions fails. go-zero's log, which
//     would report slow calls to stdout, goes to stderr.

const (
	redisAllowLimit = 1_000_000     // per second: never reached by a round-trip row
	redisLeaseLimit = 1_000_000_000 // per second: never reached by the leasing row
	redisBlockRate  = 1             // per second, reached before the timer starts
	redisLease      = 100
)

var redisAllow = &Shape{
	ID:          "RedisAllow",
	Name:        "Allow 1 through Redis, limit never reached",
	Unavailable: RedisUnavailable,
	Impls: []Impl{
		pingRow,
		{Name: "slidegate redisflow Limiter", Role: Ours, Setup: func(b *testing.B) Op {
			return redisflowRow(b, allowEvery, 1, redisAllowLimit)
		}},
		{Name: "slidegate redisflow Limiter, lease 100", Role: Ours, Setup: func(b *testing.B) Op {
			return redisflowRow(b, allowEvery, 0, redisLeaseLimit, redisflow.WithLease(redisLease, 0))
		}},
		{Name: "redis_rate Allow (GCRA)", Setup: func(b *testing.B) Op {
			return redisRateRow(b, allowEvery, redisAllowLimit)
		}},
		{Name: "go-zero PeriodLimit.Take", Setup: func(b *testing.B) Op {
			return periodLimitRow(b, allowEvery, redisAllowLimit)
		}},
		{Name: "go-zero TokenLimiter.Allow", Setup: func(b *testing.B) Op {
			return tokenLimiterRow(b, allowEvery, redisAllowLimit)
		}},
	},
}

var redisBlock = &Shape{
	ID:          "RedisBlock",
	Name:        "Allow 1 through Redis, limit 1/s reached",
	Unavailable: RedisUnavailable,
	Impls: []Impl{
		pingRow,
		// The first block is a round trip; the limiter caches it until
		// its window moves on, about 1s later.
		{Name: "slidegate redisflow Limiter", Role: Ours, Setup: func(b *testing.B) Op {
			return redisflowRow(b, blockMost, 0, redisBlockRate)
		}},
		{Name: "redis_rate Allow (GCRA)", Setup: func(b *testing.B) Op {
			return redisRateRow(b, blockMost, redisBlockRate)
		}},
		{Name: "go-zero PeriodLimit.Take", Setup: func(b *testing.B) Op {
			return periodLimitRow(b, blockMost, redisBlockRate)
		}},
		{Name: "go-zero TokenLimiter.Allow", Setup: func(b *testing.B) Op {
			return tokenLimiterRow(b, blockMost, redisBlockRate)
		}},
	},
}

// pingRow is the Redis shapes' baseline: one PING with go-redis.
var pingRow = Impl{Name: "go-redis Ping (1 round trip)", Role: Baseline, Setup: func(b *testing.B) Op {
	rdb := goRedis(b, sharedRedis(b))
	ctx := context.Background()
	return redisRow(b, "Ping", allowEvery, 1, func() int64 {
		if rdb.Ping(ctx).Err() != nil {
			return -1
		}
		return 1
	})
}}

// redisflowRow returns a redisflow Limiter's decision, limit per second.
func redisflowRow(b *testing.B, want redisWant, minTrips float64, limit int64, opts ...redisflow.LimiterOption) Op {
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
	l, err := c.NewLimiter(redisKey("slidegate"), limit, time.Second, opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	return redisRow(b, "redisflow", want, minTrips, func() int64 { return b2i(l.AllowN(ctx, 1).Allowed) })
}

// redisRateRow returns a redis_rate decision, rate per second.
func redisRateRow(b *testing.B, want redisWant, rate int) Op {
	lim := redis_rate.NewLimiter(goRedis(b, sharedRedis(b)))
	key, per := redisKey("redis_rate"), redis_rate.PerSecond(rate)
	ctx := context.Background()
	return redisRow(b, "redis_rate", want, 1, func() int64 {
		res, err := lim.Allow(ctx, key, per)
		if err != nil {
			return -1
		}
		return int64(res.Allowed)
	})
}

// periodLimitRow returns a go-zero PeriodLimit decision, quota per 1s
// period; a request that reaches the quota (HitQuota) is allowed.
func periodLimitRow(b *testing.B, want redisWant, quota int) Op {
	pl := limit.NewPeriodLimit(1, quota, zeroRedis(b), redisKey("go-zero-period")+":")
	ctx := context.Background()
	return redisRow(b, "PeriodLimit", want, 1, func() int64 {
		switch code, err := pl.TakeCtx(ctx, "k"); {
		case err != nil:
			return -1
		case code == limit.Allowed || code == limit.HitQuota:
			return 1
		}
		return 0
	})
}

// tokenLimiterRow returns a go-zero TokenLimiter decision, rate per second
// with a burst of the same.
func tokenLimiterRow(b *testing.B, want redisWant, rate int) Op {
	tl := limit.NewTokenLimiter(rate, rate, zeroRedis(b), redisKey("go-zero-token"))
	ctx := context.Background()
	return redisRow(b, "TokenLimiter", want, 1, func() int64 { return b2i(tl.AllowCtx(ctx)) })
}

// quietGoZero sends go-zero's log to stderr, out of comparetable's table.
var quietGoZero = sync.OnceFunc(func() { logx.SetWriter(logx.NewWriter(os.Stderr)) })

// zeroRedis returns a go-zero Redis of the shared server. go-zero keeps one
// client per address for the life of the process, so every go-zero row uses
// the same connections; NewRedis pings the server once.
func zeroRedis(b *testing.B) *zredis.Redis {
	quietGoZero()
	r, err := zredis.NewRedis(zredis.RedisConf{Host: sharedRedis(b), Type: zredis.NodeType})
	if err != nil {
		b.Fatal(err)
	}
	return r
}
