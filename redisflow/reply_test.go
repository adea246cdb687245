package redisflow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// impostor answers every run of the limit script with answer, as a server
// that is not Redis, or a proxy that mangles replies, would; the other
// scripts it answers with 1.
type impostor struct {
	*redis.Client // never dialled: every call is answered here
	answer        any
}

func (f *impostor) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	if sha == limitScript.Hash() {
		cmd.SetVal(f.answer)
	} else {
		cmd.SetVal(int64(1))
	}
	return cmd
}

// hostileReplies are answers the limit script cannot give: of another type,
// of another length, with elements of another type, or with values outside
// what the script returns for a limiter of lease 10 and an interval of 1s in
// 10 buckets (a retry of at most 21 bucket widths, 2.1s).
var hostileReplies = map[string]any{
	"nil":                     nil,
	"a status":                "OK",
	"an integer":              int64(1),
	"an empty array":          []any{},
	"4 elements":              []any{int64(1), int64(1), int64(0), int64(7)},
	"6 elements":              []any{int64(1), int64(1), int64(0), int64(7), int64(9), int64(0)},
	"a million elements":      make([]any, 1_000_000),
	"strings":                 []any{"1", "1", "0", "7", "9"},
	"a nil element":           []any{int64(1), nil, int64(0), int64(7), int64(9)},
	"a nested array":          []any{int64(1), []any{int64(1)}, int64(0), int64(7), int64(9)},
	"a float":                 []any{int64(1), 1.5, int64(0), int64(7), int64(9)},
	"an error element":        []any{int64(1), redis.Nil, int64(0), int64(7), int64(9)},
	"allowed 2":               []any{int64(2), int64(1), int64(0), int64(7), int64(9)},
	"allowed -1":              []any{int64(-1), int64(0), int64(1), int64(7), int64(9)},
	"granted above the lease": []any{int64(1), int64(1_000_000), int64(0), int64(7), int64(9)},
	"granted below the need":  []any{int64(1), int64(0), int64(0), int64(7), int64(9)},
	"granted negative":        []any{int64(1), int64(-5), int64(0), int64(7), int64(9)},
	"granted while blocked":   []any{int64(0), int64(3), int64(1000), int64(7), int64(9)},
	"retry 0":                 []any{int64(0), int64(0), int64(0), int64(7), int64(9)},
	"retry negative":          []any{int64(0), int64(0), int64(-1), int64(7), int64(9)},
	"retry past two windows":  []any{int64(0), int64(0), int64(2_100_001), int64(7), int64(9)},
	"retry overflowing":       []any{int64(0), int64(0), int64(math.MaxInt64), int64(7), int64(9)},
}

// A reply the limit script cannot give is an error, as an outage is: the
// decision is the fallback's (here FailClosed, which blocks) and Redis is
// marked down. No such reply allows a request, takes a lease, or gives a
// RetryAfter it did not mean, and none panics.
func TestHostileRepliesAreErrorsNeverDecisions(t *testing.T) {
	for name, answer := range hostileReplies {
		t.Run(name, func(t *testing.T) {
			f := &impostor{Client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), answer: answer}
			defer f.Client.Close()
			c, err := New(f, WithInstances(1), WithFallback(FailClosed), WithTimeout(testTimeout),
				withProbeBackoff(time.Hour, time.Hour)) // no probe finds the impostor well during the test
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			l := limiter(t, c, "hostile", 100, time.Second, WithBuckets(10), WithLease(10, time.Hour))
			for i := range 3 {
				if d := l.allow(bg); d.Allowed || d.Reason != flow.RateLimited || d.RetryAfter != 0 {
					t.Fatalf("decision %d: %+v; want the FailClosed fallback's: blocked, no RetryAfter", i, d)
				}
			}
			if s := c.Stats(); s.Healthy || s.Failures != 1 || s.RoundTrips != 1 || s.Fallbacks != 3 {
				t.Errorf("stats %+v; want Redis marked down by the one round trip, and 3 decisions by the fallback", s)
			}
			if ls := l.lease.Load(); ls != nil {
				t.Errorf("a lease of %d permits taken from a reply the script cannot give", ls.left.Load())
			}
		})
	}
}

// The query of hostileReplies: one permit needed, 9 more wanted as a lease,
// in a window of 10 buckets of 100ms.
var (
	hostileQuery    = query{limit: 100, need: 1, extra: 9, backBucket: -1}
	hostileMaxRetry = maxRetry(100_000, 10)
)

func ints(v ...int64) []any {
	a := make([]any, len(v))
	for i, x := range v {
		a[i] = x
	}
	return a
}

func TestDecodeReplyReadsWhatTheScriptAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    []any
		want reply
	}{
		{"allowed, no lease", ints(1, 1, 0, 17, 123), reply{allowed: true, granted: 1, bucket: 17, now: 123}},
		{"allowed, the whole lease", ints(1, 10, 0, 17, 123), reply{allowed: true, granted: 10, bucket: 17, now: 123}},
		{"blocked, the shortest retry", ints(0, 0, 1, 17, 123), reply{retry: time.Microsecond, bucket: 17, now: 123}},
		{"blocked, the longest retry", ints(0, 0, 2_100_000, 17, 123), reply{retry: 2100 * time.Millisecond, bucket: 17, now: 123}},
		{"a negative bucket and time", ints(1, 1, 0, -5, -6), reply{allowed: true, granted: 1, bucket: -5, now: -6}},
	} {
		got, err := decodeReply(tc.v, hostileQuery, hostileMaxRetry)
		if err != nil || got != tc.want {
			t.Errorf("%s: decodeReply(%v) = %+v, %v; want %+v", tc.name, tc.v, got, err, tc.want)
		}
	}
	if hostileMaxRetry != 2_100_000 {
		t.Errorf("maxRetry(100ms in µs, 10) = %d; want 21 widths, 2100000", hostileMaxRetry)
	}
	// Giving a lease back asks for nothing: it grants nothing.
	if got, err := decodeReply(ints(1, 0, 0, 3, 4), query{limit: 5, back: 2, backBucket: 3}, 10); err != nil || !got.allowed || got.granted != 0 {
		t.Errorf("the reply to a give-back: %+v, %v; want allowed, 0 granted", got, err)
	}
}

// Every reply the script cannot give is an error wrapping ErrMalformedReply,
// whose message names what is wrong without copying the reply: a server
// that answers a million elements gets a line, not megabytes, in the log.
func TestDecodeReplyReturnsBriefErrorsForMalformedReplies(t *testing.T) {
	for name, v := range hostileReplies {
		r, err := decodeReply(v, hostileQuery, hostileMaxRetry)
		if !errors.Is(err, ErrMalformedReply) || r != (reply{}) {
			t.Errorf("%s: decodeReply = %+v, %v; want the zero reply and ErrMalformedReply", name, r, err)
			continue
		}
		if n := len(err.Error()); n > 160 {
			t.Errorf("%s: an error of %d bytes: %.200s", name, n, err)
		}
	}
	_, err := decodeReply(ints(1, 11, 0, 7, 9), hostileQuery, hostileMaxRetry)
	if want := "granted = 11; want between 1 and 10"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a grant above the lease: %v; want it named: %q", err, want)
	}
	_, err = decodeReply([]any{int64(1), "1", int64(0), int64(7), int64(9)}, hostileQuery, hostileMaxRetry)
	if want := "granted is a string; want an integer"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a string element: %v; want it named: %q", err, want)
	}
}

// maxRetry is the script's bound, and converts to a time.Duration without
// overflow whatever the window.
func TestMaxRetryConvertsWithoutOverflow(t *testing.T) {
	for _, tc := range []struct{ width, k, want int64 }{
		{1, 1, 3},
		{40_000, 25, 2_040_000},
		{math.MaxInt64 / 1000, 1, math.MaxInt64 / 1000},
		{1 << 43, 1000, math.MaxInt64 / 1000},
	} {
		got := maxRetry(tc.width, tc.k)
		if got != tc.want || time.Duration(got)*time.Microsecond < 0 {
			t.Errorf("maxRetry(%d, %d) = %d; want %d, positive in nanoseconds", tc.width, tc.k, got, tc.want)
		}
	}
}

func TestDecodingAReplyAllocatesNothing(t *testing.T) {
	// As cmd.Val() gives it: an interface value already, which a []any
	// would become only by allocating.
	var allowedReply, blockedReply any = ints(1, 10, 0, 17, 123), ints(0, 0, 5, 17, 123)
	var sink reply
	if a := testing.AllocsPerRun(1000, func() {
		sink, _ = decodeReply(allowedReply, hostileQuery, hostileMaxRetry)
		sink, _ = decodeReply(blockedReply, hostileQuery, hostileMaxRetry)
	}); a != 0 {
		t.Errorf("decoding a reply allocates %v; want 0", a)
	}
	_ = sink
}

// Release reports a malformed reply rather than take it for a success.
func TestReleaseReturnsAMalformedReply(t *testing.T) {
	f := &impostor{Client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), answer: ints(1, 3, 0, 7, 9)}
	defer f.Client.Close()
	c, err := New(f, WithInstances(1), WithTimeout(testTimeout), WithClock(clock.NewManual(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := limiter(t, c, "release", 100, time.Second, WithLease(10, time.Hour))
	if d := l.allow(bg); !d.Allowed {
		t.Fatalf("Allow = %+v; want allowed, with a lease of 2", d)
	}
	f.answer = "OK"
	if err := l.Release(bg); !errors.Is(err, ErrMalformedReply) {
		t.Errorf("Release = %v; want ErrMalformedReply", err)
	}
}

// Whatever Redis answers, decodeReply returns an error or a reply the script
// could have given: never a panic, a grant outside the query, or a retry out
// of range.
func FuzzDecodeReply(f *testing.F) {
	f.Add(uint8(5), int64(1), int64(1), int64(0), int64(7), int64(9), uint8(0))
	f.Add(uint8(5), int64(0), int64(0), int64(300), int64(7), int64(9), uint8(0))
	f.Add(uint8(6), int64(1), int64(1), int64(0), int64(7), int64(9), uint8(3))
	f.Fuzz(func(t *testing.T, n uint8, a0, a1, a2, a3, a4 int64, kinds uint8) {
		vals := [...]int64{a0, a1, a2, a3, a4}
		v := make([]any, int(n)%8)
		for i := range v {
			var x any = vals[i%len(vals)]
			switch (kinds >> (i % 8)) & 1 {
			case 1:
				x = fmt.Sprint(x) // a string where an integer belongs
			}
			v[i] = x
		}
		r, err := decodeReply(v, hostileQuery, hostileMaxRetry)
		if err != nil {
			if !errors.Is(err, ErrMalformedReply) {
				t.Fatalf("decodeReply(%v): %v; want ErrMalformedReply", v, err)
			}
			return
		}
		switch {
		case r.allowed && (r.granted < hostileQuery.need || r.granted > hostileQuery.need+hostileQuery.extra || r.retry != 0):
			t.Fatalf("decodeReply(%v) = %+v: a grant outside the query", v, r)
		case !r.allowed && (r.granted != 0 || r.retry < time.Microsecond || r.retry > time.Duration(hostileMaxRetry)*time.Microsecond):
			t.Fatalf("decodeReply(%v) = %+v: a block outside the script's answers", v, r)
		}
	})
}
