// Package redistest runs a real redis-server for tests: on a free loopback
// port, without persistence, stopped when the test ends. A test that needs
// one calls Start, which skips the test, saying why, only when redis-server
// is not installed.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Server is a redis-server process that a test started.
type Server struct {
	// Addr is the server's address, 127.0.0.1:port. It stays the same
	// across Stop and Restart.
	Addr string

	tb   testing.TB
	bin  string
	args []string // given to redis-server after the defaults
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// ErrNotInstalled is Launch's error when redis-server is not in PATH.
var ErrNotInstalled = errors.New("redis-server is not installed (apt-get install redis-server)")

// Start starts a redis-server on a free loopback port and stops it when the
// test ends. It skips the test when redis-server is not installed, and fails
// it when the server does not start. args are given to redis-server after
// the defaults, which they override ("--rename-command", "EVALSHA", "").
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s, err := Launch(tb.TempDir(), args...)
	if errors.Is(err, ErrNotInstalled) {
		tb.Skip(err.Error() + "; skipping the test that needs a real Redis")
	}
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s.tb = tb
	tb.Cleanup(s.Stop)
	return s
}

// Launch starts a redis-server on a free loopback port, keeping its files in
// dir, for a caller that is not one test (a benchmark program sharing one
// server across its rows); Stop stops it. Restart is for servers that Start
// started. args are given to redis-server as Start gives them.
func Launch(dir string, args ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	s := &Server{bin: bin, dir: dir, args: args}
	var last error
	// A port found free can be taken before the server binds it: try a
	// few.
	for range 5 {
		if s.port, err = freePort(); err != nil {
			return nil, fmt.Errorf("no free port: %w", err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redis-server did not start: %w", last)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server on s.port and waits until it answers PING.
func (s *Server) start() error {
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--daemonize", "no", "--loglevel", "warning"}, s.args...)
	cmd := exec.Command(s.bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited: %s", strings.TrimSpace(out.String()))
		default:
		}
		if ping(s.Addr) == nil {
			s.cmd, s.done = cmd, done
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	<-done
	return fmt.Errorf("redis-server did not answer PING within 10s: %s", strings.TrimSpace(out.String()))
}

// ping sends PING on a new connection and expects PONG, or the NOAUTH of a
// server that wants a password: either way it is up.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if l := strings.TrimSpace(line); l != "+PONG" && !strings.HasPrefix(l, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Stop kills the server, as a crash would, and waits for it to exit. It
// does nothing if the server is not running.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot die of SIGKILL's aftermath otherwise
	s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
}

// Restart starts the server again on the same address, empty. It fails the
// test if the server is running or does not start.
func (s *Server) Restart() {
	s.tb.Helper()
	if s.cmd != nil {
		s.tb.Fatal("redistest: Restart of a running server")
	}
	var err error
	for range 50 { // the port may linger for a moment after the kill
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart on %s: %v", s.Addr, err)
}

// Pause stops the server's process (SIGSTOP) without closing its
// connections: the kernel still accepts connections and requests, and
// nothing answers them, as with a server that hangs.
func (s *Server) Pause() {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Env is the environment a child process needs to reach the server: the
// parent's, with REDISTEST_ADDR set to Addr.
func (s *Server) Env() []string { return append(os.Environ(), "REDISTEST_ADDR="+s.Addr) }
