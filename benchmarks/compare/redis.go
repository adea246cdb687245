package compare

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/redistest"
)

// The Redis rows (redislimit.go) decide through a real redis-server, one for
// the whole process: started on a free loopback port by the first row that
// needs it, shared by the rows after it (each on keys of its own), and
// stopped by StopRedis, which the tests' TestMain and cmd/comparetable call
// at the end. One server rather than one per row, because go-zero keeps one
// client per address for the life of the process (core/stores/redis): a
// server per row would leave a client behind at every row, and one at a
// reused port would come back with its connections dead.

// redisServer is the process's redis-server.
var redisServer struct {
	mu      sync.Mutex
	started bool // once started, or once it failed to: not retried
	stopped bool
	err     error
	srv     *redistest.Server
	dir     string
	stats   *redis.Client // reads the server's command counts
}

// RedisUnavailable says why the Redis rows cannot run on this machine, or
// returns "" if they can: redis-server must be installed (in PATH).
func RedisUnavailable() string {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return "redis-server is not installed (apt-get install redis-server): the Redis rows need a real Redis, which they start on a free loopback port"
	}
	return ""
}

// sharedRedis returns the address of the process's redis-server, starting it
// on first use. It skips b when redis-server is not installed, and fails it
// when the server does not start or was stopped.
func sharedRedis(b *testing.B) string {
	b.Helper()
	if why := RedisUnavailable(); why != "" {
		b.Skip(why)
	}
	s := &redisServer
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		b.Fatal("compare: the shared redis-server was stopped (StopRedis)")
	}
	if !s.started {
		s.started = true
		s.err = startRedis()
	}
	if s.err != nil {
		b.Fatalf("compare: redis-server did not start: %v", s.err)
	}
	return s.srv.Addr
}

// StopRedis kills the redis-server the Redis rows started, if any, and
// removes its directory. Rows run after it fail. It is safe to call more
// than once.
func StopRedis() {
	s := &redisServer
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.stats != nil {
		s.stats.Close()
		s.stats = nil
	}
	if s.srv != nil {
		s.srv.Stop()
		s.srv = nil
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// startRedis starts redis-server on a free loopback port, without
// persistence. redisServer.mu is held.
func startRedis() (err error) {
	s := &redisServer
	if s.dir, err = os.MkdirTemp("", "compare-redis-"); err != nil {
		return err
	}
	if s.srv, err = redistest.Launch(s.dir); err != nil {
		return err
	}
	s.stats = redis.NewClient(&redis.Options{Addr: s.srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	return nil
}

// redisCounts is what the server has run so far, from INFO commandstats.
type redisCounts struct {
	trips int64 // commands sent by clients: one round trip each
	calls int64 // commands run by scripts (redis.call)
	usec  int64 // microseconds the server spent running scripts
}

// tripCommands are the commands counted as round trips: those the rows'
// clients send (scripts, PING, and a new connection's handshake), none of
// which a script runs. INFO, sent by the measurement itself, counts as
// neither; every other command is one a script ran.
var tripCommands = map[string]bool{
	"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "script": true,
	"ping": true, "hello": true, "client": true, "auth": true, "select": true,
}

// counts reads the server's command counts.
func counts(b *testing.B) redisCounts {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	redisServer.mu.Lock()
	rdb := redisServer.stats
	redisServer.mu.Unlock()
	if rdb == nil {
		b.Fatal("compare: no redis-server")
	}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatalf("compare: INFO commandstats: %v", err)
	}
	var c redisCounts
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		// cmdstat_evalsha:calls=12,usec=...; subcommands as cmdstat_client|setinfo.
		line, ok := strings.CutPrefix(sc.Text(), "cmdstat_")
		if !ok {
			continue
		}
		name, rest, _ := strings.Cut(line, ":")
		name, _, _ = strings.Cut(name, "|")
		var n, usec int64
		if _, err := fmt.Sscanf(rest, "calls=%d,usec=%d,", &n, &usec); err != nil {
			b.Fatalf("compare: INFO commandstats: %q: %v", sc.Text(), err)
		}
		if strings.HasPrefix(name, "eval") {
			c.usec += usec
		}
		switch {
		case name == "info":
		case tripCommands[name]:
			c.trips += n
		default:
			c.calls += n
		}
	}
	return c
}

// redisWant is what a Redis row's decisions must be.
type redisWant int

const (
	allowEvery redisWant = iota // the limit is never reached: every decision allowed
	blockMost                   // the limit was reached before the timer started
)

// redisRow checks op, a Redis row's decision (1 when allowed, 0 when
// blocked, -1 when it failed), and returns it with a check of every
// decision; to be called last in Setup. Before the timer starts it checks
// the first decision (allowEvery), or that the limit is reached within 3
// decisions (blockMost). After the run it reports, from the server's
// command counts,
//
//   - roundtrips/op: commands clients sent per decision (all clients: the
//     rows add no other traffic, and a slidegate Cluster's once-a-second
//     heartbeat is lost in the count),
//   - rediscalls/op: commands the scripts ran per decision, and
//   - decisions/s: decisions per second of benchmark time;
//
// and fails the row if a decision failed, if one was blocked (allowEvery),
// if more than a tenth were allowed (blockMost, over at least 1000
// decisions), or if there were fewer than minTrips round trips per decision
// (over at least 100): a limiter that fell back to deciding locally would be
// measured otherwise. The wrapper costs an indirect call per decision; its
// counters are touched only by a decision of the unexpected kind.
func redisRow(b *testing.B, name string, want redisWant, minTrips float64, op Op) Op {
	b.Helper()
	expect := int64(1)
	switch want {
	case allowEvery:
		if r := op(); r != 1 {
			b.Fatalf("%s: the first decision was %s; the limit is meant never to be reached", name, outcome(r))
		}
	case blockMost:
		expect = 0
		// The first takes the permit; a second may find a new one if the
		// limiter's window moved on in between.
		var r int64
		for range 3 {
			if r = op(); r != 1 {
				break
			}
		}
		if r != 0 {
			b.Fatalf("%s: the limit was not reached within 3 decisions (the last %s)", name, outcome(r))
		}
	}
	before := counts(b)
	var odd, failed atomic.Int64
	b.Cleanup(func() {
		after := counts(b)
		n := float64(b.N)
		trips := float64(after.trips-before.trips) / n
		b.ReportMetric(trips, "roundtrips/op")
		b.ReportMetric(float64(after.calls-before.calls)/n, "rediscalls/op")
		b.ReportMetric(float64(after.usec-before.usec)/n, "script-µs/op")
		b.ReportMetric(n/b.Elapsed().Seconds(), "decisions/s")
		switch k := odd.Load(); {
		case failed.Load() > 0:
			b.Errorf("%s: %d of %d decisions failed", name, failed.Load(), b.N)
		case want == allowEvery && k > 0:
			b.Errorf("%s: %d of %d decisions blocked; the limit is meant never to be reached", name, k, b.N)
		case want == blockMost && b.N >= 1000 && k > int64(b.N/10):
			b.Errorf("%s: %d of %d decisions allowed past the limit", name, k, b.N)
		}
		if b.N >= 100 && trips < minTrips*0.99 {
			b.Errorf("%s: %.3f round trips per decision, want at least %v: did it decide without Redis?", name, trips, minTrips)
		}
	})
	return func() int64 {
		r := op()
		if r != expect {
			if r < 0 {
				failed.Add(1)
			} else {
				odd.Add(1)
			}
		}
		return r
	}
}

// outcome names a Redis row's decision.
func outcome(r int64) string {
	switch r {
	case 1:
		return "allowed"
	case 0:
		return "blocked"
	}
	return "an error"
}

// redisKeys numbers the rows' keys, so that no two rows share a count.
var redisKeys atomic.Int64

// redisKey returns a key no other row uses.
func redisKey(lib string) string {
	return "compare-" + lib + "-" + strconv.FormatInt(redisKeys.Add(1), 10)
}

// goRedis returns a go-redis client of addr, closed when the row ends.
func goRedis(b *testing.B, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { rdb.Close() })
	return rdb
}
