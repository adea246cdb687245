package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/slidegate/slidegate/internal/syncbuf"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// A served is a slidegate serve that a test started, on loopback ports.
type served struct {
	grpc, http string
	dir        string // the config directory
	stderr     *syncbuf.Buffer
	client     rlsv3.RateLimitServiceClient
	stop       func() int // stops it and returns its status
}

// startServe runs slidegate serve with args and the config files given
// (name: content) in a new directory, and connects Envoy's client to it.
// It stops when the test ends.
func startServe(t *testing.T, files map[string]string, args ...string) *served {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	type addrs struct{ grpc, http string }
	ready := make(chan addrs, 1)
	serveReady = func(g, h string) { ready <- addrs{g, h} }
	t.Cleanup(func() { serveReady = nil })
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{dir: dir, stderr: &syncbuf.Buffer{}}
	status := make(chan int, 1)
	go func() {
		all := append([]string{"--config", dir, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"}, args...)
		status <- serveUntil(ctx, all, io.Discard, s.stderr)
	}()
	var once sync.Once
	code := -1
	s.stop = func() int {
		once.Do(func() { cancel(); code = <-status })
		return code
	}
	t.Cleanup(func() { s.stop() })
	select {
	case a := <-ready:
		s.grpc, s.http = a.grpc, a.http
	case c := <-status:
		t.Fatalf("serve stopped with status %d: %s", c, s.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("not serving after 30 s: %s", s.stderr.String())
	}
	conn, err := grpc.NewClient(s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.client = rlsv3.NewRateLimitServiceClient(conn)
	return s
}

// ask sends one request of one descriptor, key=value of domain, and
// returns its overall code.
func (s *served) ask(t *testing.T, domain, key, value string) rlsv3.RateLimitResponse_Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := s.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*commonv3.RateLimitDescriptor{{
		Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: key, Value: value}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.OverallCode
}

// get returns the body of GET path on the HTTP address, failing the test
// unless the status is 200.
func (s *served) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + s.http + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %s", path, resp.StatusCode, err, body)
	}
	return string(body)
}

// metric returns the value of the series (name and labels, as
// exposed) in the body of /metrics, and whether it is there.
func metric(body, series string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// eventually polls cond every 20 ms until it holds, for at most 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
