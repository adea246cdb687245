package envoyrls

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The example configuration of envoyproxy/ratelimit means through
// slidegate what it means there: nested descriptors, a default value,
// unlimited, a limit of 0, shadow mode, replaces, an unknown descriptor
// and an unknown domain.
func TestTheExampleConfigDecidesAsEnvoyproxyRatelimitDoes(t *testing.T) {
	r := newRig(t, readDir(t, "testdata/envoyproxy/examples"), Settings{})

	// source_cluster=proxy, destination_cluster=mock: 1 a minute.
	mock := desc("source_cluster", "proxy", "destination_cluster", "mock")
	resp := r.ask(t, request("rl", mock))
	st := resp.Statuses[0]
	if resp.OverallCode != ok || st.CurrentLimit.RequestsPerUnit != 1 || st.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE ||
		st.LimitRemaining != 0 || st.DurationUntilReset.AsDuration() != time.Minute+3*time.Second {
		t.Fatalf("first mock request: %v", resp)
	}
	resp = r.ask(t, request("rl", mock))
	if resp.OverallCode != over || resp.Statuses[0].Code != over || resp.Statuses[0].DurationUntilReset.AsDuration() <= 0 {
		t.Fatalf("second mock request: %v", resp)
	}

	// foo=anything: 2 a minute, per value; foo, bar=anything: 3.
	for i, want := range []rlsv3.RateLimitResponse_Code{ok, ok, over} {
		if c := r.ask(t, request("rl", desc("foo", "x"))).OverallCode; c != want {
			t.Fatalf("foo=x request %d: %v, want %v", i, c, want)
		}
	}
	if c := r.ask(t, request("rl", desc("foo", "y"))).OverallCode; c != ok {
		t.Fatalf("foo=y after foo=x was refused: %v: each value has its own window", c)
	}
	for i, want := range []uint32{2, 1, 0} {
		st := r.ask(t, request("rl", desc("foo", "x", "bar", "z"))).Statuses[0]
		if st.Code != ok || st.LimitRemaining != want || st.CurrentLimit.RequestsPerUnit != 3 {
			t.Fatalf("foo, bar=z request %d: %v, want OK with %d remaining of 3", i, st, want)
		}
	}

	// bar=banned: 0 a minute; baz=shady: shadow mode; bay: unlimited.
	if resp := r.ask(t, request("rl", desc("foo", "x", "bar", "banned"))); resp.OverallCode != over {
		t.Fatalf("banned: %v", resp)
	}
	for range 5 {
		resp := r.ask(t, request("rl", desc("foo", "x", "baz", "shady")))
		if resp.OverallCode != ok || resp.Statuses[0].Code != ok {
			t.Fatalf("shadow mode refused: %v", resp)
		}
	}
	st = r.ask(t, request("rl", desc("foo", "x", "bay", "anything"))).Statuses[0]
	if st.Code != ok || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
		t.Fatalf("unlimited: %v", st)
	}

	// category=account (4 a minute) replaces bkthomps (bar=bkthomps, 1 a
	// minute): with both asked, bkthomps has no limit.
	for i := range 4 {
		resp := r.ask(t, request("rl", desc("category", "account"), desc("foo", "q", "bar", "bkthomps")))
		if resp.OverallCode != ok || resp.Statuses[1].CurrentLimit != nil {
			t.Fatalf("request %d with bkthomps replaced: %v", i, resp)
		}
	}
	// Alone, bkthomps is 1 a minute.
	if c, _ := codesOf(r.ask(t, request("rl", desc("foo", "r", "bar", "bkthomps")))); c != ok {
		t.Fatal("first bkthomps refused")
	}
	if c, _ := codesOf(r.ask(t, request("rl", desc("foo", "r", "bar", "bkthomps")))); c != over {
		t.Fatal("second bkthomps allowed")
	}

	// No rule, a descriptor deeper than the rules, an unknown domain: OK,
	// no limit.
	for _, req := range []*rlsv3.RateLimitRequest{
		request("rl", desc("nothing", "here")),
		request("rl", desc("source_cluster", "proxy", "destination_cluster", "mock", "deeper", "x")),
		request("unknown", mock),
	} {
		resp := r.ask(t, req)
		if resp.OverallCode != ok || resp.Statuses[0].CurrentLimit != nil {
			t.Fatalf("%v: %v", req, resp)
		}
	}

	// A minute and a bucket (3 s) later, mock has room again.
	r.clock.Advance(time.Minute + 3*time.Second)
	if c := r.ask(t, request("rl", mock)).OverallCode; c != ok {
		t.Fatalf("mock a minute later: %v", c)
	}
}

const hitsConfig = `domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: q1
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: files
    value: shared/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: files
    value: own/*
    rate_limit: {unit: minute, requests_per_unit: 3}
`

// hits_addend counts several hits at once, on the request and on a
// descriptor; a descriptor's hits_addend of 0 checks without counting.
func TestHitsAddendCountsThatManyAndZeroOnlyChecks(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	req := request("d", desc("a", "1"))
	req.HitsAddend = 7
	if st := r.ask(t, req).Statuses[0]; st.Code != ok || st.LimitRemaining != 3 {
		t.Fatalf("7 of 10: %v", st)
	}
	if st := r.ask(t, req).Statuses[0]; st.Code != over || st.LimitRemaining != 0 {
		t.Fatalf("7 more of 10: %v", st)
	}
	check := desc("a", "1")
	check.HitsAddend = wrapperspb.UInt64(0)
	for range 3 {
		if st := r.ask(t, request("d", check)).Statuses[0]; st.Code != ok || st.LimitRemaining != 3 {
			t.Fatalf("a check: %v, want OK with 3 remaining, nothing counted", st)
		}
	}
	three := desc("a", "1")
	three.HitsAddend = wrapperspb.UInt64(3)
	req.Descriptors = []*commonv3.RateLimitDescriptor{three} // the descriptor's 3, not the request's 7
	if st := r.ask(t, req).Statuses[0]; st.Code != ok || st.LimitRemaining != 0 {
		t.Fatalf("3 more of 10: %v", st)
	}
	// More hits than the limit never fit.
	huge := desc("a", "2")
	huge.HitsAddend = wrapperspb.UInt64(math.MaxUint64)
	if st := r.ask(t, request("d", huge)).Statuses[0]; st.Code != over {
		t.Fatalf("2^64-1 hits: %v", st)
	}
}

// A request that one descriptor refuses is counted in none: the other
// descriptors keep their room. (envoyproxy/ratelimit counts them all
// unless STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT is set.)
func TestARefusedRequestIsCountedInNoDescriptor(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	both := request("d", desc("a", "1"), desc("b", "1"))
	if c, cs := codesOf(r.ask(t, both)); c != ok || !slices.Equal(cs, []rlsv3.RateLimitResponse_Code{ok, ok}) {
		t.Fatalf("first: %v %v", c, cs)
	}
	for range 5 {
		resp := r.ask(t, both)
		if c, cs := codesOf(resp); c != over || !slices.Equal(cs, []rlsv3.RateLimitResponse_Code{ok, over}) {
			t.Fatalf("refused by b: %v %v", c, cs)
		}
		if resp.Statuses[0].LimitRemaining != 9 {
			t.Fatalf("a counted a refused request: %v", resp.Statuses[0])
		}
	}
	if st := r.ask(t, request("d", desc("a", "1"))).Statuses[0]; st.LimitRemaining != 8 {
		t.Fatalf("a alone: %v, want 8 remaining", st)
	}
}

// Quota mode refuses a request only when every quota descriptor is over,
// as in envoyproxy/ratelimit.
func TestQuotaModeRefusesOnlyWhenEveryQuotaIsOver(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	r.ask(t, request("d", desc("q1", "x")))
	if c, cs := codesOf(r.ask(t, request("d", desc("q1", "x"), desc("q2", "x")))); c != ok || !slices.Equal(cs, []rlsv3.RateLimitResponse_Code{over, ok}) {
		t.Fatalf("one quota over: %v %v", c, cs)
	}
	if c, _ := codesOf(r.ask(t, request("d", desc("q1", "x"), desc("q2", "x")))); c != over {
		t.Fatalf("both quotas over: %v", c)
	}
}

// Values that a share_threshold pattern matches share one window; those a
// plain pattern matches have one each.
func TestShareThresholdValuesShareOneWindow(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	for i, v := range []string{"shared/a", "shared/b", "shared/c", "shared/d"} {
		want := ok
		if i == 3 {
			want = over
		}
		if c := r.ask(t, request("d", desc("files", v))).OverallCode; c != want {
			t.Fatalf("%s: %v, want %v", v, c, want)
		}
	}
	for _, v := range []string{"own/a", "own/b", "own/c", "own/d"} {
		if c := r.ask(t, request("d", desc("files", v))).OverallCode; c != ok {
			t.Fatalf("%s: %v: each value its own window", v, c)
		}
	}
}

// A descriptor's own limit, set in Envoy's route, replaces the config's.
func TestADescriptorsOwnLimitIsEnforced(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	d := desc("a", "own")
	d.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE}
	for i, want := range []rlsv3.RateLimitResponse_Code{ok, ok, over} {
		st := r.ask(t, request("d", d)).Statuses[0]
		if st.Code != want || st.CurrentLimit.RequestsPerUnit != 2 || st.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE {
			t.Fatalf("request %d: %v, want %v of 2 a minute", i, st, want)
		}
	}
	r.clock.Advance(time.Second) // the config's 10 a second would allow it now; 2 a minute does not
	if st := r.ask(t, request("d", d)).Statuses[0]; st.Code != over {
		t.Fatalf("a second later: %v", st)
	}
}

// With the global shadow mode every answer is OK, and each status still
// says its descriptor's decision.
func TestGlobalShadowModeAnswersOKAndTellsTheDecision(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{ShadowMode: true})
	r.ask(t, request("d", desc("b", "1")))
	resp := r.ask(t, request("d", desc("b", "1")))
	if c, cs := codesOf(resp); c != ok || cs[0] != over {
		t.Fatalf("shadow: %v %v", c, cs)
	}
}

// A key asked by two descriptors of one request must fit both hits: with
// room for one, the request is refused and counted in neither.
func TestAKeyAskedTwiceInOneRequestMustFitBoth(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	twice := request("d", desc("b", "1"), desc("b", "1"))
	if c, cs := codesOf(r.ask(t, twice)); c != over || !slices.Equal(cs, []rlsv3.RateLimitResponse_Code{ok, over}) {
		t.Fatalf("b=1 twice with room for one: %v %v", c, cs)
	}
	if c := r.ask(t, request("d", desc("b", "1"))).OverallCode; c != ok {
		t.Fatalf("b=1 once after the refused request: %v: it was counted", c)
	}
}

// With the headers on, each answer tells the descriptor with the least
// remaining, or the one over its limit, as RateLimit-* headers.
func TestTheRateLimitHeadersTellTheTightestDescriptor(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{Headers: true})
	headers := func(resp *rlsv3.RateLimitResponse) string {
		var hs []string
		for _, h := range resp.ResponseHeadersToAdd {
			hs = append(hs, h.Key+": "+h.Value)
		}
		return strings.Join(hs, ", ")
	}
	both := request("d", desc("a", "1"), desc("files", "own/x"))
	if got := headers(r.ask(t, both)); got != "RateLimit-Limit: 3, RateLimit-Remaining: 2, RateLimit-Reset: 63" {
		t.Fatalf("first: %q", got)
	}
	r.ask(t, both)
	r.ask(t, both)
	r.clock.Advance(10 * time.Second) // the first hits leave 63 s after they came: 53 s from now
	resp := r.ask(t, both)
	if got := headers(resp); resp.OverallCode != over || got != "RateLimit-Limit: 3, RateLimit-Remaining: 0, RateLimit-Reset: 53" {
		t.Fatalf("over: %v %q", resp.OverallCode, got)
	}
	if got := headers(r.ask(t, request("d", desc("nothing", "x")))); got != "" {
		t.Fatalf("no limit: %q", got)
	}
	r2 := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	if got := headers(r2.ask(t, both)); got != "" {
		t.Fatalf("headers off: %q", got)
	}
}

// The configurations of envoyproxy/ratelimit's integration tests decide
// what those tests expect of it: values of a share_threshold pattern share
// one limit, those of a plain pattern have one each; a key of 1 a minute
// allows one; 20 a minute allows 20.
func TestTheIntegrationConfigsDecideAsTheirTestsExpect(t *testing.T) {
	r := newRig(t, readDir(t, "testdata/envoyproxy/integration"), Settings{})
	const domain = "share-threshold-test"
	for range 10 {
		r.ask(t, request(domain, desc("files", "files/a.pdf")))
	}
	st := r.ask(t, request(domain, desc("files", "files/b.csv"))).Statuses[0]
	if st.Code != over || st.CurrentLimit.RequestsPerUnit != 10 || st.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_HOUR || st.LimitRemaining != 0 {
		t.Fatalf("files/b.csv after 10 of files/a.pdf: %v", st)
	}
	for i := range 10 {
		st := r.ask(t, request(domain, desc("files_no_share", fmt.Sprint("files_no_share/", i)))).Statuses[0]
		if st.Code != ok || st.LimitRemaining != 9 {
			t.Fatalf("files_no_share/%d: %v, want OK with 9 remaining", i, st)
		}
	}
	if c, _ := codesOf(r.ask(t, request("basic", desc("one_per_minute", "x")))); c != ok {
		t.Fatal("one_per_minute: the first refused")
	}
	if c, _ := codesOf(r.ask(t, request("basic", desc("one_per_minute", "x")))); c != over {
		t.Fatal("one_per_minute: the second allowed")
	}
	for i := range 21 {
		want := ok
		if i == 20 {
			want = over
		}
		if c, _ := codesOf(r.ask(t, request("another", desc("key2", "v")))); c != want {
			t.Fatalf("key2 request %d: %v, want %v", i, c, want)
		}
	}
}
