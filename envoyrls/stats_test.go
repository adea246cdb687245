package envoyrls

import (
	"fmt"
	"strings"
	"testing"
)

const statsConfig = `domain: d
descriptors:
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: shady
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: user
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: second, requests_per_unit: 5}
  - key: files
    value: shared/*
    share_threshold: true
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
`

// statsOf returns the stats of domain d by key.
func statsOf(svc *Service) map[string]RuleStats {
	out := map[string]RuleStats{}
	for _, r := range svc.Stats().Rules {
		out[r.Domain+" "+r.Key] = r
	}
	return out
}

// Each rule counts its hits within the limit, over it, and over it in
// shadow mode; a rule with detailed_metric or value_to_metric counts each
// value apart, as envoyproxy/ratelimit names them.
func TestStatsCountEachRulesHitsByOutcome(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": statsConfig}, Settings{})
	for range 3 {
		r.ask(t, request("d", desc("plain", "x")))
		r.ask(t, request("d", desc("shady", "x")))
	}
	r.ask(t, request("d", desc("user", "alice")))
	r.ask(t, request("d", desc("user", "alice")))
	r.ask(t, request("d", desc("route", "/a", "method", "GET")))
	r.ask(t, request("d", desc("files", "shared/1")))
	r.ask(t, request("d", desc("files", "shared/2")))
	if _, err := r.call(request("", desc("plain", "x"))); err == nil {
		t.Fatal("no domain was answered")
	}
	got := statsOf(r.svc)
	for key, want := range map[string]RuleStats{
		"d plain":           {Hits: 3, WithinLimit: 2, OverLimit: 1},
		"d shady":           {Hits: 3, WithinLimit: 1, ShadowMode: 2},
		"d user_alice":      {Hits: 2, WithinLimit: 1, OverLimit: 1},
		"d route_/a.method": {Hits: 1, WithinLimit: 1},
		"d files_shared/*":  {Hits: 2, WithinLimit: 2},
		"d " + overrideRule: {},
		"d user":            {},
		"d route.method":    {},
	} {
		g, ok := got[key]
		if !ok {
			t.Errorf("no series %q in %v", key, got)
			continue
		}
		if g.Hits != want.Hits || g.WithinLimit != want.WithinLimit || g.OverLimit != want.OverLimit || g.ShadowMode != want.ShadowMode {
			t.Errorf("%s: %+v, want %+v", key, g, want)
		}
	}
	st := r.svc.Stats()
	if st.Requests != 9 || st.OverLimit != 2 || st.Invalid != 1 {
		t.Errorf("requests %d OK, %d over, %d invalid; want 9, 2, 1", st.Requests, st.OverLimit, st.Invalid)
	}
	if st.KeyMemory <= 0 || st.KeyMemoryLimit != 64<<20 {
		t.Errorf("key memory %d of %d", st.KeyMemory, st.KeyMemoryLimit)
	}
}

// A flood of values of a detailed_metric rule makes at most
// maxValueSeries series; the rest count in the rule's own, and no hit is
// lost.
func TestStatsByValueAreBounded(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": statsConfig}, Settings{})
	long := fmt.Sprintf("%0500d", 7) // a key cut to maxStatsKeyBytes
	r.svc.shouldRateLimitAt(r.clock.Now(), request("d", desc("user", long)))
	const n = 3 * maxValueSeries
	for i := range n {
		if _, err := r.svc.shouldRateLimitAt(r.clock.Now(), request("d", desc("user", fmt.Sprint("u", i)))); err != nil {
			t.Fatal(err)
		}
	}
	var values, hits uint64
	for _, x := range r.svc.Stats().Rules {
		if len(x.Key) > maxStatsKeyBytes+len("…") || strings.Contains(x.Key, "0007") && !strings.HasSuffix(x.Key, "0…") {
			t.Errorf("a key of %d bytes: %.20q", len(x.Key), x.Key)
		}
		if strings.HasPrefix(x.Key, "user_") {
			values++
		}
		if x.Key == "user" || strings.HasPrefix(x.Key, "user_") {
			hits += x.Hits
		}
	}
	if values != maxValueSeries || hits != n+1 {
		t.Fatalf("%d series by value (want %d), %d hits (want %d)", values, maxValueSeries, hits, n+1)
	}
}

// A reload keeps the counts of the rules it keeps and drops those of the
// rules it removes.
func TestStatsFollowTheRulesInForce(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": statsConfig}, Settings{})
	r.ask(t, request("d", desc("plain", "x")))
	c, err := parseFiles(map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: plain\n    rate_limit: {unit: second, requests_per_unit: 9}\n"})
	must(t, err)
	must(t, r.svc.SetConfig(c))
	got := statsOf(r.svc)
	if got["d plain"].Hits != 1 {
		t.Errorf("plain after the reload: %+v", got["d plain"])
	}
	if _, ok := got["d shady"]; ok {
		t.Errorf("the removed rule shady is still shown")
	}
}
