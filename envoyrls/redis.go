package envoyrls

import (
	"context"
	"crypto/sha256"
	"strconv"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/clusterkeys"
	"github.com/slidegate/slidegate/redisflow"
)

// shared keeps windows in Redis through a redisflow.Cluster, shared by
// every service given a cluster over the same Redis and prefix: a
// redisflow.KeyedLimiter per shape, named by its limit and interval, so
// that every instance's window of a shape is the same Redis strings. A
// descriptor's key is the limiter's key.
//
// It counts a request's windows together (jointly): one run of
// redisflow's keyed script over every window the request is counted in,
// all or none, atomic in Redis, which answers what each window had left
// too (on a Redis Cluster, a run per slot). While Redis cannot answer, the
// cluster's fallback decides.
type shared struct {
	c *redisflow.Cluster
}

func (b *shared) window(limit int64, interval time.Duration) (window, error) {
	l, err := b.c.NewKeyedLimiter("rls:"+strconv.FormatInt(limit, 10)+":"+interval.String(),
		[]flow.KeyWindow{{Limit: limit, Interval: interval, Buckets: windowBuckets}})
	if err != nil {
		return nil, err
	}
	return &sharedWindow{l: l}, nil
}

type sharedWindow struct {
	l *redisflow.KeyedLimiter
}

func (w *sharedWindow) left(now int64, key string) int64 {
	return clusterkeys.Left(context.Background(), w.l, now, redisKey(key))
}

func (w *sharedWindow) allow(now int64, key string, n int64) flow.Decision {
	d, _ := w.l.AllowKeyNAt(context.Background(), now, redisKey(key), n)
	return d
}

func (b *shared) allowAll(now int64, asks []ask) (int, flow.Decision) {
	set := make([]clusterkeys.Ask, len(asks))
	for i, a := range asks {
		set[i] = clusterkeys.Ask{Limiter: a.w.(*sharedWindow).l, Key: redisKey(a.key), N: a.n}
	}
	k, d := clusterkeys.AllowAll(context.Background(), now, set)
	for i := range asks {
		asks[i].room = set[i].Room
	}
	return k, d
}

// maxRedisKey is the longest key redisflow tells apart from the others: it
// counts the longer ones by their first maxRedisKey bytes.
const maxRedisKey = 256

// redisKey is key as the shared windows count it: itself, or, when longer
// than redisflow tells apart, its first bytes and the SHA-256 of the whole,
// so that two long keys of one prefix keep counts of their own.
func redisKey(key string) string {
	if len(key) <= maxRedisKey {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return key[:maxRedisKey-len(sum)] + string(sum[:])
}
