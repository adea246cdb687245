package redisflow

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/redistest"
)

// testTimeout is the cluster timeout of the tests that are not about
// timeouts: long enough that no round trip outlasts it on a loaded machine,
// so that Redis is never taken for down unless a test takes it down.
const testTimeout = 5 * time.Second

// latencySlack is what a call may take past its deadline on a loaded
// 2-core machine: the time to be scheduled again once the deadline has
// passed, and to fall back.
const latencySlack = 150 * time.Millisecond

// client returns a go-redis client of addr, closed when the test ends.
func client(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// cluster returns a Cluster over its own client of srv, closed when the test
// ends. Its timeout is testTimeout unless opts set one.
func cluster(t testing.TB, srv *redistest.Server, opts ...Option) *Cluster {
	t.Helper()
	c, err := New(client(t, srv.Addr), append([]Option{WithTimeout(testTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// limiter returns c's limiter, failing the test on an error.
func limiter(t testing.TB, c *Cluster, name string, limit int64, interval time.Duration, opts ...LimiterOption) *Limiter {
	t.Helper()
	l, err := c.NewLimiter(name, limit, interval, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A grant is permits counted at a time, in microseconds; n = 0 is a
// block.
type grant struct{ at, n int64 }

// grants collects grants and blocks from many goroutines.
type grants struct {
	mu              sync.Mutex
	list            []grant
	granted, blocks int
	first, last     int64 // the earliest and latest grant's time
}

func (g *grants) add(at, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.list = append(g.list, grant{at, n})
	if n == 0 {
		g.blocks++
		return
	}
	if g.granted == 0 || at < g.first {
		g.first = at
	}
	g.last = max(g.last, at)
	g.granted++
}

// overloaded reports whether the grants span at least span µs and some
// request was blocked.
func (g *grants) overloaded(span int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blocks > 0 && g.last-g.first >= span
}

// blockedOnlyWhenFull returns an error if a block of n permits came while
// the window held less than limit-n+1: the window of k+1 buckets of width
// µs that the block's time falls in the newest of. Every grant and block
// must be in list, at the Redis server's time (which orders them, the
// scripts running one at a time), with n the same for every request. It is
// the promise that the limit allows no fewer than it may.
func blockedOnlyWhenFull(list []grant, width, k, limit, n int64) error {
	list = slices.Clone(list)
	slices.SortFunc(list, func(a, b grant) int { return cmp.Compare(a.at, b.at) })
	sums := make([]int64, len(list)+1) // sums[i]: the permits granted in list[:i]
	for i, g := range list {
		sums[i+1] = sums[i] + g.n
	}
	for _, r := range list {
		if r.n != 0 {
			continue
		}
		from := (r.at/width - k) * width
		lo, _ := slices.BinarySearchFunc(list, from, func(g grant, at int64) int { return cmp.Compare(g.at, at) })
		hi, _ := slices.BinarySearchFunc(list, r.at+1, func(g grant, at int64) int { return cmp.Compare(g.at, at) })
		if held := sums[hi] - sums[lo]; held < limit-n+1 {
			return fmt.Errorf("a request for %d was blocked at %dµs while its window, from %dµs, held %d of %d", n, r.at, from, held, limit)
		}
	}
	return nil
}

// busiest returns the most permits granted in any interval of the given
// length (in µs), wherever it starts, and where it ends.
func busiest(list []grant, interval int64) (most, end int64) {
	list = slices.Clone(list)
	slices.SortFunc(list, func(a, b grant) int { return cmp.Compare(a.at, b.at) })
	var sum int64
	lo := 0
	for hi, g := range list {
		sum += g.n
		for list[lo].at <= g.at-interval {
			sum -= list[lo].n
			lo++
		}
		if sum > most {
			most, end = sum, list[hi].at
		}
	}
	return most, end
}

// waitFor polls cond until it holds or d passes, and reports whether it held
// (redistest.WaitFor).
func waitFor(d time.Duration, cond func() bool) bool { return redistest.WaitFor(d, cond) }

var bg = context.Background()

// quiet drops go-redis's own log lines (dial failures, which the outage
// tests cause on purpose).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	if addr := os.Getenv(childEnv); addr != "" {
		os.Exit(child(addr))
	}
	os.Exit(m.Run())
}
