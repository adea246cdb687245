package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// slidegate serve answers ShouldRateLimit through Envoy's client, /json
// and both health checks, and stops gracefully when its context ends.
func TestServeAnswersEnvoyAndStopsGracefully(t *testing.T) {
	dir := t.TempDir()
	cfg := "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	type addrs struct{ grpc, http string }
	ready := make(chan addrs, 1)
	serveReady = func(g, h string) { ready <- addrs{g, h} }
	defer func() { serveReady = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr bytes.Buffer
	var wg sync.WaitGroup
	status := -1
	wg.Add(1)
	go func() {
		defer wg.Done()
		status = serveUntil(ctx, []string{"--config", dir, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	var a addrs
	select {
	case a = <-ready:
	case <-time.After(30 * time.Second):
		cancel()
		wg.Wait()
		t.Fatalf("not serving after 30 s: %s", stderr.String())
	}

	conn, err := grpc.NewClient(a.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{{
		Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}},
	}}}
	var codes []rlsv3.RateLimitResponse_Code
	for range 3 {
		resp, err := client.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.OverallCode)
	}
	if codes[0] != rlsv3.RateLimitResponse_OK || codes[1] != rlsv3.RateLimitResponse_OK || codes[2] != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("codes %v, want OK, OK, OVER_LIMIT", codes)
	}
	h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health: %v %v", h, err)
	}
	resp, err := http.Get("http://" + a.http + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "OK" {
		t.Fatalf("/healthcheck: %d %q", resp.StatusCode, body)
	}
	resp, err = http.Post("http://"+a.http+"/json", "application/json",
		strings.NewReader(`{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("/json for the same address: %d, want 429", resp.StatusCode)
	}

	resp, err = http.Get("http://" + a.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`slidegate_ratelimit_hits_total{domain="edge",outcome="over_limit",rule="remote_address"} 2`,
		`slidegate_ratelimit_hits_total{domain="edge",outcome="within_limit",rule="remote_address"} 2`,
		`slidegate_ratelimit_near_limit_total{domain="edge",rule="remote_address"} 1`,
		`slidegate_ratelimit_requests_total{code="OVER_LIMIT"} 2`,
		`slidegate_ratelimit_key_memory_limit_bytes 6.7108864e+07`,
		`slidegate_ratelimit_config_loads_total{result="loaded"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}

	cancel()
	wg.Wait()
	if status != 0 || !strings.Contains(stdout.String(), "stopped") {
		t.Fatalf("status %d, stdout %q, stderr %s", status, stdout.String(), stderr.String())
	}
}

// A config directory with problems at the start is refused, every problem
// printed with its file and line.
func TestServeRefusesAConfigWithProblemsAtTheStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n  - value: v\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if s := serveUntil(context.Background(), []string{"--config", dir, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"}, &stdout, &stderr); s != 1 {
		t.Fatalf("status %d, want 1", s)
	}
	for _, want := range []string{`bad.yaml:4: d.k: rate_limit.unit: "fortnight" is not a unit`, "bad.yaml:5: d: descriptors[1].key: empty", "2 problems"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// check --envoy validates a config directory of slidegate serve: the
// examples of envoyproxy/ratelimit are good, a directory with problems
// prints each with its file and line.
func TestCheckEnvoyValidatesAConfigDirectory(t *testing.T) {
	good := filepath.Join("..", "..", "envoyrls", "testdata", "envoyproxy", "examples")
	if code, out, _ := runCmd("check", "--envoy", good); code != 0 || out != good+": ok: 2 domains\n" {
		t.Fatalf("check --envoy of the examples: %d %q", code, out)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	writeFile(t, filepath.Join(dir, "b.yaml"), "domain: a\n")
	code, out, _ := runCmd("check", "--envoy", dir)
	for _, want := range []string{
		filepath.Join(dir, "a.yaml") + `:4: a.k: rate_limit.unit: "fortnight" is not a unit`,
		filepath.Join(dir, "b.yaml") + ":1: a: domain: duplicate: a.yaml defines it too",
		dir + ": 2 problems\n",
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("check --envoy: %d, output lacks %q:\n%s", code, want, out)
		}
	}
}
