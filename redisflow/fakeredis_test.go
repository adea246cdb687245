package redisflow

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// A fakeRedis is a server on a free loopback port that speaks just enough
// of Redis's protocol for a go-redis client, and answers each run of a
// script with the bytes a test chooses: a Redis, or a proxy in front of
// one, that the test controls byte by byte.
type fakeRedis struct {
	Addr string

	ln      net.Listener
	mu      sync.Mutex
	answers map[string]func(call int) []byte // by script name; nil: honest
	calls   map[string]int                   // runs of each script so far
	conns   map[net.Conn]bool                // open connections
	wg      sync.WaitGroup

	hungUp  atomic.Int64 // connections the client closed
	closing atomic.Bool
}

// scriptNames name the cluster's scripts by digest, for fakeRedis.
var scriptNames = map[string]string{
	limitScript.Hash():     "limit",
	keyedScript.Hash():     "keyed",
	heartbeatScript.Hash(): "heartbeat",
	pingScript.Hash():      "ping",
	leaveScript.Hash():     "leave",
}

// honest is what Redis answers each script: the limit script allows one
// permit and leases one more on top if asked, the keyed script allows, the
// heartbeat counts one instance.
var honest = map[string]string{
	"limit":     "*5\r\n:1\r\n:1\r\n:0\r\n:7\r\n:9\r\n",
	"keyed":     ":123\r\n",
	"heartbeat": ":1\r\n",
	"ping":      ":1\r\n",
	"leave":     ":1\r\n",
}

// startFakeRedis starts a fakeRedis, closed when the test ends. Every
// script is answered honestly until the test says otherwise (answer).
func startFakeRedis(t testing.TB) *fakeRedis {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRedis{Addr: ln.Addr().String(), ln: ln, answers: map[string]func(int) []byte{},
		calls: map[string]int{}, conns: map[net.Conn]bool{}}
	f.wg.Go(f.accept)
	t.Cleanup(f.close)
	return f
}

// answer makes the server answer runs of the named script with what reply
// returns for the call's number (0 for the first run from now on); nil
// bytes answer honestly.
func (f *fakeRedis) answer(script string, reply func(call int) []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[script] = reply
	f.calls[script] = 0
}

// once answers the first run with b, and the others honestly.
func once(b string) func(int) []byte {
	return func(call int) []byte {
		if call == 0 {
			return []byte(b)
		}
		return nil
	}
}

func (f *fakeRedis) close() {
	f.closing.Store(true)
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeRedis) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns[c] = true
		f.mu.Unlock()
		f.wg.Go(func() { f.serve(c) })
	}
}

// serve answers the commands of one connection until the client closes it,
// or the server is closed.
func (f *fakeRedis) serve(c net.Conn) {
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		c.Close()
		if !f.closing.Load() { // the client closed it: a read or write failed
			f.hungUp.Add(1)
		}
	}()
	rd := bufio.NewReader(c)
	for {
		args, err := readCommand(rd)
		if err != nil {
			return
		}
		if _, err := c.Write(f.reply(args)); err != nil {
			return
		}
	}
}

// reply is the server's answer to one command.
func (f *fakeRedis) reply(args []string) []byte {
	cmd := strings.ToUpper(args[0])
	switch {
	case cmd == "EVALSHA" && len(args) > 1:
		name, ok := scriptNames[args[1]]
		if !ok {
			return []byte("-NOSCRIPT No matching script.\r\n")
		}
		f.mu.Lock()
		answer, call := f.answers[name], f.calls[name]
		f.calls[name]++
		f.mu.Unlock()
		if answer != nil {
			if b := answer(call); b != nil {
				return b
			}
		}
		return []byte(honest[name])
	case cmd == "SCRIPT" && len(args) == 3 && strings.EqualFold(args[1], "LOAD"):
		sum := sha1.Sum([]byte(args[2]))
		return []byte("$40\r\n" + hex.EncodeToString(sum[:]) + "\r\n")
	case cmd == "PING":
		return []byte("+PONG\r\n")
	case cmd == "CLIENT", cmd == "SELECT", cmd == "AUTH":
		return []byte("+OK\r\n")
	}
	// HELLO too: the client then speaks RESP2, as to an old Redis.
	return []byte("-ERR unknown command '" + args[0] + "'\r\n")
}

// readCommand reads one command, an array of bulk strings, as clients send
// them.
func readCommand(rd *bufio.Reader) ([]string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 || n > 1024 {
		return nil, fmt.Errorf("bad array length: %q", line)
	}
	args := make([]string, n)
	for i := range args {
		line, err := rd.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil || size < 0 || size > 1<<20 {
			return nil, fmt.Errorf("bad bulk length: %q", line)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}
