package redisflow

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/redistest"
)

// The processes of TestNoIntervalHoldsMoreThanTheLimitAcrossProcesses are
// this test binary, run with childEnv set to the Redis address: TestMain
// then runs child instead of the tests.
const (
	childEnv      = "REDISFLOW_TEST_CHILD_ADDR"
	childStartEnv = "REDISFLOW_TEST_CHILD_START" // Unix nanoseconds: when to start, together
	childLimit    = 40
	childInterval = 200 * time.Millisecond
	childBuckets  = 8
	childSpan     = 6 // intervals each child's grants span, at least
)

// child hammers the shared limit from its own process, until its grants span
// childSpan intervals and it was blocked (at most a minute), and prints every
// answer from Redis as "at n", at the Redis server's time in microseconds (n
// = 0: blocked). Its timeout is the tests' (testTimeout), so that no
// round trip outlasts it: a grant that a timed-out round trip made would go
// unseen.
func child(addr string) int {
	start, _ := strconv.ParseInt(os.Getenv(childStartEnv), 10, 64)
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	c, err := New(rdb, WithInstances(3), WithTimeout(testTimeout))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer c.Close()
	l, err := c.NewLimiter("processes", childLimit, childInterval, WithBuckets(childBuckets))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	g := &grants{}
	l.trace = g.add
	time.Sleep(time.Until(time.Unix(0, start)))
	span := childSpan * childInterval.Microseconds()
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !g.overloaded(span) && time.Now().Before(deadline) {
				l.allow(bg)
			}
		})
	}
	wg.Wait()
	out := bufio.NewWriter(os.Stdout)
	for _, x := range g.list {
		fmt.Fprintln(out, x.at, x.n)
	}
	out.Flush()
	switch s := c.Stats(); {
	case s.Failures != 0 || s.Fallbacks != 0:
		fmt.Fprintf(os.Stderr, "stats %+v: want every decision taken by Redis\n", s)
		return 1
	case !g.overloaded(span):
		fmt.Fprintf(os.Stderr, "in a minute, grants spanned %dµs of %dµs wanted, with %d blocks\n", g.last-g.first, span, g.blocks)
		return 1
	}
	return 0
}

// Three processes share one limit: no interval of its length, wherever it
// starts, holds more than the limit, counting every process's grants at the
// Redis server's time; and no request is blocked while its window holds less
// than the limit.
func TestNoIntervalHoldsMoreThanTheLimitAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	start := time.Now().Add(500 * time.Millisecond) // past the children's start-up
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+srv.Addr, childStartEnv+"="+strconv.FormatInt(start.UnixNano(), 10))
		var out, errs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
		t.Cleanup(func() {
			if errs.Len() > 0 {
				t.Logf("child: %s", errs.String())
			}
		})
	}
	var all []grant
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		var mine int64
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			var g grant
			if _, err := fmt.Sscan(sc.Text(), &g.at, &g.n); err != nil {
				t.Fatalf("child %d printed %q: %v", i, sc.Text(), err)
			}
			all, mine = append(all, g), mine+g.n
		}
		if mine == 0 {
			t.Errorf("child %d was allowed nothing: the processes did not share the limit", i)
		}
	}
	most, end := busiest(all, childInterval.Microseconds())
	if most > childLimit {
		t.Fatalf("%d allowed in the interval ending at %dµs; the limit is %d", most, end, childLimit)
	}
	width := (childInterval / childBuckets).Microseconds()
	if err := blockedOnlyWhenFull(all, width, childBuckets, childLimit, 1); err != nil {
		t.Error(err)
	}
	total, blocks := int64(0), 0
	for _, g := range all {
		total += g.n
		if g.n == 0 {
			blocks++
		}
	}
	t.Logf("3 processes: allowed %d, at most %d in one interval; %d blocks", total, most, blocks)
}
