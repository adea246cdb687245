package main

import (
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/slidegate/slidegate/internal/redistest"
)

const edgeConfig = "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"

// With --redis, /metrics tells Redis's health: up while it decides, down
// once it is stopped and the fallback decides, up again when it is back;
// and the log tells each change in a structured line.
func TestServeMetricsTellWhetherRedisIsUpAndTheFallbacksWhileItIsDown(t *testing.T) {
	srv := redistest.Start(t)
	s := startServe(t, map[string]string{"edge.yaml": edgeConfig}, "--redis", srv.Addr)
	if c := s.ask(t, "edge", "remote_address", "10.0.0.1"); c != rlsv3.RateLimitResponse_OK {
		t.Fatalf("code %v with Redis up", c)
	}
	body := s.get(t, "/metrics")
	for series, want := range map[string]float64{
		"slidegate_ratelimit_redis_healthy":         1,
		"slidegate_ratelimit_redis_misconfigured":   0,
		"slidegate_ratelimit_redis_fallbacks_total": 0,
		"slidegate_ratelimit_redis_instances":       1,
	} {
		if v, ok := metric(body, series); !ok || v != want {
			t.Errorf("%s = %v (found %v) with Redis up, want %v", series, v, ok, want)
		}
	}
	if v, _ := metric(body, "slidegate_ratelimit_redis_round_trips_total"); v < 1 {
		t.Errorf("round trips %v after a decision over Redis", v)
	}

	srv.Stop()
	// A decision meets Redis down (it fails, or times out), and marks it so.
	eventually(t, "/metrics says Redis is down", func() bool {
		s.ask(t, "edge", "remote_address", "10.0.0.1")
		v, ok := metric(s.get(t, "/metrics"), "slidegate_ratelimit_redis_healthy")
		return ok && v == 0
	})
	s.ask(t, "edge", "remote_address", "10.0.0.1")
	body = s.get(t, "/metrics")
	if v, _ := metric(body, "slidegate_ratelimit_redis_fallbacks_total"); v < 1 {
		t.Errorf("fallbacks %v after a decision with Redis down", v)
	}
	if v, _ := metric(body, "slidegate_ratelimit_redis_failures_total"); v < 1 {
		t.Errorf("failures %v after Redis went down", v)
	}

	srv.Restart()
	eventually(t, "/metrics says Redis is up again", func() bool {
		v, ok := metric(s.get(t, "/metrics"), "slidegate_ratelimit_redis_healthy")
		return ok && v == 1
	})
	if c := s.stop(); c != 0 {
		t.Fatalf("status %d", c)
	}
	log := s.stderr.String()
	for _, want := range []string{
		`level=WARN msg="redisflow: Redis is down; limiters fall back" fallback=local err=`,
		`level=INFO msg="redisflow: Redis is back; limiters decide through it again" instances=1`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
}

// Without --redis, /metrics has no Redis series.
func TestServeMetricsWithoutRedisHaveNoRedisSeries(t *testing.T) {
	s := startServe(t, map[string]string{"edge.yaml": edgeConfig})
	if body := s.get(t, "/metrics"); strings.Contains(body, "slidegate_ratelimit_redis_") {
		t.Errorf("Redis series without --redis:\n%s", body)
	}
}
