// Command rlstable runs slidegate serve beside envoyproxy/ratelimit, both
// as processes answering Envoy's rate limit API over gRPC, from one
// configuration directory and one redis-server, driven by one gRPC client
// (go-control-plane's envoy/service/ratelimit/v3), and prints markdown
// tables:
//
//   - accuracy: for each traffic pattern, the most requests allowed in any
//     window of one second, by their send times, over the limit;
//   - cost: decisions per second and the p50 and p99 latency of
//     ShouldRateLimit at each concurrency, the service's CPU, and Redis's
//     time in commands (INFO commandstats, reset with CONFIG RESETSTAT
//     before each run), its CPU, its socket reads (about one a round trip)
//     and its commands per decision;
//   - memory: the service's live heap and Redis's used_memory with a
//     million distinct values of one rule within one unit.
//
// It builds envoyproxy/ratelimit with go install (or takes -ratelimit) and
// slidegate with go build (or takes -slidegate), starts redis-server on a
// free loopback port, then envoyproxy/ratelimit over it (with its
// defaults, and with -pipeline-window as REDIS_PIPELINE_WINDOW), slidegate
// serve over it (--redis) and slidegate serve alone (local), waits for each
// to answer its health check, and kills every process at the end.
//
// Usage:
//
//	go run ./cmd/rlstable                                   # about 3 minutes
//	go run ./cmd/rlstable -pattern-duration 3s -cost-duration 1s -values 100000
//	go run ./cmd/rlstable -ratelimit /path/to/service_cmd -pipeline-window ""
//
// Progress goes to stderr, the tables to stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/redistest"
)

// flags are the command's settings.
type flags struct {
	ratelimit, slidegate string
	limit                int
	patternDuration      time.Duration
	concurrency          []int
	descriptors          []int
	costDuration, warmup time.Duration
	values, perRequest   int
	memoryConcurrency    int
	pipelineWindow       string
	seed                 uint64
	keep                 bool
}

func main() {
	var f flags
	flag.StringVar(&f.ratelimit, "ratelimit", "", "envoyproxy/ratelimit's service_cmd binary (default: go install it into a temporary directory)")
	flag.StringVar(&f.slidegate, "slidegate", "", "slidegate's binary (default: go build ../../cmd/slidegate into a temporary directory)")
	flag.IntVar(&f.limit, "limit", 100, "the per-second limit of the accuracy runs")
	flag.DurationVar(&f.patternDuration, "pattern-duration", 10*time.Second, "real time per accuracy pattern (0: no accuracy table)")
	conc := flag.String("concurrency", "1,8,64", "the cost runs' concurrencies, comma-separated")
	desc := flag.String("descriptors", "1,2", "the cost runs' descriptors per request, 1 (per second) and 2 (per second and per minute)")
	flag.DurationVar(&f.costDuration, "cost-duration", 2*time.Second, "time measured per cost run (0: no cost table)")
	flag.DurationVar(&f.warmup, "warmup", 300*time.Millisecond, "unmeasured time before each cost run")
	flag.IntVar(&f.values, "values", 1_000_000, "distinct values of the memory run (0: no memory table)")
	flag.IntVar(&f.perRequest, "per-request", 64, "descriptors per request in the memory run")
	flag.IntVar(&f.memoryConcurrency, "memory-concurrency", 32, "requests in flight in the memory run")
	flag.StringVar(&f.pipelineWindow, "pipeline-window", "300us", "also run envoyproxy/ratelimit with this REDIS_PIPELINE_WINDOW (its documented recommendation: 150us to 500us) in the accuracy and cost runs (\"\": not)")
	flag.Uint64Var(&f.seed, "seed", 1, "seed of the Poisson bursts")
	flag.BoolVar(&f.keep, "keep", false, "keep the temporary directory: binaries, configuration and each process's log")
	flag.Parse()
	var err error
	if f.concurrency, err = ints("-concurrency", *conc, 1, 4096); err == nil {
		f.descriptors, err = ints("-descriptors", *desc, 1, 2)
	}
	switch {
	case err != nil:
	case f.limit < 2 || f.limit > 10_000:
		err = fmt.Errorf("-limit %d: want 2 to 10000", f.limit)
	case f.perRequest < 1 || f.perRequest > 64:
		err = fmt.Errorf("-per-request %d: want 1 to 64 (slidegate serve's bound of descriptors)", f.perRequest)
	case f.memoryConcurrency < 1 || f.values < 0:
		err = fmt.Errorf("-memory-concurrency %d, -values %d: want at least 1 and 0", f.memoryConcurrency, f.values)
	}
	if err == nil && f.pipelineWindow != "" {
		_, err = time.ParseDuration(f.pipelineWindow)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlstable:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, f)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlstable:", err)
		os.Exit(1)
	}
}

// ints reads a comma-separated list of whole numbers from lo to hi.
func ints(name, s string, lo, hi int) ([]int, error) {
	var out []int
	for p := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%s %q: want whole numbers from %d to %d, comma-separated", name, s, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "rlstable: "+format+"\n", a...)
}

// run builds and starts the processes, runs the tables and stops every
// process, whatever fails.
func run(ctx context.Context, f flags) error {
	begin := time.Now()
	tmp, err := os.MkdirTemp("", "rlstable-")
	if err != nil {
		return err
	}
	if f.keep {
		defer progress("kept %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if f.ratelimit == "" {
		progress("go install %s", ratelimitModule)
		if f.ratelimit, err = buildRatelimit(ctx, tmp); err != nil {
			return err
		}
	}
	if f.slidegate == "" {
		progress("go build cmd/slidegate")
		if f.slidegate, err = buildSlidegate(ctx, tmp); err != nil {
			return err
		}
	}
	r := rules{PerSecond: int64(f.limit), PerMinute: int64(f.limit) * 60}
	configDir, err := writeConfig(tmp, r)
	if err != nil {
		return err
	}

	rsrv, err := redistest.Launch(tmp)
	if err != nil {
		return err
	}
	defer rsrv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: rsrv.Addr, MaxRetries: -1})
	defer rdb.Close()
	rs := redisStats{rdb}

	var svcs []*service
	defer func() {
		for _, s := range svcs {
			s.stop()
		}
	}()
	start := func(name string, redis bool, bin string, args, env []string, grpcAddr, httpAddr string) error {
		s, err := startService(name, redis, bin, args, env, grpcAddr, httpAddr, tmp)
		if err != nil {
			return err
		}
		svcs = append(svcs, s)
		if err := s.ready(ctx, 60*time.Second); err != nil {
			return err
		}
		progress("%s ready (gRPC %s)", name, grpcAddr)
		return nil
	}
	addrs := func(n int) ([]string, error) {
		out := make([]string, n)
		for i := range out {
			var err error
			if out[i], err = freeAddr(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	envoy := func(name, window string) error {
		a, err := addrs(3)
		if err != nil {
			return err
		}
		env := ratelimitEnv(tmp, rsrv.Addr, a[0], a[1], a[2])
		if window != "" {
			env = append(env, "REDIS_PIPELINE_WINDOW="+window)
		}
		return start(name, true, f.ratelimit, nil, env, a[0], a[1])
	}
	slidegate := func(name, redisAddr string) error {
		a, err := addrs(2)
		if err != nil {
			return err
		}
		args := []string{"serve", "--config", configDir, "--grpc", a[0], "--http", a[1]}
		if redisAddr != "" {
			args = append(args, "--redis", redisAddr)
		}
		return start(name, redisAddr != "", f.slidegate, args, nil, a[0], a[1])
	}
	if err := envoy(nameEnvoy, ""); err != nil {
		return err
	}
	if f.pipelineWindow != "" {
		if err := envoy(nameEnvoy+", REDIS_PIPELINE_WINDOW="+f.pipelineWindow, f.pipelineWindow); err != nil {
			return err
		}
	}
	if err := slidegate(nameSlidegateRedis, rsrv.Addr); err != nil {
		return err
	}
	if err := slidegate(nameSlidegateLocal, ""); err != nil {
		return err
	}

	w := os.Stdout
	fmt.Fprintf(w, "%s %s/%s, %d CPUs; every process on this machine, the client too. Limits: %d per second (key user), %d per minute (key tenant).\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), r.PerSecond, r.PerMinute)
	rep := report{limit: f.limit}
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	if f.patternDuration > 0 {
		rng := rand.New(rand.NewPCG(f.seed, 0))
		for i, p := range patterns {
			progress("accuracy: %s, %v", p.name, f.patternDuration)
			res := runAccuracy(ctx, svcs, p, f.limit, f.patternDuration, rng, fmt.Sprintf("acc%d-%s", i, nonce))
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for j, s := range svcs {
				if res[j].failed > 0 {
					return fmt.Errorf("%s, %s: %d of %d requests failed: %v", s.name, p.name, res[j].failed, res[j].sent, res[j].firstErr)
				}
				rep.accuracy = append(rep.accuracy, accuracyRow{p, s.name, res[j]})
			}
		}
		rep.writeAccuracy(w, f.patternDuration)
	}
	if f.costDuration > 0 {
		for _, d := range f.descriptors {
			for _, c := range f.concurrency {
				for _, s := range svcs {
					progress("cost: %s, %d descriptor(s), concurrency %d", s.name, d, c)
					res, err := runCost(ctx, s, rs, c, d, f.warmup, f.costDuration, fmt.Sprintf("cost%d-%d-%s", d, c, nonce))
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if err != nil {
						return fmt.Errorf("%s: %v", s.name, err)
					}
					if res.failed > 0 {
						return fmt.Errorf("%s, concurrency %d: %d of %d requests failed: %v", s.name, c, res.failed, res.decisions, res.firstErr)
					}
					rep.cost = append(rep.cost, costRow{s.name, s.redis, s.redis && strings.HasPrefix(s.name, "slidegate"), d, c, res})
				}
			}
		}
		rep.writeCost(w)
	}
	if f.values > 0 {
		for _, s := range svcs {
			if strings.Contains(s.name, "REDIS_PIPELINE_WINDOW") {
				continue // the same keys in Redis as without the window
			}
			progress("memory: %s, %d values", s.name, f.values)
			res, err := runMemory(ctx, s, rs, strings.HasPrefix(s.name, "slidegate"), f.values, f.perRequest, f.memoryConcurrency, "mem-"+nonce)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				return err
			}
			rep.memory = append(rep.memory, memoryRow{s.name, s.redis, res})
		}
		rep.writeMemory(w, f.perRequest, f.memoryConcurrency)
	}
	rep.writeGoals(w)
	progress("%v in all", time.Since(begin).Round(time.Second))
	return nil
}

const (
	nameEnvoy          = "envoyproxy/ratelimit (Redis)"
	nameSlidegateRedis = "slidegate serve --redis"
	nameSlidegateLocal = "slidegate serve (local)"
)

// ratelimitEnv is envoyproxy/ratelimit's environment: its defaults but
// for what it needs to run here. The configuration under root (as
// writeConfig writes it); statsd off, as no statsd listens; Redis over
// TCP at redisAddr (its default is a Unix socket of twemproxy); every
// listener on loopback, on free ports.
func ratelimitEnv(root, redisAddr, grpcAddr, httpAddr, debugAddr string) []string {
	return []string{
		"RUNTIME_ROOT=" + root,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"USE_STATSD=false",
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_URL=" + redisAddr,
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + port(grpcAddr),
		"HOST=127.0.0.1", "PORT=" + port(httpAddr),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + port(debugAddr),
	}
}
