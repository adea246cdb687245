package redisflow

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/redistest"
)

// Benchmarks of cluster-wide decisions against a real redis-server on
// loopback (internal/redistest: skipped when redis-server is not installed).
// Each starts its own server, so every run begins with empty keys. Besides
// ns/op, each reports
//
//   - roundtrips/op: the limiter's round trips to Redis per decision
//     (Stats().RoundTrips; the heartbeat's are not counted), and
//   - decisions/s: decisions per second of benchmark time, all goroutines
//     together in the parallel ones.
//
// The baselines, time.Now and a go-redis PING, serial and parallel, run in the
// same invocation so that ratios come from one run. See BENCHMARKS.md.
//
// The cluster's timeout is raised to 1s (default 50ms) so that a stall of a
// loaded machine does not send decisions to the fallback; a run in which any
// decision fell back, or any round trip failed, fails instead of reporting
// the fallback's speed.

// allowAll is the limit, per second, of the shapes meant to allow every
// decision: far above what one process decides, lease included.
const allowAll = 1_000_000_000

var sinkTime time.Time

// benchLimiter starts a redis-server, a Cluster over a client of it and one
// limiter of limit per interval, and makes one decision, which must be
// allowed, before the timer starts: it dials the connection and loads the
// script.
func benchLimiter(b *testing.B, limit int64, interval time.Duration, opts ...LimiterOption) (*Cluster, *Limiter) {
	b.Helper()
	srv := redistest.Start(b)
	c := cluster(b, srv, WithTimeout(time.Second))
	l := limiter(b, c, "bench", limit, interval, opts...)
	if d := l.allow(bg); !d.Allowed {
		b.Fatalf("first decision %+v: want it allowed", d)
	}
	return c, l
}

// measure resets the timer and returns the function that stops it, checks
// that Redis decided throughout and reports the metrics.
func measure(b *testing.B, c *Cluster) (stop func()) {
	b.Helper()
	trips := c.Stats().RoundTrips
	b.ReportAllocs()
	b.ResetTimer()
	return func() {
		b.StopTimer()
		s := c.Stats()
		if !s.Healthy || s.Failures != 0 || s.Fallbacks != 0 {
			b.Fatalf("stats %+v: want Redis deciding throughout, no failure, no fallback", s)
		}
		b.ReportMetric(float64(s.RoundTrips-trips)/float64(b.N), "roundtrips/op")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	}
}

// allowSerial makes b.N decisions from one goroutine and returns how many
// were allowed.
func allowSerial(b *testing.B, l *Limiter) int64 {
	var allowed int64
	for i := 0; i < b.N; i++ {
		if l.allow(bg).Allowed {
			allowed++
		}
	}
	return allowed
}

// allowParallel makes b.N decisions from GOMAXPROCS goroutines and returns
// how many were allowed.
func allowParallel(b *testing.B, l *Limiter) int64 {
	var allowed atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		var n int64
		for pb.Next() {
			if l.allow(bg).Allowed {
				n++
			}
		}
		allowed.Add(n)
	})
	return allowed.Load()
}

// decide measures b.N decisions, from one goroutine or GOMAXPROCS, and
// returns how many were allowed.
func decide(b *testing.B, c *Cluster, l *Limiter, parallel bool) int64 {
	stop := measure(b, c)
	defer stop()
	if parallel {
		return allowParallel(b, l)
	}
	return allowSerial(b, l)
}

// benchAllowed runs the shapes whose limit is never reached: every decision
// must be allowed.
func benchAllowed(b *testing.B, parallel bool, opts ...LimiterOption) {
	c, l := benchLimiter(b, allowAll, time.Second, opts...)
	allowed := decide(b, c, l, parallel)
	if allowed != int64(b.N) {
		b.Fatalf("allowed %d of %d decisions; the limit, %d per second, is meant never to be reached", allowed, b.N, allowAll)
	}
}

// Every decision a round trip: one EVALSHA of the limit script.
func BenchmarkLimiterAllow(b *testing.B) { benchAllowed(b, false) }

func BenchmarkLimiterAllowParallel(b *testing.B) { benchAllowed(b, true) }

// A lease of 100: one round trip per 100 decisions, the other 99 spent
// locally (the lease lives one bucket width, 40ms, which is far longer than
// it takes to spend it here).
func BenchmarkLimiterAllowLease(b *testing.B) { benchAllowed(b, false, WithLease(100, 0)) }

func BenchmarkLimiterAllowLeaseParallel(b *testing.B) {
	benchAllowed(b, true, WithLease(100, 0))
}

// benchBlocked runs the overload shapes: a limit of 1 per minute, taken
// before the timer starts, so that every decision measured is blocked. The
// first block is a round trip, made before the timer too; the limiter then
// keeps it until the window moves on, about a minute later, and blocks
// without a round trip.
func benchBlocked(b *testing.B, parallel bool) {
	c, l := benchLimiter(b, 1, time.Minute)
	if d := l.allow(bg); d.Allowed || d.Reason != flow.RateLimited || d.RetryAfter <= 0 {
		b.Fatalf("second decision %+v: want it blocked for the rate, with a RetryAfter", d)
	}
	allowed := decide(b, c, l, parallel)
	if allowed != 0 {
		b.Fatalf("allowed %d of %d decisions past a limit of 1 per minute", allowed, b.N)
	}
}

// The cached block: no round trip.
func BenchmarkLimiterAllowBlocked(b *testing.B) { benchBlocked(b, false) }

func BenchmarkLimiterAllowBlockedParallel(b *testing.B) { benchBlocked(b, true) }

// Baselines.

func BenchmarkBaselineTimeNow(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sinkTime = time.Now()
	}
}

// benchPing measures one PING round trip with go-redis on its own server:
// the floor of any decision taken to Redis.
func benchPing(b *testing.B, parallel bool) {
	srv := redistest.Start(b)
	rdb := client(b, srv.Addr)
	if err := rdb.Ping(bg).Err(); err != nil {
		b.Fatal(err)
	}
	var failed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if rdb.Ping(bg).Err() != nil {
					failed.Add(1)
				}
			}
		})
	} else {
		for i := 0; i < b.N; i++ {
			if rdb.Ping(bg).Err() != nil {
				failed.Add(1)
			}
		}
	}
	b.StopTimer()
	if n := failed.Load(); n != 0 {
		b.Fatalf("%d of %d PINGs failed", n, b.N)
	}
	b.ReportMetric(1, "roundtrips/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pings/s")
}

func BenchmarkBaselinePing(b *testing.B) { benchPing(b, false) }

func BenchmarkBaselinePingParallel(b *testing.B) { benchPing(b, true) }

// scriptTime returns what the server has spent running scripts by their
// digest so far (INFO commandstats: EVALSHA and EVALSHA_RO), in
// microseconds, and in how many calls.
func scriptTime(b *testing.B, rdb *redis.Client) (usec, calls int64) {
	b.Helper()
	info, err := rdb.Info(bg, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha")
		if !ok {
			continue
		}
		_, rest, _ = strings.Cut(rest, ":")
		var n, u int64
		if _, err := fmt.Sscanf(rest, "calls=%d,usec=%d,", &n, &u); err != nil {
			b.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		usec, calls = usec+u, calls+n
	}
	return usec, calls
}

// keyedWindows are the windows of the keyed benchmarks, never reached: 10^6
// per second, then 10^8 per minute and 10^9 per hour.
var keyedWindows = []flow.KeyWindow{
	{Limit: 1_000_000, Interval: time.Second},
	{Limit: 100_000_000, Interval: time.Minute},
	{Limit: 1_000_000_000, Interval: time.Hour},
}

// benchKeyed measures b.N decisions of a KeyedLimiter of the first windows
// of keyedWindows, from one goroutine, for the keys that key returns for
// each decision i, every one of which must be allowed, and reports besides
// the benchmark's metrics script-µs/op: what Redis spent running the script
// per decision (usec_per_call of EVALSHA in INFO commandstats). Before the
// timer, it decides once for each of the first warm keys.
func benchKeyed(b *testing.B, windows, warm int, key func(i int) string) {
	srv := redistest.Start(b)
	rdb := client(b, srv.Addr)
	c := cluster(b, srv, WithTimeout(time.Second), WithInstances(1))
	l := keyed(b, c, "bench", keyedWindows[:windows]...)
	for i := range max(warm, 1) {
		if d, j := l.allowKey(bg, key(i)); !d.Allowed {
			b.Fatalf("warming up: %+v by window %d; want allowed", d, j)
		}
	}
	usec, calls := scriptTime(b, rdb)
	stop := measure(b, c)
	var refused int
	for i := 0; i < b.N; i++ {
		if d, _ := l.allowKey(bg, key(i)); !d.Allowed {
			refused++
		}
	}
	stop()
	if refused != 0 {
		b.Fatalf("%d of %d decisions refused; the limits are meant never to be reached", refused, b.N)
	}
	u, n := scriptTime(b, rdb)
	b.ReportMetric(float64(u-usec)/float64(n-calls), "script-µs/op")
}

// keyNames returns n keys, user-0 to user-n-1.
func keyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkKeyedAllow decides for keys of three kinds, under 1 to 3
// windows: one hot key (every window counted in place), 10,000 keys in turn,
// each held by Redis (a key comes back after some tenths of a second: the
// one-second window has moved on by some buckets, and is rewritten; the
// others are counted in place), and a new key every decision (every window
// written anew).
func BenchmarkKeyedAllow(b *testing.B) {
	for windows := 1; windows <= len(keyedWindows); windows++ {
		b.Run(fmt.Sprintf("windows=%d/hot", windows), func(b *testing.B) {
			benchKeyed(b, windows, 1, func(int) string { return "user-1" })
		})
		b.Run(fmt.Sprintf("windows=%d/keys=10000", windows), func(b *testing.B) {
			keys := keyNames(10_000)
			benchKeyed(b, windows, len(keys), func(i int) string { return keys[i%len(keys)] })
		})
		b.Run(fmt.Sprintf("windows=%d/new", windows), func(b *testing.B) {
			keys := keyNames(b.N + 1)
			benchKeyed(b, windows, 0, func(i int) string { return keys[i+1] })
		})
	}
}

// The cached refusal: a key over its limit is refused without a round
// trip until its window moves on.
func BenchmarkKeyedAllowRefused(b *testing.B) {
	srv := redistest.Start(b)
	c := cluster(b, srv, WithTimeout(time.Second), WithInstances(1))
	l := keyed(b, c, "bench", flow.KeyWindow{Limit: 1, Interval: time.Minute})
	l.allowKey(bg, "user-1")
	if d, _ := l.allowKey(bg, "user-1"); d.Allowed {
		b.Fatal("the second decision of a limit of 1 per minute was allowed")
	}
	stop := measure(b, c)
	for i := 0; i < b.N; i++ {
		if d, _ := l.allowKey(bg, "user-1"); d.Allowed {
			b.Fatal("allowed past the limit")
		}
	}
	stop()
}
