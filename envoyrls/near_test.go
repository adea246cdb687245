package envoyrls

import (
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

const nearConfig = `domain: d
descriptors:
  - key: k
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: one
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: shady
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 5}
`

// near_limit counts, as envoyproxy/ratelimit does with its default ratio
// of 0.8, the hits within the limit that take their key past 80 % of it:
// of a limit of 10, the 9th and the 10th. Here the key's use is what its
// sliding window holds, so hits of the second before count too.
func TestNearLimitCountsTheHitsWithinTheLimitPastEightTenthsOfIt(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": nearConfig}, Settings{})
	start := r.clock.Now()
	at := func(d time.Duration, hits uint32, kv ...string) {
		t.Helper()
		req := request("d", desc(kv...))
		req.HitsAddend = hits
		if _, err := r.svc.shouldRateLimitAt(start+int64(d), req); err != nil {
			t.Fatal(err)
		}
	}
	for range 11 {
		at(0, 1, "k", "one-by-one") // 9th and 10th near, 11th over
	}
	at(0, 5, "k", "by-five") // 0 to 5: none near
	at(0, 5, "k", "by-five") // 5 to 10: 2 past 8
	at(0, 1, "k", "by-five") // over
	// Two descriptors of one key in one request: the second takes it from
	// 5 to 10.
	twice := request("d", desc("k", "twice"), desc("k", "twice"))
	twice.HitsAddend = 5
	if _, err := r.svc.shouldRateLimitAt(start, twice); err != nil {
		t.Fatal(err)
	}
	// 9 hits at 0.6 s; at 1.2 s, a new second on a fixed window, the
	// sliding one still holds them: near. At 1.7 s they have left it.
	for range 9 {
		at(600*time.Millisecond, 1, "k", "sliding")
	}
	at(1200*time.Millisecond, 1, "k", "sliding")
	at(1700*time.Millisecond, 1, "k", "sliding")
	for range 2 {
		at(0, 1, "one", "x") // 80 % of 1 is 0: the one hit allowed is near
	}
	for range 7 {
		at(0, 1, "shady", "x") // 5th near; 6th and 7th shadow_mode, not near
	}

	got := statsOf(r.svc)
	for key, want := range map[string]RuleStats{
		"d k_one-by-one": {Hits: 11, WithinLimit: 10, OverLimit: 1, NearLimit: 2},
		"d k_by-five":    {Hits: 11, WithinLimit: 10, OverLimit: 1, NearLimit: 2},
		"d k_twice":      {Hits: 10, WithinLimit: 10, NearLimit: 2},
		"d k_sliding":    {Hits: 11, WithinLimit: 11, NearLimit: 2},
		"d one":          {Hits: 2, WithinLimit: 1, OverLimit: 1, NearLimit: 1},
		"d shady":        {Hits: 7, WithinLimit: 5, ShadowMode: 2, NearLimit: 1},
	} {
		if g := got[key]; g.Hits != want.Hits || g.WithinLimit != want.WithinLimit || g.OverLimit != want.OverLimit ||
			g.ShadowMode != want.ShadowMode || g.NearLimit != want.NearLimit {
			t.Errorf("%s: %+v, want %+v", key, g, want)
		}
	}
}

// With the global shadow mode, hits over the limit are answered OK and
// counted over_limit, never near_limit.
func TestNearLimitLeavesOutHitsOverTheLimitInTheGlobalShadowMode(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": nearConfig}, Settings{ShadowMode: true})
	for range 4 {
		resp, err := r.svc.shouldRateLimitAt(r.clock.Now(), request("d", desc("one", "x")))
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("shadow mode answered %v", resp.OverallCode)
		}
	}
	if g := statsOf(r.svc)["d one"]; g.NearLimit != 1 || g.OverLimit != 3 {
		t.Errorf("one: %+v, want 1 near, 3 over", g)
	}
}
