package redisflow

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/flow"
)

// keyedImpostor answers every run of the keyed script with answer, and the
// other scripts with 1.
type keyedImpostor struct {
	*redis.Client // never dialled
	answer        any
}

func (f *keyedImpostor) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	if sha == keyedScript.Hash() {
		cmd.SetVal(f.answer)
	} else {
		cmd.SetVal(int64(1))
	}
	return cmd
}

// hostileKeyedReplies are answers the keyed script cannot give, for a
// limiter of two windows of 1s in 10 buckets (a retry of at most 21 bucket
// widths, 2.1s).
var hostileKeyedReplies = map[string]any{
	"nil":                     nil,
	"a status":                "OK",
	"a grant at 0":            int64(0),
	"a grant at a negative":   int64(-7),
	"an empty array":          []any{},
	"2 elements":              ints(0, 1),
	"4 elements":              ints(0, 1, 2, 3),
	"a million elements":      make([]any, 1_000_000),
	"strings":                 []any{"0", "1", "2"},
	"a nil element":           []any{int64(0), nil, int64(9)},
	"a float":                 []any{int64(0), 1.5, int64(9)},
	"a nested array":          []any{int64(0), []any{int64(1)}, int64(9)},
	"window -1":               ints(-1, 5, 9),
	"window 2 of 2":           ints(2, 5, 9),
	"retry 0":                 ints(0, 0, 9),
	"retry negative":          ints(1, -3, 9),
	"retry past two windows":  ints(1, 2_100_001, 9),
	"retry overflowing":       ints(0, 1<<62, 9),
	"a window past the int32": ints(1<<40, 5, 9),
}

var hostileKeyedWindows = []flow.KeyWindow{
	{Limit: 100, Interval: time.Second, Buckets: 10},
	{Limit: 1000, Interval: time.Second, Buckets: 20},
}

// A reply the keyed script cannot give is an error, as an outage is: the
// decision is the fallback's and Redis is marked down. None allows a
// request, remembers a refusal, or panics.
func TestHostileKeyedRepliesAreErrorsNeverDecisions(t *testing.T) {
	for name, answer := range hostileKeyedReplies {
		t.Run(name, func(t *testing.T) {
			f := &keyedImpostor{Client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), answer: answer}
			defer f.Client.Close()
			c, err := New(f, WithInstances(1), WithFallback(FailClosed), WithTimeout(testTimeout), withProbeBackoff(time.Hour, time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			l := keyed(t, c, "hostile", hostileKeyedWindows...)
			for i := range 3 {
				if d, j := l.allowKey(bg, "k"); d.Allowed || d.Reason != flow.RateLimited || d.RetryAfter != 0 || j != 0 {
					t.Fatalf("decision %d: %+v by window %d; want the FailClosed fallback's: refused by window 0, no RetryAfter", i, d, j)
				}
			}
			if s := c.Stats(); s.Healthy || s.Failures != 1 || s.RoundTrips != 1 || s.Fallbacks != 3 {
				t.Errorf("stats %+v; want Redis marked down by the one round trip, and 3 decisions by the fallback", s)
			}
			if _, _, ok := l.blocks.find("k", 0, 1); ok {
				t.Error("a refusal remembered from a reply the script cannot give")
			}
		})
	}
}

func TestDecodeKeyedReplyReadsWhatTheScriptAnswers(t *testing.T) {
	c, err := New(client(t, "127.0.0.1:1"), WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ws := keyed(t, c, "decode", hostileKeyedWindows...).windows
	for _, tc := range []struct {
		name string
		v    any
		want keyedReply
	}{
		{"granted", int64(1_700_000_000_000_000), keyedReply{window: -1, now: 1_700_000_000_000_000}},
		{"refused by window 0, the shortest retry", ints(0, 1, 123), keyedReply{window: 0, retry: time.Microsecond, now: 123}},
		{"refused by window 1, the longest retry", ints(1, 2_050_000, 123), keyedReply{window: 1, retry: 2050 * time.Millisecond, now: 123}},
	} {
		got, err := decodeKeyedReply(tc.v, ws)
		if err != nil || got != tc.want {
			t.Errorf("%s: decodeKeyedReply(%v) = %+v, %v; want %+v", tc.name, tc.v, got, err, tc.want)
		}
	}
	if ws[0].maxRetry != 2_100_000 || ws[1].maxRetry != 2_050_000 {
		t.Errorf("maxRetry %d, %d; want 21 widths of 100ms and 41 of 50ms", ws[0].maxRetry, ws[1].maxRetry)
	}
	for name, v := range hostileKeyedReplies {
		r, err := decodeKeyedReply(v, ws)
		if !errors.Is(err, ErrMalformedReply) || r != (keyedReply{}) {
			t.Errorf("%s: decodeKeyedReply = %+v, %v; want the zero reply and ErrMalformedReply", name, r, err)
			continue
		}
		if n := len(err.Error()); n > 160 {
			t.Errorf("%s: an error of %d bytes: %.200s", name, n, err)
		}
	}
	_, err = decodeKeyedReply(ints(1, 2_050_001, 9), ws)
	if want := "retry = 2050001; want between 1 and 2050000 µs for window 1"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a retry past window 1's: %v; want it named: %q", err, want)
	}
}
