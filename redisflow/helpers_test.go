package redisflow

import (
	"context"
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

// A grant is permits counted at a time, in microseconds.
type grant struct{ at, n int64 }

// grants collects grants from many goroutines.
type grants struct {
	mu   sync.Mutex
	list []grant
}

func (g *grants) add(at, n int64) {
	g.mu.Lock()
	g.list = append(g.list, grant{at, n})
	g.mu.Unlock()
}

// busiest returns the most permits granted in any interval of the given
// length (in µs), wherever it starts, and where it ends.
func busiest(list []grant, interval int64) (most, end int64) {
	list = slices.Clone(list)
	slices.SortFunc(list, func(a, b grant) int { return int(a.at - b.at) })
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

// waitFor polls cond until it holds or d passes, and reports whether it held.
// Redis keeps real time, so tests of what Redis does over time poll.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

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
