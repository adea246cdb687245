package envoyrls

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slidegate/slidegate/clock"
)

// A rig is a service on a manual clock served over gRPC on a loopback
// port, and Envoy's generated client connected to it.
type rig struct {
	svc    *Service
	clock  *clock.Manual
	client rlsv3.RateLimitServiceClient
	conn   *grpc.ClientConn
	addr   string
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newRig serves a service with the config files given (name: content),
// and settings s (its clock and logger are the rig's).
func newRig(t testing.TB, files map[string]string, s Settings) *rig {
	t.Helper()
	c := clock.NewManual(int64(time.Hour)) // away from 0, so that windows before the start are empty
	s.Clock, s.Logger = c, quietLogger()
	svc, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	if files != nil {
		cfg, err := parseFiles(files)
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}
	r := serveRig(t, svc)
	r.clock = c
	return r
}

// serveRig serves svc over gRPC on a loopback port, with Envoy's
// generated client connected to it.
func serveRig(t testing.TB, svc *Service) *rig {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes))
	svc.Register(srv)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rig{svc: svc, client: rlsv3.NewRateLimitServiceClient(conn), conn: conn, addr: lis.Addr().String()}
}

// ask sends a request through the gRPC client, failing the test on an error.
func (r *rig) ask(t *testing.T, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := r.client.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	return resp
}

// call sends a request and returns the error too.
func (r *rig) call(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.client.ShouldRateLimit(ctx, req)
}

// desc makes a descriptor of key, value pairs.
func desc(kv ...string) *commonv3.RateLimitDescriptor {
	d := &commonv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func request(domain string, ds ...*commonv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// readDir reads the files of a testdata directory as parseFiles takes them.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = string(b)
	}
	return files
}

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// codes returns the overall code and each status's code.
func codesOf(resp *rlsv3.RateLimitResponse) (rlsv3.RateLimitResponse_Code, []rlsv3.RateLimitResponse_Code) {
	cs := make([]rlsv3.RateLimitResponse_Code, len(resp.Statuses))
	for i, s := range resp.Statuses {
		cs[i] = s.Code
	}
	return resp.OverallCode, cs
}
