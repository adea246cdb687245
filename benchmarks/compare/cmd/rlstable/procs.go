package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ratelimitModule is envoyproxy/ratelimit's command, at the version
// measured. It is built with go install, outside this module, so that it
// takes its own go.mod's dependencies.
const ratelimitModule = "github.com/envoyproxy/ratelimit/src/service_cmd@v1.4.1-0.20260122083618-3fb702589d36"

// buildRatelimit installs envoyproxy/ratelimit's command into dir and
// returns its path. GOWORK and GOFLAGS are cleared, so that neither this
// module nor a workspace choose its dependencies.
func buildRatelimit(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "install", ratelimitModule)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %v\n%s", ratelimitModule, err, out)
	}
	return filepath.Join(dir, "service_cmd"), nil
}

// buildSlidegate builds slidegate's command, from the repository this
// source file is in, into dir, and returns its path.
func buildSlidegate(ctx context.Context, dir string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "cmd", "slidegate")
	if _, err := os.Stat(filepath.Join(src, "go.mod")); !ok || err != nil {
		return "", fmt.Errorf("slidegate's source is not at %s (built with -trimpath?): give -slidegate", src)
	}
	bin := filepath.Join(dir, "slidegate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", src, err, out)
	}
	return bin, nil
}

// A service is one rate limit service process under test.
type service struct {
	name   string // as in the tables
	redis  bool   // its counts are in Redis
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	log    string        // its stderr (and stdout), with GODEBUG=gctrace=1's lines
	grpc   string        // its gRPC address
	http   string        // its HTTP address (/healthcheck)
	conn   *grpc.ClientConn
	client rlsv3.RateLimitServiceClient
}

// freeAddr returns a loopback address with a port free when asked.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// startService runs bin with args and env added to this process's
// environment, its output in logDir/name.log, every Go heap collection
// traced (GODEBUG=gctrace=1, for the memory table), and killed if this
// process dies.
func startService(name string, redis bool, bin string, args, env []string, grpcAddr, httpAddr, logDir string) (*service, error) {
	s := &service{name: name, redis: redis, grpc: grpcAddr, http: httpAddr, done: make(chan struct{})}
	s.log = filepath.Join(logDir, strings.NewReplacer(" ", "-", "/", "-", "(", "", ")", "", ",", "").Replace(name)+".log")
	f, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(append(os.Environ(), "GODEBUG=gctrace=1"), env...)
	s.cmd.Stdout, s.cmd.Stderr = f, f
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	go func() { s.cmd.Wait(); f.Close(); close(s.done) }()
	return s, nil
}

// stop kills the service's process and waits for it, and closes the
// client's connection.
func (s *service) stop() {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		<-s.done
	}
}

// ready waits until the service answers GET /healthcheck with 200 and a
// ShouldRateLimit of a descriptor no rule has with OK, or fails when the
// process exits or the deadline passes.
func (s *service) ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	if s.conn, err = grpc.NewClient(s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return err
	}
	s.client = rlsv3.NewRateLimitServiceClient(s.conn)
	probe := request(descriptor("ready", "probe"))
	hc := &http.Client{Timeout: time.Second}
	var last error
	for {
		select {
		case <-s.done:
			return fmt.Errorf("%s exited before it was ready: %s", s.name, tail(s.log, 2000))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %v (last: %v): %s", s.name, timeout, last, tail(s.log, 2000))
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := hc.Get("http://" + s.http + "/healthcheck")
		if err != nil {
			last = err
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("/healthcheck: %s", resp.Status)
			continue
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		r, err := s.client.ShouldRateLimit(pctx, probe)
		pcancel()
		if err != nil {
			last = err
			continue
		}
		if r.OverallCode != rlsv3.RateLimitResponse_OK {
			return fmt.Errorf("%s: a descriptor without a rule answered %v, want OK", s.name, r.OverallCode)
		}
		return nil
	}
}

// tail returns the last n bytes of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// gcLine matches gctrace's heap sizes: at the start of a collection, at
// its end, and what it marked live, in MB.
var gcLine = regexp.MustCompile(`^gc \d+ .* (\d+)->(\d+)->(\d+) MB`)

// logMark is where a service's log ends now, to read what it logs after.
func (s *service) logMark() int64 {
	fi, err := os.Stat(s.log)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// liveHeap returns the live heap, in MiB, that the last collection before
// from marked (last), and the most any collection after from marked
// (peak), and how many collections there were after from.
func (s *service) liveHeap(from int64) (last, peak int64, after int, err error) {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return 0, 0, 0, err
	}
	last, peak = -1, -1
	sc := bufio.NewScanner(bytes.NewReader(b))
	var off int64
	for sc.Scan() {
		line := sc.Text()
		start := off
		off += int64(len(line)) + 1
		m := gcLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		live, _ := strconv.ParseInt(m[3], 10, 64)
		if start < from {
			last = live
		} else {
			peak = max(peak, live)
			after++
		}
	}
	if last < 0 {
		last = 0
	}
	return last, peak, after, nil
}

// fallbackLine is what slidegate serve --redis logs (redisflow's cluster)
// when Redis answers too late or not at all and the process's own windows
// decide instead: its decisions are then not Redis's.
const fallbackLine = "limiters fall back"

// fallbacks counts the lines of the service's log after from that tell it
// fell back from Redis.
func (s *service) fallbacks(from int64) int {
	b, err := os.ReadFile(s.log)
	if err != nil || from > int64(len(b)) {
		return 0
	}
	return bytes.Count(b[from:], []byte(fallbackLine))
}

// rss returns the resident memory of the service's process, in bytes.
func (s *service) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/PID/status")
}

// cpu returns the CPU time the service's process has used, user and
// system, from /proc (in clock ticks of 10 ms).
func (s *service) cpu() (time.Duration, error) {
	return procCPU(s.cmd.Process.Pid)
}

func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc/PID/stat: no command")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("/proc/PID/stat: too few fields")
	}
	// utime and stime are fields 14 and 15, the 12th and 13th after the name.
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+k) * 10 * time.Millisecond, nil
}

// keyMemory returns slidegate serve's slidegate_ratelimit_key_memory_bytes
// from /metrics: what its key windows hold, as its budget counts it.
func (s *service) keyMemory() (int64, error) {
	resp, err := http.Get("http://" + s.http + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "slidegate_ratelimit_key_memory_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, errors.New("/metrics: no slidegate_ratelimit_key_memory_bytes")
}
