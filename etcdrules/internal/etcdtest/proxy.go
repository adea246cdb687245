package etcdtest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// A Proxy forwards TCP connections to a server, and can cut them: a test
// gives a client the proxy's endpoint and cuts it to take the server away
// from that client alone, while other clients still reach it.
type Proxy struct {
	// Endpoint is the proxy's URL, http://127.0.0.1:port.
	Endpoint string

	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// NewProxy starts a proxy to the server at target (host:port) on a free
// loopback port, closed when the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("etcdtest: proxy: %v", err)
	}
	p := &Proxy{Endpoint: "http://" + ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.serve()
	}()
	tb.Cleanup(func() {
		ln.Close()
		<-done
		p.Cut()
	})
	return p
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut { // cut while dialling
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go pipe(c, s)
		go pipe(s, c)
	}
}

// pipe copies from one side to the other until either fails, then closes
// both, so that the other direction ends too.
func pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// Cut closes every connection through the proxy and refuses new ones (it
// accepts and closes them at once) until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// Restore forwards new connections again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}
