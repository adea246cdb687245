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
	childRun      = 1500 * time.Millisecond
)

// child hammers the shared limit from its own process and prints every grant
// as "at n", at the Redis server's time in microseconds.
func child(addr string) int {
	start, _ := strconv.ParseInt(os.Getenv(childStartEnv), 10, 64)
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	c, err := New(rdb, WithInstances(3), WithTimeout(time.Second))
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
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	l.trace = func(at, n int64) {
		mu.Lock()
		fmt.Fprintln(out, at, n)
		mu.Unlock()
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	stop := time.Now().Add(childRun)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				l.Allow(bg)
			}
		})
	}
	wg.Wait()
	if s := c.Stats(); s.Fallbacks != 0 {
		fmt.Fprintf(os.Stderr, "%d decisions fell back\n", s.Fallbacks)
		return 1
	}
	return 0
}

// Three processes share one limit: no interval of its length, wherever it
// starts, holds more than the limit, counting every process's grants at the
// Redis server's time.
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
			t.Errorf("child %d was admitted nothing: the processes did not share the limit", i)
		}
	}
	most, end := busiest(all, childInterval.Microseconds())
	if most > childLimit {
		t.Fatalf("%d admitted in the interval ending at %dµs; the limit is %d", most, end, childLimit)
	}
	total := int64(0)
	for _, g := range all {
		total += g.n
	}
	if floor := int64(childLimit) * int64(childRun/childInterval-2) * childBuckets / (childBuckets + 1); total < floor {
		t.Errorf("admitted %d in %v; want at least %d under overload", total, childRun, floor)
	}
	t.Logf("3 processes: admitted %d in %v, at most %d in one interval", total, childRun, most)
}
