package redisflow

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// The bounds of a reply on the cluster's connections. Nothing the cluster
// asks Redis comes near them. Its scripts answer a few integers. The
// client's own questions (HELLO, CLUSTER SLOTS) get a few kilobytes. CLUSTER
// SLOTS of a cluster whose 16384 slots are each on a master of their own
// gets about 6 MiB.
const (
	// maxReplyBytes bounds what one reply may make its reader allocate,
	// counted as each header is read, before its contents arrive: the bytes
	// of its strings and lines, and 16 per element of its arrays (an
	// interface value each). A connection holds at most one reply at a
	// time, so a pool of P connections at most P times this.
	maxReplyBytes = 16 << 20
	// maxReplyLine bounds a line: a simple string, an error, an integer or
	// a length.
	maxReplyLine = 64 << 10
	// maxReplyDepth bounds how deep arrays nest, and so the reader's
	// recursion: a reply nested millions deep would take all the stack.
	maxReplyDepth = 16
)

// A respScanner follows a stream of RESP2 values byte by byte, as they
// arrive, and checks each against the bounds above before the bytes that
// would complete it are let through: a length is
// judged when its line ends, before the reader that would allocate for it
// sees the line's '\n'. It holds no bytes, only its place in the value:
// the line being read, the bytes of a bulk string still to come, and how
// many elements each open array still waits for.
//
// onStart is called as each top-level value begins, before its first byte
// is let through; an error from it stops the scan there. The writing side
// counts commands with it, the reading side refuses a reply that no
// command waits for.
type respScanner struct {
	onStart func() error

	state  uint8
	kind   byte  // the type byte of the line being read
	neg    bool  // the number being read began with '-'
	digits int   // digits of the number being read
	num    int64 // the number being read
	line   int   // bytes of the line being read
	left   int64 // bytes of a bulk string still to come
	budget int64 // what the top-level value may still declare
	depth  int
	open   [maxReplyDepth]int64 // elements each open array still waits for
}

// The states of a respScanner.
const (
	scanType   = iota // a value's type byte is next
	scanLine          // in a simple string or an error
	scanNumber        // in an integer, or a length
	scanLF            // a line's '\r' was read; its '\n' is next
	scanBulk          // in a bulk string's bytes
	scanBulkCR        // a bulk string's bytes were read; '\r' is next
	scanBulkLF        // then '\n'
)

// scan follows b, which comes after what it followed before. It returns
// how many bytes of b are good, all of them unless err says what is wrong
// with the next.
func (s *respScanner) scan(b []byte) (good int, err error) {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch s.state {
		case scanType:
			if s.depth == 0 {
				if s.onStart != nil {
					if err := s.onStart(); err != nil {
						return i, err
					}
				}
				s.budget = maxReplyBytes
			}
			s.kind, s.neg, s.digits, s.num, s.line = c, false, 0, 0, 0
			switch c {
			case '+', '-':
				s.state = scanLine
			case ':', '$', '*':
				s.state = scanNumber
			default:
				return i, malformed("a value of type %q; Redis answers +, -, :, $ or *", c)
			}
		case scanLine:
			if s.line++; s.line > maxReplyLine {
				return i, malformed("a line longer than %d bytes", maxReplyLine)
			}
			switch c {
			case '\r':
				s.state = scanLF
			case '\n':
				return i, malformed("a line that ends without '\\r'")
			}
		case scanNumber:
			if s.line++; s.line > 24 {
				return i, malformed("a number of more than 20 digits")
			}
			switch {
			case c == '-' && s.digits == 0 && !s.neg:
				s.neg = true
			case c >= '0' && c <= '9':
				d := int64(c - '0')
				if s.num > (1<<63-1-d)/10 {
					return i, malformed("a number beyond 64 bits")
				}
				s.num = s.num*10 + d
				s.digits++
				if s.kind != ':' && !s.neg && s.num > maxReplyBytes {
					return i, malformed("a length of more than %d", maxReplyBytes)
				}
			case c == '\r' && s.digits > 0:
				s.state = scanLF
			default:
				return i, malformed("a byte %q in a number", c)
			}
		case scanLF:
			if c != '\n' {
				return i, malformed("a '\\r' without '\\n'")
			}
			if err := s.endLine(); err != nil {
				return i, err
			}
		case scanBulk:
			n := min(s.left, int64(len(b)-i))
			s.left -= n
			i += int(n) - 1
			if s.left == 0 {
				s.state = scanBulkCR
			}
		case scanBulkCR:
			if c != '\r' {
				return i, malformed("a bulk string longer than it said")
			}
			s.state = scanBulkLF
		case scanBulkLF:
			if c != '\n' {
				return i, malformed("a bulk string longer than it said")
			}
			s.endValue()
		}
	}
	return len(b), nil
}

// endLine acts on a line that has just ended, its '\n' not yet let through.
func (s *respScanner) endLine() error {
	s.budget -= int64(s.line)
	if s.budget < 0 {
		return malformed("a reply of more than %d bytes", maxReplyBytes)
	}
	if s.kind != '$' && s.kind != '*' {
		s.endValue()
		return nil
	}
	if s.neg {
		if s.num != 1 {
			return malformed("a length of -%d", s.num)
		}
		s.endValue() // -1: a nil
		return nil
	}
	if s.kind == '$' {
		if s.budget -= s.num; s.budget < 0 {
			return malformed("a reply of more than %d bytes", maxReplyBytes)
		}
		s.left, s.state = s.num, scanBulk
		if s.num == 0 {
			s.state = scanBulkCR
		}
		return nil
	}
	if s.budget -= 16 * s.num; s.budget < 0 {
		return malformed("a reply of more than %d bytes", maxReplyBytes)
	}
	if s.num == 0 {
		s.endValue()
		return nil
	}
	if s.depth == maxReplyDepth {
		return malformed("arrays nested more than %d deep", maxReplyDepth)
	}
	s.open[s.depth] = s.num
	s.depth++
	s.state = scanType
	return nil
}

// endValue ends a value: an element of the innermost open array, which
// may end it too, and so on outwards.
func (s *respScanner) endValue() {
	s.state = scanType
	for s.depth > 0 {
		if s.open[s.depth-1]--; s.open[s.depth-1] > 0 {
			return
		}
		s.depth--
	}
}

// malformed returns an error wrapping ErrMalformedReply that says what is
// wrong.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedReply, fmt.Sprintf(format, args...))
}

// errStray is the error of a reply that no command waits for: garbage after
// a reply, or a second reply to one command.
var errStray = fmt.Errorf("%w: a reply to no command", ErrMalformedReply)

// A guardedConn is a connection to Redis whose replies are checked before
// the client reads them (see respScanner): a reply beyond the bounds, or
// one that no command waits for, closes the connection, and every later
// read or write returns the error, which the client then discards the
// connection for. So no byte sequence from the server makes the client
// allocate more than the bounds, recurse deeper, or read garbage as the
// answer to a later command.
//
// The commands written are counted (awaiting) as they begin, so that a
// reply is let through only if a command waits for it. A client reads and
// writes a connection from one goroutine at a time; the count is atomic
// for a read racing a write.
type guardedConn struct {
	net.Conn
	set      *connSet
	rd, wr   respScanner
	awaiting atomic.Int64 // replies owed: commands begun less replies begun
	failOnce sync.Once
	err      atomic.Pointer[error] // why the connection was closed, if it was
}

// A sysGuardedConn is a guardedConn over a connection that gives its file
// descriptor: the client peeks at it for bytes that came while it was idle
// (a reply to no command) and discards it if some did.
type sysGuardedConn struct{ *guardedConn }

// SyscallConn returns the file descriptor of the connection.
func (c sysGuardedConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

func newGuardedConn(raw net.Conn, set *connSet) net.Conn {
	g := &guardedConn{Conn: raw, set: set}
	g.rd = respScanner{onStart: func() error {
		if g.awaiting.Add(-1) < 0 {
			g.awaiting.Add(1)
			return errStray
		}
		return nil
	}}
	g.wr = respScanner{onStart: func() error { g.awaiting.Add(1); return nil }}
	set.add(g)
	if _, ok := raw.(syscall.Conn); ok {
		return sysGuardedConn{g}
	}
	return g
}

// failed returns the error the connection was closed for, if it was.
func (g *guardedConn) failed() error {
	if p := g.err.Load(); p != nil {
		return *p
	}
	return nil
}

// fail closes the connection for err, the first time.
func (g *guardedConn) fail(err error) {
	g.failOnce.Do(func() {
		g.err.Store(&err)
		g.Conn.Close()
	})
}

// Read reads from the connection what the checks let through: the bytes
// before the first that breaks them, that read returning no error; the next
// read returns the error.
func (g *guardedConn) Read(p []byte) (int, error) {
	if err := g.failed(); err != nil {
		return 0, err
	}
	n, rerr := g.Conn.Read(p)
	good, err := g.rd.scan(p[:n])
	if err != nil {
		g.fail(err)
		if good > 0 {
			return good, nil
		}
		return 0, err
	}
	return n, rerr
}

// Write counts the commands in p, then writes it.
func (g *guardedConn) Write(p []byte) (int, error) {
	if err := g.failed(); err != nil {
		return 0, err
	}
	if _, err := g.wr.scan(p); err != nil {
		g.fail(err)
		return 0, err
	}
	return g.Conn.Write(p)
}

// Close closes the connection and forgets it.
func (g *guardedConn) Close() error {
	g.set.remove(g)
	g.fail(net.ErrClosed)
	return nil
}

// A connSet is the guarded connections of a cluster that are open: those
// that a panic of the client, should one happen, leaves in doubt.
type connSet struct {
	mu    sync.Mutex
	conns map[*guardedConn]struct{}
}

func (s *connSet) add(g *guardedConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = make(map[*guardedConn]struct{})
	}
	s.conns[g] = struct{}{}
}

func (s *connSet) remove(g *guardedConn) {
	s.mu.Lock()
	delete(s.conns, g)
	s.mu.Unlock()
}

// closeAll closes every connection open, for err: the client discards each
// when it next uses it.
func (s *connSet) closeAll(err error) {
	s.mu.Lock()
	conns := make([]*guardedConn, 0, len(s.conns))
	for g := range s.conns {
		conns = append(conns, g)
	}
	s.mu.Unlock()
	for _, g := range conns {
		g.fail(err)
	}
}

// A dialer is a go-redis client's Dialer.
type dialer = func(ctx context.Context, network, addr string) (net.Conn, error)

// guardDial returns a dialer that dials with base and guards what it
// dials, remembering it in set.
func guardDial(base dialer, set *connSet) dialer {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newGuardedConn(raw, set), nil
	}
}
