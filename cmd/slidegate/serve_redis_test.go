package main

import (
	"bytes"
	"context"
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

	"github.com/slidegate/slidegate/internal/redistest"
)

// Two instances of slidegate serve given one Redis (--redis) share its
// limits: what one allowed, the other counts.
func TestServeWithRedisSharesTheLimitsBetweenInstances(t *testing.T) {
	srv := redistest.Start(t)
	twoInstancesShareALimit(t, "--redis", srv.Addr)
}

// Two instances given a Redis Cluster of three masters (--redis-cluster,
// the addresses of its nodes) share its limits too.
func TestServeWithARedisClusterSharesTheLimitsBetweenInstances(t *testing.T) {
	rc := redistest.StartCluster(t, 3, 0)
	twoInstancesShareALimit(t, "--redis-cluster", strings.Join(rc.Addrs(), ","))
}

// twoInstancesShareALimit runs two instances of slidegate serve given
// flag value, and checks that they share a limit of 2 a minute.
func twoInstancesShareALimit(t *testing.T, flag, value string) {
	dir := t.TempDir()
	cfg := "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 2)
	serveReady = func(g, _ string) { ready <- g }
	defer func() { serveReady = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var clients []rlsv3.RateLimitServiceClient
	for range 2 {
		var stderr bytes.Buffer
		wg.Go(func() {
			args := []string{"--config", dir, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", flag, value}
			if status := serveUntil(ctx, args, &bytes.Buffer{}, &stderr); status != 0 {
				t.Errorf("status %d: %s", status, stderr.String())
			}
		})
		var addr string
		select {
		case addr = <-ready:
		case <-time.After(30 * time.Second):
			t.Fatalf("not serving after 30 s")
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		clients = append(clients, rlsv3.NewRateLimitServiceClient(conn))
	}
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{{
		Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}},
	}}}
	var codes []rlsv3.RateLimitResponse_Code
	for _, c := range []rlsv3.RateLimitServiceClient{clients[0], clients[1], clients[1], clients[0]} {
		resp, err := c.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.OverallCode)
	}
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	if codes[0] != ok || codes[1] != ok || codes[2] != over || codes[3] != over {
		t.Errorf("codes %v across two instances of a limit of 2; want OK, OK, OVER_LIMIT, OVER_LIMIT", codes)
	}
}
