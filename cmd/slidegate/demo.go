package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/cpu"
	"github.com/slidegate/slidegate/middleware/httpguard"
	"github.com/slidegate/slidegate/redisflow"
	"github.com/slidegate/slidegate/rulefile"
)

//go:embed demo_rules.yaml
var demoRules []byte

const demoUsage = `usage: slidegate demo [--addr ADDR] [--duration D] [--rules FILE] [--cpu SHARE] [--redis ADDR]

Runs a small HTTP service protected by slidegate, drives traffic at it, and
serves the live dashboard and Prometheus metrics. The traffic repeats every
30 s: a steady phase, a spike above the orders' rate limit (searches turn
slow), an outage of the payments' dependency (its breaker opens), a
recovery (the breaker closes), an overload of the reports (a little
slower, and four times the traffic, more than their workers can serve:
their adaptive limit comes down and the excess is blocked as overloaded),
and a recovery. It comes from 2,000 users (the X-User header), one of whom, user-0042, hammers
the orders at 60 a second, over the per-user limit of 20. A shed rule
protects the whole service while the CPU is at 90% or more, each route
keeping its share: the CPU this process uses of what its cgroup may use,
so that other work on the machine does not make the demo shed. Where the
CPU cannot be read, it holds the requests in flight to twice what the
service completes at its best, a cap on floods.

  --addr ADDR      where to serve the service, the dashboard and /metrics
                   (default 127.0.0.1:8700; 127.0.0.1:0 picks a free port)
  --duration D     stop after D (default: run until Ctrl-C)
  --rules FILE     the rules, YAML or JSON, reloaded when the file changes
                   (default: the demo's own, printed by --print-rules)
  --cpu SHARE      read the CPU as SHARE, 0 to 1, instead of sampling it:
                   0.95 makes the shed rule shed, 0.5 keeps it quiet
  --redis ADDR     keep the orders' limits in Redis at ADDR (host:port),
                   shared by every demo that uses it: the demo's QPS rules
                   (100 orders a second; 20 a second and 900 a minute per
                   user) become cluster-wide (cluster: true). While Redis
                   is down, each demo limits on its own to its share of
                   them. With --rules, the file says which rules are.
  --print-rules    print the demo's rules and exit

Breakers changing state, rules reloaded and, with --redis, the cluster's
health changing are printed as they happen.
`

// The demo's traffic, per phase of its 30 s cycle.
type phase struct {
	name     string
	until    time.Duration // the phase ends this far into the cycle
	orders   float64       // requests per second
	search   float64
	payments float64
	reports  float64
	slow     float64 // the share of searches that are slow
	outage   bool    // the payments' dependency fails
	overload bool    // the reports take longer than their workers can serve
}

var phases = []phase{
	{name: "steady", until: 5 * time.Second, orders: 60, search: 30, payments: 40, reports: 60, slow: 0.05},
	{name: "spike", until: 9 * time.Second, orders: 400, search: 30, payments: 40, reports: 60, slow: 0.7},
	{name: "outage", until: 14 * time.Second, orders: 60, search: 30, payments: 40, reports: 60, slow: 0.05, outage: true},
	{name: "recovery", until: 20 * time.Second, orders: 60, search: 30, payments: 40, reports: 60, slow: 0.05},
	{name: "overload", until: 26 * time.Second, orders: 60, search: 30, payments: 40, reports: 240, slow: 0.05, overload: true},
	{name: "recovery", until: 30 * time.Second, orders: 60, search: 30, payments: 40, reports: 60, slow: 0.05},
}

const cycle = 30 * time.Second

// The reports' service: reportWorkers serve one report each at a time, in
// reportTime normally (about 180 a second at most, for 60 sent) and in
// reportTimeOverloaded in the overload phase (about 150 a second, for 240
// sent). Each range is narrow, well within the adaptive rule's tolerance
// of 2, so that only queueing reads as overload. A report that finds no
// worker free within maxReportWait is answered 503: the service says it
// is overloaded, a signal on which the adaptive rule backs off too.
const (
	reportWorkers = 4
	maxReportWait = 250 * time.Millisecond
)

var (
	reportTime           = [2]time.Duration{20 * time.Millisecond, 24 * time.Millisecond}
	reportTimeOverloaded = [2]time.Duration{24 * time.Millisecond, 28 * time.Millisecond}
)

// phaseAt returns the phase at d into the demo.
func phaseAt(d time.Duration) *phase {
	d %= cycle
	for i := range phases {
		if d < phases[i].until {
			return &phases[i]
		}
	}
	return &phases[len(phases)-1]
}

// The demo's users: each request of the endpoints' traffic comes from one
// of them, at random, named in the X-User header, which the service's
// per-key rules limit each user by. Two users send traffic of their own on
// top: one busy but within the orders' per-user limit, one far over it.
const (
	users       = 2000
	userHeader  = "X-User"
	abusiveUser = "user-0042"
	busyUser    = "user-0007"
)

// heavyUsers are the users with traffic of their own, to the orders.
var heavyUsers = []struct {
	user string
	rate float64 // requests per second
}{
	{abusiveUser, 60}, // three times the per-user limit of 20 a second
	{busyUser, 12},    // busy, within it
}

// userName names user i of the population, counting from 1.
func userName(i int) string { return fmt.Sprintf("user-%04d", i) }

// The demo service's endpoints, which are its resources.
var endpoints = []struct {
	resource, path string
	rate           func(*phase) float64
}{
	{"GET /api/orders", "/api/orders", func(p *phase) float64 { return p.orders }},
	{"GET /api/search", "/api/search", func(p *phase) float64 { return p.search }},
	{"GET /api/payments", "/api/payments", func(p *phase) float64 { return p.payments }},
	{"GET /api/reports", "/api/reports", func(p *phase) float64 { return p.reports }},
}

// demo runs the demo command.
func demo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "127.0.0.1:8700", "")
	duration := fs.Duration("duration", 0, "")
	rulesPath := fs.String("rules", "", "")
	printRules := fs.Bool("print-rules", false, "")
	cpuShare := fs.Float64("cpu", -1, "")
	redisAddr := fs.String("redis", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, demoUsage)
			return 0
		}
		fmt.Fprintf(stderr, "slidegate demo: %v\n%s", err, demoUsage)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "slidegate demo: unexpected argument %q\n%s", fs.Arg(0), demoUsage)
		return 2
	}
	if *duration < 0 {
		fmt.Fprintf(stderr, "slidegate demo: --duration %v: must not be negative\n", *duration)
		return 2
	}
	fixedCPU := false
	fs.Visit(func(f *flag.Flag) { fixedCPU = fixedCPU || f.Name == "cpu" })
	if fixedCPU && !(*cpuShare >= 0 && *cpuShare <= 1) {
		fmt.Fprintf(stderr, "slidegate demo: --cpu %v: must be a share from 0 to 1\n", *cpuShare)
		return 2
	}
	if *redisAddr != "" {
		_, port, err := net.SplitHostPort(*redisAddr)
		if n, perr := strconv.ParseUint(port, 10, 16); err == nil && (perr != nil || n == 0) {
			err = fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
		if err != nil {
			fmt.Fprintf(stderr, "slidegate demo: --redis %q: want host:port: %v\n", *redisAddr, err)
			return 2
		}
	}
	if *printRules {
		_, _ = stdout.Write(demoRules)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !fixedCPU {
		*cpuShare = -1
	}
	return runDemo(ctx, demoOptions{addr: *addr, rulesPath: *rulesPath, duration: *duration, cpuShare: *cpuShare, redisAddr: *redisAddr}, stdout, stderr)
}

// demoOptions are the demo's flags.
type demoOptions struct {
	addr      string        // where to serve
	rulesPath string        // the rules file; "": the demo's own rules
	duration  time.Duration // how long to run; 0: until ctx ends
	cpuShare  float64       // what the shed rules read as the CPU; negative: sample it
	redisAddr string        // the Redis of the cluster rules; "": none
}

// runDemo runs the demo until ctx ends or, if o.duration is positive, for
// o.duration from when the service is up (so that the summary's time is at
// least o.duration, however long the setup took). Its shed rules read the
// CPU as o.cpuShare, or from a cpu.Sampler if o.cpuShare is negative.
func runDemo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) int {
	addr, rulesPath, duration, cpuShare := o.addr, o.rulesPath, o.duration, o.cpuShare
	stdout = &syncWriter{w: stdout} // the report's lines and the events'
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The guard and the cluster log what stdout says as it happens (the
	// events); only what an operator must fix goes to stderr.
	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opts := []slidegate.Option{slidegate.WithLogger(quiet)}
	var cluster *redisflow.Cluster
	if o.redisAddr != "" {
		c, leave, err := joinCluster(o.redisAddr, quiet)
		if err != nil {
			fmt.Fprintf(stderr, "slidegate demo: %v\n", err)
			return 1
		}
		defer leave()
		cluster = c
		opts = append(opts, slidegate.WithCluster(c))
	}
	var cpuSaid string // how the shed rules read the CPU, for the output
	var cpuErr error
	var own *ownCPU // what the shed rules read, if it is this process's share
	if cpuShare >= 0 {
		opts = append(opts, slidegate.WithCPU(func() float64 { return cpuShare }))
		cpuSaid = fmt.Sprintf("The shed rules read the CPU as %.0f%% (--cpu).\n", 100*cpuShare)
	} else if sampler, err := cpu.NewSampler(); err == nil {
		defer sampler.Close()
		if o := newOwnCPU(sampler, processCPUTime); o.sampleAt(clock.System.Now()) == nil {
			own = o
			sampling, stopSampling := context.WithCancel(context.Background())
			defer stopSampling()
			go own.run(sampling, clock.System)
			opts = append(opts, slidegate.WithCPU(own.Usage))
			cpuSaid = fmt.Sprintf("The shed rules read the CPU this process uses of the %.1f CPUs its cgroup may use (%s),\nnot other work's: --cpu 0.95 shows them shedding.\n", sampler.Capacity(), sampler.Source())
		} else {
			opts = append(opts, slidegate.WithCPU(sampler.Usage))
			cpuSaid = fmt.Sprintf("The shed rules read the CPU from %s (%.1f CPUs), other work's too: --cpu 0.5 keeps them quiet.\n", sampler.Source(), sampler.Capacity())
		}
	} else {
		cpuErr = err
		cpuSaid = fmt.Sprintf("The CPU cannot be read here (%v):\nthe shed rules run with cpu_threshold -1, holding the requests in flight to what the service completes at its best.\n", err)
	}
	g, err := slidegate.New(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "slidegate demo: %v\n", err)
		return 1
	}
	if rulesPath == "" {
		rules, err := rulefile.Parse("demo_rules.yaml", demoRules)
		if err == nil {
			if cpuErr != nil {
				rules = withoutCPU(rules)
			}
			if cluster != nil {
				rules = clusterWide(rules)
			}
			err = g.SetRules(rules)
		}
		if err != nil {
			fmt.Fprintf(stderr, "slidegate demo: the embedded rules: %v\n", err)
			return 1
		}
	} else if err := loadRules(g, rulesPath); err != nil {
		fmt.Fprintf(stderr, "slidegate demo: %v\n", err)
		return 1
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "slidegate demo: %v\n", err)
		return 1
	}
	start := time.Now()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, start.Add(duration))
		defer cancel()
	}
	svc := &service{start: start, reportWorkers: make(chan struct{}, reportWorkers)}
	mux := http.NewServeMux()
	// The key of a request is its user: the header stands for an identity
	// the service has checked, as an API key would be (a public service
	// would key by what a client cannot choose: httpguard.KeyFromClient).
	blocked := newBlockTally()
	mux.Handle("/api/", httpguard.Middleware(g, httpguard.KeyFromHeader(userHeader), httpguard.WithBlockedHandler(blocked.writeBlocked))(svc.mux()))
	closeObs, err := observe(mux, g)
	if err != nil {
		fmt.Fprintf(stderr, "slidegate demo: %v\n", err)
		return 1
	}
	mux.Handle("GET /{$}", http.RedirectHandler("/slidegate/", http.StatusFound))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "slidegate demo: %v\n", err)
		}
	}()
	if rulesPath != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := rulefile.Watch(g, rulesPath, rulefile.WithLogger(log))
			if err != nil {
				if ctx.Err() == nil {
					fmt.Fprintf(stderr, "slidegate demo: watching %s: %v\n", rulesPath, err)
				}
				return
			}
			<-ctx.Done()
			f.Close()
		}()
	}

	stopEvents := printEvents(g, start, stdout)
	defer stopEvents()
	base := "http://" + ln.Addr().String()
	r := g.Rules()
	fmt.Fprintf(stdout, "slidegate demo: a service guarded by %d flow rule%s and %d breaker%s, and traffic to it.\n",
		len(r.Flow), plural(len(r.Flow)), len(r.Breakers), plural(len(r.Breakers)))
	if cluster != nil {
		fmt.Fprintf(stdout, "Cluster-wide: %d of the flow rules, kept in Redis at %s for every demo that uses it (keys %s:*).\n",
			clusterRules(r), o.redisAddr, clusterPrefix)
		if h, _ := g.ClusterHealth(); !h.Healthy {
			fmt.Fprintf(stdout, "Redis at %s does not answer now: each demo limits on its own to its share until it does.\n", o.redisAddr)
		}
	}
	fmt.Fprintf(stdout, "  dashboard  %s/slidegate/\n  metrics    %s/metrics\n  service    %s/api/orders, /api/search, /api/payments, /api/reports\n", base, base, base)
	fmt.Fprintf(stdout, "Every 30 s: steady 5 s, spike 4 s (orders ×7, slow searches), payments outage 5 s, recovery 6 s,\nreports overloaded 6 s (×4 traffic, more than their %d workers serve), recovery 4 s. Ctrl-C stops.\n", reportWorkers)
	fmt.Fprint(stdout, cpuSaid)
	fmt.Fprintf(stdout, "The traffic comes from %d users (the %s header); %s also sends %.0f orders a second, %s %.0f.\n",
		users, userHeader, abusiveUser, heavyUsers[0].rate, busyUser, heavyUsers[1].rate)
	fmt.Fprintf(stdout, "Each second, by endpoint: the requests that succeeded (ok), were blocked with 429 Too Many Requests\n"+
		"(a limit the client reached; the orders' include %s's) or 503 Service Unavailable (a breaker\n"+
		"open, or overloaded), and failed; the 99th percentile of response times over the last 5 to 10 s;\n"+
		"and the reports' adaptive limit, with the most requests in flight under it in the second:\n", abusiveUser)

	load := newLoad(base)
	wg.Add(1)
	go func() {
		defer wg.Done()
		load.run(ctx, start)
	}()
	totals := newReporter(g, start, stdout, own).run(ctx)
	stopEvents()

	closeObs() // ends the dashboard's event streams, which Shutdown would wait for
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	wg.Wait()
	ran := time.Since(start)
	tooMany, unavailable := blockedByStatus(totals)
	fmt.Fprintf(stdout, "stopped after %v: %d requests allowed, %d blocked (%d with 429, %d with 503), %d failed\n",
		ran.Round(100*time.Millisecond), totals.Allowed, totals.Blocked(), tooMany, unavailable, totals.Failed)
	fmt.Fprint(stdout, keysSummary(g, blocked, ran))
	if cluster != nil {
		s := cluster.Stats()
		fmt.Fprintf(stdout, "cluster (Redis at %s): %d decisions taken to Redis, %d by the fallback, %d instance%s sharing the limits\n",
			o.redisAddr, s.RoundTrips, s.Fallbacks, s.Instances, plural(s.Instances))
	}
	return 0
}

// A service is the demo's protected HTTP service.
type service struct {
	start         time.Time
	reportWorkers chan struct{} // a place per report being worked on
}

func (s *service) phase() *phase { return phaseAt(time.Since(s.start)) }

func (s *service) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /api/orders", func(w http.ResponseWriter, r *http.Request) {
		work(r.Context(), 2*time.Millisecond, 8*time.Millisecond)
		fmt.Fprintln(w, `{"orders":[]}`)
	})
	m.HandleFunc("GET /api/search", func(w http.ResponseWriter, r *http.Request) {
		if rand.Float64() < s.phase().slow {
			work(r.Context(), 300*time.Millisecond, 400*time.Millisecond)
		} else {
			work(r.Context(), 20*time.Millisecond, 80*time.Millisecond)
		}
		fmt.Fprintln(w, `{"results":[]}`)
	})
	m.HandleFunc("GET /api/payments", func(w http.ResponseWriter, r *http.Request) {
		if s.phase().outage {
			work(r.Context(), 5*time.Millisecond, 10*time.Millisecond)
			http.Error(w, "payment provider unavailable", http.StatusBadGateway)
			return
		}
		work(r.Context(), 5*time.Millisecond, 15*time.Millisecond)
		fmt.Fprintln(w, `{"status":"paid"}`)
	})
	m.HandleFunc("GET /api/reports", func(w http.ResponseWriter, r *http.Request) {
		wait := time.NewTimer(maxReportWait)
		defer wait.Stop()
		select {
		case s.reportWorkers <- struct{}{}:
		case <-wait.C:
			http.Error(w, "overloaded: no worker free", http.StatusServiceUnavailable)
			return
		case <-r.Context().Done():
			return
		}
		defer func() { <-s.reportWorkers }()
		t := reportTime
		if s.phase().overload {
			t = reportTimeOverloaded
		}
		work(r.Context(), t[0], t[1])
		fmt.Fprintln(w, `{"report":{}}`)
	})
	return m
}

// withoutCPU returns rules whose shed rules read no CPU (cpu_threshold
// -1), for a guard that cannot read one.
func withoutCPU(r slidegate.Rules) slidegate.Rules {
	r.Flow = slices.Clone(r.Flow)
	for i := range r.Flow {
		if r.Flow[i].Type == slidegate.ShedRule {
			r.Flow[i].CPUThreshold = -1
		}
	}
	return r
}

// work takes between lo and hi, or until ctx ends.
func work(ctx context.Context, lo, hi time.Duration) {
	t := time.NewTimer(lo + rand.N(hi-lo))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// A load drives the demo's traffic at the service.
type load struct {
	base   string
	client *http.Client
	slots  chan struct{} // bounds the requests in flight
}

func newLoad(base string) *load {
	return &load{
		base: base,
		client: &http.Client{
			Timeout:   5 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second},
		},
		slots: make(chan struct{}, 256),
	}
}

// run sends each endpoint's rate of requests, each from a user at random,
// and each heavy user's requests to the orders, in steps of 10 ms, until
// ctx ends, and waits for the requests in flight.
func (l *load) run(ctx context.Context, start time.Time) {
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	owed := make([]float64, len(endpoints))
	owedHeavy := make([]float64, len(heavyUsers))
	last := time.Now()
	send := func(url, user string) {
		select {
		case l.slots <- struct{}{}:
		default:
			return // the service is that slow: skip the request
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-l.slots }()
			l.get(ctx, url, user)
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			p := phaseAt(now.Sub(start))
			dt := now.Sub(last).Seconds()
			last = now
			for i, ep := range endpoints {
				owed[i] += ep.rate(p) * dt
				for ; owed[i] >= 1; owed[i]-- {
					send(l.base+ep.path, userName(1+rand.IntN(users)))
				}
			}
			for i, h := range heavyUsers {
				owedHeavy[i] += h.rate * dt
				for ; owedHeavy[i] >= 1; owedHeavy[i]-- {
					send(l.base+endpoints[0].path, h.user)
				}
			}
		}
	}
}

func (l *load) get(ctx context.Context, url, user string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return
	}
	req.Header.Set(userHeader, user)
	resp, err := l.client.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// loadRules puts the rules of the file at path in force in g.
func loadRules(g *slidegate.Guard, path string) error {
	r, err := rulefile.Load(path)
	if err != nil {
		return err
	}
	return g.SetRules(r)
}
