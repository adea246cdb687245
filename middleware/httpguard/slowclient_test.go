package httpguard_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// A slowService is a real HTTP server guarded by Middleware: POST /api
// reads its body and works for work, GET /other works for work. Its
// clients come from loopback addresses of their own (127.0.0.0/8 is all
// loopback), so that keys by client address tell them apart.
type slowService struct {
	srv  *httptest.Server
	g    *slidegate.Guard
	port string
}

func newSlowService(t *testing.T, g *slidegate.Guard, work time.Duration, opts ...httpguard.Option) *slowService {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		time.Sleep(work)
	})
	mux.HandleFunc("GET /other", func(http.ResponseWriter, *http.Request) { time.Sleep(work) })
	srv := httptest.NewServer(httpguard.Middleware(g, opts...)(mux))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return &slowService{srv: srv, g: g, port: port}
}

// dialer dials from the loopback address from.
func dialer(from string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
}

// slowUploads opens n POST /api requests from the address from, whose
// bodies come at a byte a second until stop is closed; it returns once
// every request's headers are sent.
func (s *slowService) slowUploads(t *testing.T, n int, from string, stop <-chan struct{}, wg *sync.WaitGroup) {
	t.Helper()
	for range n {
		c, err := dialer(from).Dial("tcp", "127.0.0.1:"+s.port)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(c, "POST /api HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte{'x'}); err != nil {
						return
					}
				}
			}
		}()
	}
}

// legit sends rate requests a second for d, alternating POST /api with a
// small body and GET /other, from the loopback addresses of from in turn,
// and returns how many were sent and how many succeeded.
func (s *slowService) legit(t *testing.T, rate int, d time.Duration, from ...string) (sent, ok int64) {
	t.Helper()
	clients := make([]*http.Client, len(from))
	for i, a := range from {
		clients[i] = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
			DialContext: dialer(a).DialContext, MaxIdleConnsPerHost: 256,
		}}
		defer clients[i].CloseIdleConnections()
	}
	var wg sync.WaitGroup
	var good atomic.Int64
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		c := clients[sent%int64(len(clients))]
		post := sent%2 == 0
		sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp *http.Response
			var err error
			if post {
				resp, err = c.Post("http://127.0.0.1:"+s.port+"/api", "text/plain", strings.NewReader("hello"))
			} else {
				resp, err = c.Get("http://127.0.0.1:" + s.port + "/other")
			}
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				good.Add(1)
			}
		}()
	}
	wg.Wait()
	return sent, good.Load()
}

// heldCPU is a CPU reading a test holds.
type heldCPU struct{ v atomic.Value }

func (c *heldCPU) usage() float64 { return c.v.Load().(float64) }

func cpuAt(v float64) *heldCPU {
	c := new(heldCPU)
	c.v.Store(v)
	return c
}

// While the CPU is idle, slow uploads cost the legitimate traffic nothing,
// however many there are: the shed rule caps nothing below half its
// threshold, and the time the server waits for a body is no response time
// it learns from. (Before, 10 uploads at a byte a second got every
// legitimate request refused within seconds.)
func TestSlowUploadsCostNothingWhileTheCPUIsCool(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: 12 s")
	}
	for _, tc := range []struct {
		uploads int
		work    time.Duration
	}{{0, 5 * time.Millisecond}, {10, 5 * time.Millisecond}, {25, 50 * time.Millisecond}, {100, 5 * time.Millisecond}} {
		cpu := cpuAt(0.05)
		g, err := slidegate.New(slidegate.WithCPU(cpu.usage))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
			{Resource: slidegate.InboundResource, Type: slidegate.ShedRule, CPUThreshold: 0.9},
		}}); err != nil {
			t.Fatal(err)
		}
		s := newSlowService(t, g, tc.work)
		s.legit(t, 200, time.Second, "127.0.0.2") // the shed rule learns the service's capacity
		stop := make(chan struct{})
		var wg sync.WaitGroup
		s.slowUploads(t, tc.uploads, "127.0.0.9", stop, &wg)
		time.Sleep(500 * time.Millisecond)
		sent, ok := s.legit(t, 200, 1500*time.Millisecond, "127.0.0.2", "127.0.0.3")
		close(stop)
		wg.Wait()
		t.Logf("%d slow uploads, %v handlers: %d of %d legitimate requests succeeded", tc.uploads, tc.work, ok, sent)
		if float64(ok) < 0.999*float64(sent) {
			t.Errorf("%d slow uploads, %v handlers, CPU at 5%%: %d of %d legitimate requests succeeded, want 99.9%%", tc.uploads, tc.work, ok, sent)
		}
	}
}

// While the service is overloaded (the CPU at its threshold), a client
// that holds many slow uploads gets its share of the places and no more:
// the other clients keep 90% of what they get without it. The same holds
// without a CPU signal (cpu_threshold -1), where the rule caps the
// requests in flight all the time.
func TestASlowClientGetsOnlyItsShareWhileTheServiceIsOverloaded(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: 12 s")
	}
	run := func(uploads int, threshold float64) (sent, ok int64) {
		cpu := cpuAt(0.05)
		g, err := slidegate.New(slidegate.WithCPU(cpu.usage))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
			{Resource: slidegate.InboundResource, Type: slidegate.ShedRule, CPUThreshold: threshold, Share: "key"},
		}}); err != nil {
			t.Fatal(err)
		}
		s := newSlowService(t, g, 5*time.Millisecond, httpguard.KeyFromClient(httpguard.ClientIP{}))
		s.legit(t, 200, time.Second, "127.0.0.2") // the shed rule learns the service's capacity
		cpu.v.Store(0.95)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		s.slowUploads(t, uploads, "127.0.0.9", stop, &wg)
		time.Sleep(time.Second)
		sent, ok = s.legit(t, 200, 2*time.Second, "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
		close(stop)
		wg.Wait()
		return sent, ok
	}
	sent, without := run(0, 0.9)
	base := float64(without) / float64(sent)
	t.Logf("CPU hot: %d of %d legitimate requests succeeded without the slow client", without, sent)
	for _, threshold := range []float64{0.9, -1} {
		sent, with := run(25, threshold)
		r := float64(with) / float64(sent)
		t.Logf("cpu_threshold %v: %d of %d legitimate requests succeeded with a slow client's 25 uploads", threshold, with, sent)
		if r < 0.9*base {
			t.Errorf("cpu_threshold %v: a slow client with 25 uploads left the others %.1f%% of their requests, against %.1f%% without it: want at least 90%% of that", threshold, 100*r, 100*base)
		}
	}
}
