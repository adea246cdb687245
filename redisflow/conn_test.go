package redisflow

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// value returns a random RESP2 value within the bounds of a reply, at most
// depth arrays deep.
func value(r *rand.Rand, depth int) string {
	switch k := r.IntN(7); {
	case k == 0:
		return "+" + strings.Repeat("s", r.IntN(20)) + "\r\n"
	case k == 1:
		return "-ERR " + strings.Repeat("e", r.IntN(20)) + "\r\n"
	case k == 2:
		return ":" + strconv.FormatInt(r.Int64()-r.Int64(), 10) + "\r\n"
	case k == 3:
		return "$-1\r\n"
	case k == 4 || depth == 0:
		s := strings.Repeat("\r\n$*", r.IntN(10)) // a string holds any bytes
		return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n"
	case k == 5:
		return "*-1\r\n"
	}
	n := r.IntN(5)
	v := "*" + strconv.Itoa(n) + "\r\n"
	for range n {
		v += value(r, depth-1)
	}
	return v
}

// Every value of Redis's protocol within the bounds is let through whole,
// in whatever pieces it arrives, each top-level value counted once as it
// begins.
func TestTheGuardLetsThroughEveryValueWithinTheBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var stream string
		values := 1 + r.IntN(4)
		for range values {
			stream += value(r, maxReplyDepth)
		}
		starts := 0
		s := respScanner{onStart: func() error { starts++; return nil }}
		for rest := stream; rest != ""; {
			n := min(1+r.IntN(8), len(rest))
			if good, err := s.scan([]byte(rest[:n])); err != nil || good != n {
				t.Fatalf("scan of %q, in %q: %d good, %v; want all of it", rest[:n], stream, good, err)
			}
			rest = rest[n:]
		}
		if starts != values || s.state != scanType || s.depth != 0 {
			t.Fatalf("%q: %d values begun, state %d, depth %d; want %d, at the start of the next", stream, starts, s.state, s.depth, values)
		}
	}
}

// The guard refuses what breaks the protocol or the bounds before the '\n'
// of the line that breaks them reaches the reader, which so never allocates
// for a length beyond the bounds, nor recurses past them; a value of no type
// Redis has, or a reply that no command waits for, it refuses at its first
// byte.
func TestTheGuardRefusesALengthBeforeItsLineEnds(t *testing.T) {
	for _, tc := range []struct {
		b, want string
		atStart bool // refused at the first byte of a value
	}{
		{"*35184372088832\r\n", "a length of more than", false},
		{"$1099511627776\r\n", "a length of more than", false},
		{"*99999999999999999999\r\n", "a length of more than", false},
		{"*-2\r\n", "a length of -2", false},
		{"$-5\r\n", "a length of -5", false},
		{"*1048576\r\n", "a reply of more than", false},
		{"*2\r\n$16777200\r\n", "a reply of more than", false},
		{strings.Repeat("*1\r\n", maxReplyDepth+1), "nested more than 16 deep", false},
		{":" + strings.Repeat("0", 30) + "1\r\n", "more than 20 digits", false},
		{":99999999999999999999\r\n", "beyond 64 bits", false},
		{"+" + strings.Repeat("a", maxReplyLine+1), "a line longer than", false},
		{"+OK\n", "ends without '\\r'", false},
		{"+OK\rx", "without '\\n'", false},
		{"$1\r\nabc\r\n", "longer than it said", false},
		{"*\r\n", "a byte '\\r' in a number", false},
		{"%1\r\n", "a value of type '%'", true},
		{"\r\n", "a value of type '\\r'", true},
		{":1\r\n:2\r\n", "a reply to no command", true},
	} {
		s := respScanner{}
		awaiting := 1
		s.onStart = func() error {
			if awaiting == 0 {
				return errStray
			}
			awaiting--
			return nil
		}
		good, err := s.scan([]byte(tc.b))
		switch {
		case !errors.Is(err, ErrMalformedReply) || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%.40q: %v; want ErrMalformedReply saying %q", tc.b, err, tc.want)
		case good >= len(tc.b):
			t.Errorf("%.40q: all %d bytes let through", tc.b, good)
		case tc.atStart && good > 0 && tc.b[good-1] != '\n':
			t.Errorf("%.40q: refused %d bytes in, within a value; want at the first byte of one", tc.b, good)
		case !tc.atStart && (good == 0 || tc.b[good-1] == '\n'):
			t.Errorf("%.40q: %d bytes let through, the line that breaks the bounds whole", tc.b, good)
		}
	}
}

// fuzzSeeds are the hostile bytes of the tests, but for the few of
// megabytes, which stand for themselves in the tests that meet them.
func fuzzSeeds() []string {
	var seeds []string
	for _, h := range hostileBytes {
		if len(h.b) < 1<<20 {
			seeds = append(seeds, h.b)
		}
	}
	return append(seeds, honest["limit"], "*5\r\n:0\r\n:0\r\n:5\r\n:7\r\n:9\r\n", "*1\r\n*1\r\n*1\r\n:1\r\n")
}

// Whatever bytes Redis answers a decision with, the decision neither panics
// nor waits past its context, and they are never read as the answer to a
// later call: once Redis answers honestly again, the next decisions are its
// own. The seeds run with the tests; go test -fuzz FuzzAnyReplyIsSafe
// searches for more.
func FuzzAnyReplyIsSafe(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, reply []byte) {
		fr := startFakeRedis(t)
		rdb := redis.NewClient(&redis.Options{Addr: fr.Addr})
		defer rdb.Close()
		c, err := New(rdb, WithInstances(1), WithFallback(FailClosed), WithTimeout(testTimeout),
			withProbeBackoff(time.Millisecond, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l := limiter(t, c, "fuzz", 100, time.Second)
		fr.answer("limit", once(string(reply)))
		st := measureStalls(t)                                       // a loaded machine may leave the process waiting for a core past the deadline
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond) // a reply cut short is waited for this long
		start := time.Now()
		d := l.allow(ctx)
		cancel()
		if took, end := time.Since(start), time.Now(); took-st.within(start, end) > 100*time.Millisecond+latencySlack {
			t.Fatalf("the decision took %v, %v of it the process stalled; its context's deadline was 100ms", took, st.within(start, end))
		}
		if s := c.Stats(); d.Allowed && (!s.Healthy || s.Failures != 0) {
			t.Fatalf("%+v with stats %+v: allowed, though Redis was found failing", d, s)
		}
		afterHostile(t, fr, c, func() bool { return l.allow(bg).Allowed })
	})
}

// The guard's cost per decision: the limit script's call as go-redis writes
// it, and its reply, scanned once each (compare BenchmarkBaselineTimeNow and
// a round trip, BenchmarkBaselinePing).
func BenchmarkGuardScansADecision(b *testing.B) {
	args := []string{"evalsha", limitScript.Hash(), "1", "slidegate:{orders}:1s:10", "1000", "100000", "10", "1", "0", "-1", "0"}
	call := "*" + strconv.Itoa(len(args)) + "\r\n"
	for _, a := range args {
		call += "$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n"
	}
	w, r := []byte(call), []byte(honest["limit"])
	var g guardedConn
	g.rd = respScanner{onStart: func() error { g.awaiting.Add(-1); return nil }}
	g.wr = respScanner{onStart: func() error { g.awaiting.Add(1); return nil }}
	b.SetBytes(int64(len(w) + len(r)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.wr.scan(w); err != nil {
			b.Fatal(err)
		}
		if _, err := g.rd.scan(r); err != nil {
			b.Fatal(err)
		}
	}
}
