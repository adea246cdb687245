// Package etcdtest runs a real one-member etcd for tests: on free loopback
// ports, its data in a temporary directory, killed when the test ends. A
// test that needs one calls Start, which skips the test, saying why, only
// when etcd is not installed. Stop and Restart take the server down and
// bring it back on the same ports with the same data, as a crash and a
// restart would.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrNotInstalled is Start's reason to skip when etcd is not in PATH.
var ErrNotInstalled = errors.New("etcd is not installed (apt-get install etcd-server)")

// ReadyTimeout bounds how long Start and Restart wait for the server to
// answer. It is generous, for a loaded machine starts etcd slowly.
const ReadyTimeout = 30 * time.Second

// A Server is an etcd process that a test started.
type Server struct {
	// Endpoint is the server's client URL, http://127.0.0.1:port. It
	// stays the same across Stop and Restart.
	Endpoint string

	tb      testing.TB
	bin     string
	dataDir string
	args    []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed when cmd has exited
}

// Start starts etcd on free loopback ports and kills it when the test ends.
// It skips the test when etcd is not installed and fails it when the server
// does not answer within ReadyTimeout.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		tb.Skip(ErrNotInstalled.Error() + "; skipping the test that needs a real etcd")
	}
	dir := tb.TempDir()
	s := &Server{tb: tb, bin: bin, dataDir: filepath.Join(dir, "data")}
	var last error
	// A port found free can be taken before etcd binds it: try a few.
	for range 5 {
		client, peer, err := freePorts()
		if err != nil {
			tb.Fatalf("etcdtest: no free port: %v", err)
		}
		s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(client)
		peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
		s.args = []string{
			"--name", "test",
			"--data-dir", s.dataDir,
			"--listen-client-urls", s.Endpoint,
			"--advertise-client-urls", s.Endpoint,
			"--listen-peer-urls", peerURL,
			"--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "test=" + peerURL,
			"--initial-cluster-state", "new",
			"--logger", "zap", "--log-outputs", "stderr", "--log-level", "error",
		}
		if last = s.start(); last == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("etcdtest: etcd did not start: %v", last)
	return nil
}

// freePorts returns two distinct free loopback ports, for clients and peers.
func freePorts() (client, peer int, err error) {
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer a.Close()
	b, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer b.Close()
	return a.Addr().(*net.TCPAddr).Port, b.Addr().(*net.TCPAddr).Port, nil
}

// start runs etcd and waits until it answers a Get.
func (s *Server) start() error {
	cmd := exec.Command(s.bin, s.args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	if err := s.waitReady(done, out); err != nil {
		cmd.Process.Kill()
		<-done
		return err
	}
	s.mu.Lock()
	s.cmd, s.out, s.done = cmd, out, done
	s.mu.Unlock()
	return nil
}

func (s *Server) waitReady(done <-chan struct{}, out *syncBuffer) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(ReadyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("etcd exited: %s", out.tail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, last = c.Get(ctx, "etcdtest-ready")
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("etcd did not answer within %v: %v; %s", ReadyTimeout, last, out.tail())
}

// Client returns a new client of the server, closed when the test ends.
func (s *Server) Client() *clientv3.Client {
	s.tb.Helper()
	return NewClient(s.tb, s.Endpoint)
}

// NewClient returns a new client of the server at endpoint (a Server's or
// a Proxy's), closed when the test ends.
func NewClient(tb testing.TB, endpoint string) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 2 * time.Second,
		// The client logs every failed attempt while a test has the
		// server down on purpose.
		Logger: zap.NewNop(),
		// A test whose server is taken away wants the client to notice
		// soon, and to find the server again soon after it is back.
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
	})
	if err != nil {
		tb.Fatalf("etcdtest: client: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// Watchers returns how many watchers the server has, from its metrics
// (etcd_debugging_mvcc_watcher_total): a test waits for a client's watch
// to be in place, or to be gone, by polling it.
func (s *Server) Watchers() (int, error) {
	resp, err := http.Get(s.Endpoint + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, err
	}
	const name = "etcd_debugging_mvcc_watcher_total "
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, name); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("no %s in the metrics", strings.TrimSpace(name))
}

// Stop kills the server, as a crash would, and waits for it to exit. It
// does nothing if the server is not running.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Restart starts the stopped server again on the same ports with the same
// data, and waits until it answers.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	var err error
	// The ports were ours a moment ago; another process may bind one in
	// between, which only a retry can tell from a slow start.
	for range 3 {
		if err = s.start(); err == nil {
			return
		}
	}
	s.tb.Fatalf("etcdtest: etcd did not restart: %v", err)
}

// syncBuffer keeps the last bytes etcd wrote, for an error that says why
// it did not start.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const keepOutput = 4096

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > keepOutput {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-keepOutput:]...)
	}
	return len(p), nil
}

func (b *syncBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}
