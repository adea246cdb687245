package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/slidegate/slidegate/envoyrls"
)

const serveUsage = `usage: slidegate serve --config DIR [flags]

Serve answers Envoy's rate limit service, ShouldRateLimit, over gRPC, and
the same as JSON over HTTP (POST /json), from the config files of DIR in
envoyproxy/ratelimit's format, one domain each. Each descriptor is held to
at most requests_per_unit in any window of one unit, wherever it starts.
DIR is reloaded when it changes; a config with a problem is logged and the
one in force stays. A config with a problem at the start is an error.

gRPC also serves the health service; HTTP serves GET /healthcheck,
Prometheus metrics on GET /metrics (hits by domain, rule and outcome),
and a live dashboard on GET /dashboard: per rule, the hits, over-limit,
near-limit and shadow hits a second, the key memory, the configs loaded
and refused, and Redis's health. On
SIGINT or SIGTERM both report not serving, and the servers finish the
requests in flight (for at most --grace) before they stop.

With --redis ADDR, the windows are kept in that Redis, shared by every
instance given it: the limits hold across them all, and a request's
windows are counted together, all or none. While Redis is down, each
instance limits on its own to its share of each limit, the instances
counted through a heartbeat key, until Redis is back. ADDR is host:port,
or a URL: redis://user@host:port/db, rediss:// for TLS. The password is
read from $SLIDEGATE_REDIS_PASSWORD (or the URL's, which ps shows).
With --redis-cluster ADDRS, they are kept in a Redis Cluster, found from
some of its nodes: host:port,host:port, or a URL whose addr parameters
name more. A request's windows in several slots are counted a slot at a
time, a refusal giving back what was counted. /metrics then tells whether Redis is up, and its round trips, failures
and the decisions its fallback made.

Flags:
`

// serveReady, when set, is told the addresses the servers listen on; for
// the tests, which listen on port 0.
var serveReady func(grpcAddr, httpAddr string)

// serve runs slidegate serve until SIGINT or SIGTERM.
func serve(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveUntil(ctx, args, stdout, stderr)
}

// serveUntil runs slidegate serve until ctx is done.
func serveUntil(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, serveUsage); fs.PrintDefaults() }
	dir := fs.String("config", "", "the directory of config files (required)")
	grpcAddr := fs.String("grpc", ":8081", "the gRPC address, as envoyproxy/ratelimit's GRPC_PORT")
	httpAddr := fs.String("http", ":8080", "the HTTP address of /json, /healthcheck and /metrics, as its PORT")
	memory := fs.String("key-memory", "64MiB", "the heap the per-key windows may hold together (KiB, MiB, GiB); with --redis, those of the fallback while Redis is down")
	shadow := fs.Bool("shadow", false, "answer OK to every request; the statuses still tell each decision (SHADOW_MODE)")
	headers := fs.Bool("headers", false, "add RateLimit-Limit, -Remaining and -Reset to the answers (LIMIT_RESPONSE_HEADERS_ENABLED)")
	redisAddr := fs.String("redis", "", "keep the windows in this Redis, shared by every instance given it: host:port, or redis://[user@]host:port/db (rediss:// for TLS); the password from $"+redisPasswordEnv)
	redisCluster := fs.String("redis-cluster", "", "keep the windows in this Redis Cluster, as --redis does: host:port,host:port of some of its nodes, or redis://[user@]host:port?addr=host:port (rediss:// for TLS)")
	grace := fs.Duration("grace", 10*time.Second, "how long the requests in flight may take to finish at shutdown")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "slidegate serve: --config DIR is required, and nothing else\n")
		fs.Usage()
		return 2
	}
	mem, err := parseBytes(*memory)
	if err != nil {
		fmt.Fprintf(stderr, "slidegate serve: --key-memory: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	settings := envoyrls.Settings{KeyMemory: mem, ShadowMode: *shadow, Headers: *headers, Logger: log}
	if *redisAddr != "" || *redisCluster != "" {
		c, closeCluster, err := serveRedis(*redisAddr, *redisCluster, mem, log)
		if err != nil {
			fmt.Fprintf(stderr, "slidegate serve: %v\n", err)
			return 2
		}
		defer closeCluster()
		settings.Cluster = c
	}
	svc, err := envoyrls.New(settings)
	if err != nil {
		fmt.Fprintf(stderr, "slidegate serve: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := svc.Follow(ctx, *dir); err != nil {
		var ce *envoyrls.ConfigError
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintf(stderr, "%s\n", p)
			}
			fmt.Fprintf(stderr, "slidegate serve: %s: %d problem%s\n", *dir, len(ce.Problems), plural(len(ce.Problems)))
		} else {
			fmt.Fprintf(stderr, "slidegate serve: %v\n", err)
		}
		return 1
	}

	gl, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		fmt.Fprintf(stderr, "slidegate serve: %v\n", err)
		return 1
	}
	hl, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		gl.Close()
		fmt.Fprintf(stderr, "slidegate serve: %v\n", err)
		return 1
	}
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(envoyrls.MaxMessageBytes),
		grpc.MaxConcurrentStreams(1024),
		// A connection lasts a day, as envoyproxy/ratelimit's do, so that
		// Envoy spreads over new instances; pings every 10 s are welcome
		// (gRPC's default cuts a client that pings more than every 5 min).
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 24 * time.Hour, MaxConnectionAgeGrace: time.Hour}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	svc.Register(gs)
	hs := health.NewServer()
	hs.SetServingStatus("envoy.service.ratelimit.v3.RateLimitService", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)

	var stopping sync.Once
	var down = make(chan struct{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(newServeCollector(svc))
	if settings.Cluster != nil {
		reg.MustRegister(newRedisCollector(settings.Cluster))
	}
	mux := http.NewServeMux()
	mux.Handle("/json", svc.JSONHandler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mountDashboard(mux, svc, settings.Cluster)
	mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-down:
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		default:
			io.WriteString(w, "OK")
		}
	})
	web := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10}

	errs := make(chan error, 2)
	go func() { errs <- gs.Serve(gl) }()
	go func() { errs <- web.Serve(hl) }()
	attrs := []any{"grpc", gl.Addr().String(), "http", hl.Addr().String(), "config", *dir}
	if *redisAddr != "" {
		attrs = append(attrs, "redis", redactRedis(*redisAddr))
	}
	if *redisCluster != "" {
		attrs = append(attrs, "redis-cluster", redactRedis(*redisCluster))
	}
	log.Info("serving", attrs...)
	if serveReady != nil {
		serveReady(gl.Addr().String(), hl.Addr().String())
	}

	status := 0
	select {
	case <-ctx.Done():
	case err := <-errs:
		log.Error("a server stopped", "err", err)
		status = 1
	}
	log.Info("stopping: finishing the requests in flight", "grace", grace.String())
	stopping.Do(func() { close(down) })
	hs.Shutdown() // every service NOT_SERVING
	shutdown, done := context.WithTimeout(context.Background(), *grace)
	defer done()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	_ = web.Shutdown(shutdown)
	select {
	case <-stopped:
	case <-shutdown.Done():
		gs.Stop()
	}
	log.Info("stopped")
	fmt.Fprintln(stdout, "slidegate serve: stopped")
	return status
}

// parseBytes reads a size such as 64MiB, 512KiB or 1GiB, or a number of
// bytes.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("%q is not a size: write 64MiB, 512KiB or 1GiB", s)
	}
	return n * mult, nil
}
