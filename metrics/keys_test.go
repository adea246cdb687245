package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/metrics"
)

// The key families, without the namespace.
var keyFamilies = []string{"top_key_requests_allowed", "top_key_requests_blocked"}

// keyedGuard makes a guard on a manual clock whose resource "GET /api" is
// limited to limit requests a second per key. The keys in exact are given
// overrides of that same limit, which gives them exact counts from their
// first request: a key without one is counted in a sketch seeded at random
// until it uses over half its limit, where a seed under which two keys
// share their counters makes one of them look busier than it is. A test
// that asserts exact counts of several keys pins them, and leaves at most
// one key to the sketch.
func keyedGuard(t testing.TB, limit int64, exact ...string) (*slidegate.Guard, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(start)
	g := newGuard(t, slidegate.WithClock(clk))
	var overrides map[string]int64
	for _, key := range exact {
		if overrides == nil {
			overrides = map[string]int64{}
		}
		overrides[key] = limit
	}
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /api", Limit: limit, PerKey: true, Overrides: overrides},
		{Resource: "other", Limit: 1000},
	}}); err != nil {
		t.Fatal(err)
	}
	return g, clk
}

// send enters resource n times with key, and returns how many were
// blocked.
func send(t testing.TB, g *slidegate.Guard, resource, key string, n int) int {
	t.Helper()
	blocked := 0
	for range n {
		err := g.Do(context.Background(), resource, func() error { return nil }, slidegate.WithKey(key))
		switch {
		case errors.Is(err, flow.ErrBlocked):
			blocked++
		case err != nil:
			t.Fatal(err)
		}
	}
	return blocked
}

func TestTopKeysAreExported(t *testing.T) {
	// quiet is the only key counted in the sketch, so no other key's counts
	// can make it look busy enough to be tracked.
	g, _ := keyedGuard(t, 10, "abuser", "busy")
	if b := send(t, g, "GET /api", "abuser", 50); b != 40 {
		t.Fatalf("abuser: %d of 50 blocked, want 40", b)
	}
	send(t, g, "GET /api", "busy", 8)  // tracked: it has requests counted
	send(t, g, "GET /api", "quiet", 1) // under half its limit: not tracked
	send(t, g, "other", "abuser", 5)   // no per-key rule: no keys
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)

	for _, c := range []struct {
		family, key string
		want        float64
	}{
		{"slidegate_top_key_requests_allowed", "abuser", 10},
		{"slidegate_top_key_requests_allowed", "busy", 8},
		{"slidegate_top_key_requests_blocked", "abuser", 40},
	} {
		if got := f.value(t, c.family, labels("resource", "GET /api", "key", c.key)); got != c.want {
			t.Errorf("%s{key=%q} = %v, want %v", c.family, c.key, got, c.want)
		}
	}
	if got := strings.Join(f.labelValues("slidegate_top_key_requests_allowed", "key"), ","); got != "abuser,busy" {
		t.Errorf("keys by allowed: %s, want abuser,busy (quiet is not tracked)", got)
	}
	if got := strings.Join(f.labelValues("slidegate_top_key_requests_blocked", "key"), ","); got != "abuser" {
		t.Errorf("keys by blocked: %s, want abuser alone: a key with no request blocked is not among the most blocked", got)
	}
	if got := f.labelValues("slidegate_top_key_requests_allowed", "resource"); len(got) != 2 || got[0] != "GET /api" {
		t.Errorf("resources of the key families: %q, want GET /api alone", got)
	}
}

func TestTopKeysFollowTheOption(t *testing.T) {
	g, _ := keyedGuard(t, 4, "a", "b", "c", "d", "e")
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		send(t, g, "GET /api", key, 4+int(key[0]-'a')) // a: 0 blocked, e: 4 blocked
	}
	for _, c := range []struct {
		n                int
		allowed, blocked string
	}{
		{metrics.DefaultTopKeys, "a,b,c,d,e", "b,c,d,e"},
		{2, "a,b", "d,e"}, // ties broken by key
		{0, "", ""},
	} {
		f := newScraper(t, metrics.NewCollector(g, metrics.WithTopKeys(c.n))).scrape(t)
		if got := strings.Join(f.labelValues("slidegate_top_key_requests_allowed", "key"), ","); got != c.allowed {
			t.Errorf("WithTopKeys(%d): keys by allowed %s, want %s", c.n, got, c.allowed)
		}
		if got := strings.Join(f.labelValues("slidegate_top_key_requests_blocked", "key"), ","); got != c.blocked {
			t.Errorf("WithTopKeys(%d): keys by blocked %s, want %s", c.n, got, c.blocked)
		}
	}
}

func TestNegativeTopKeysFailRegistering(t *testing.T) {
	err := prometheus.NewPedanticRegistry().Register(metrics.NewCollector(newGuard(t), metrics.WithTopKeys(-1)))
	if err == nil || !strings.Contains(err.Error(), "top keys = -1") {
		t.Errorf("register with WithTopKeys(-1): %v, want an error naming the option and its value", err)
	}
}

// Keys are what clients send: two keys that read the same once cut to 64
// bytes, or once their invalid UTF-8 is replaced, would make two series with
// the same labels, which fails the whole scrape. They are added up.
func TestKeysThatReadTheSameAreAddedUp(t *testing.T) {
	long := strings.Repeat("k", 64)
	g, _ := keyedGuard(t, 10, long+"-one", long+"-two", "bad\xff", "bad\xfe", "é"+long[:62], long[:63]+"é", "a\"b\\c\nd", "")
	send(t, g, "GET /api", long+"-one", 12)  // 10 allowed, 2 blocked
	send(t, g, "GET /api", long+"-two", 7)   // 7 allowed
	send(t, g, "GET /api", "bad\xff", 9)     // 9 allowed
	send(t, g, "GET /api", "bad\xfe", 13)    // 10 allowed, 3 blocked
	send(t, g, "GET /api", "é"+long[:62], 6) // 64 bytes, whole
	send(t, g, "GET /api", long[:63]+"é", 6) // cut within the é
	send(t, g, "GET /api", "a\"b\\c\nd", 6)  // the exposition escapes it
	send(t, g, "GET /api", "", 6)            // the requests without a key
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)

	for _, c := range []struct {
		key              string
		allowed, blocked float64
	}{
		{long, 17, 2},
		{"bad\uFFFD", 19, 3},
		{"é" + long[:62], 6, 0},
		{long[:63] + "\uFFFD", 6, 0},
		{"a\"b\\c\nd", 6, 0},
		{"", 6, 0},
	} {
		l := labels("resource", "GET /api", "key", c.key)
		if got := f.value(t, "slidegate_top_key_requests_allowed", l); got != c.allowed {
			t.Errorf("allowed{key=%q} = %v, want %v", c.key, got, c.allowed)
		}
		if c.blocked == 0 {
			if f.find("slidegate_top_key_requests_blocked", l) != nil {
				t.Errorf("blocked{key=%q} is exported without a request blocked", c.key)
			}
		} else if got := f.value(t, "slidegate_top_key_requests_blocked", l); got != c.blocked {
			t.Errorf("blocked{key=%q} = %v, want %v", c.key, got, c.blocked)
		}
	}
	if n := len(f["slidegate_top_key_requests_allowed"].GetMetric()); n != 6 {
		t.Errorf("%d series of allowed keys, want 6", n)
	}
}

// Two resources whose names read the same as label values share their
// keys' series.
func TestResourcesThatReadTheSameShareTheirKeys(t *testing.T) {
	g := newGuard(t, slidegate.WithClock(clock.NewManual(start)))
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "r\xff", Limit: 10, PerKey: true},
		{Resource: "r\xfe", Limit: 10, PerKey: true},
		{Resource: "r\xfe", Limit: 100, Interval: slidegate.Duration(60e9), PerKey: true},
	}}); err != nil {
		t.Fatal(err)
	}
	send(t, g, "r\xff", "k", 8)
	send(t, g, "r\xfe", "k", 12)
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	l := labels("resource", "r\uFFFD", "key", "k")
	if got := f.value(t, "slidegate_top_key_requests_allowed", l); got != 18 {
		t.Errorf("allowed%v = %v, want 18", l, got)
	}
	if got := f.value(t, "slidegate_top_key_requests_blocked", l); got != 2 {
		t.Errorf("blocked%v = %v, want 2", l, got)
	}
}

func TestKeyFamiliesPassTheLint(t *testing.T) {
	g, _ := keyedGuard(t, 10)
	send(t, g, "GET /api", "abuser", 50)
	problems, err := testutil.CollectAndLint(metrics.NewCollector(g), "slidegate_top_key_requests_allowed", "slidegate_top_key_requests_blocked")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	if n := testutil.CollectAndCount(metrics.NewCollector(g), "slidegate_top_key_requests_allowed", "slidegate_top_key_requests_blocked"); n != 2 {
		t.Errorf("%d key series, want 2", n)
	}
}

// Rules of resources whose names read the same as label values get labels
// of their own, whatever names they were given.
func TestRulesOfResourcesThatReadTheSameHaveLabelsOfTheirOwn(t *testing.T) {
	g := newGuard(t, slidegate.WithClock(clock.NewManual(start)))
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "r\xff", Limit: 1},
		{Resource: "r\xff", Name: "qps#2", Limit: 2},
		{Resource: "r\xfe", Limit: 3},
	}}); err != nil {
		t.Fatal(err)
	}
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	for rule, limit := range map[string]float64{"qps": 1, "qps#2": 2, "qps#3": 3} {
		l := labels("resource", "r\uFFFD", "rule", rule, "type", "qps")
		if got := f.value(t, "slidegate_flow_rule_limit", l); got != limit {
			t.Errorf("slidegate_flow_rule_limit%v = %v, want %v", l, got, limit)
		}
	}
}

// TestKeyMemoryIsWhatTheGuardSays: the key memory families are the bytes the
// guard's per-key rules hold and the bound they share.
func TestKeyMemoryIsWhatTheGuardSays(t *testing.T) {
	clk := clock.NewManual(start)
	g := newGuard(t, slidegate.WithClock(clk), slidegate.WithKeyMemory(3<<20))
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /api", Limit: 10, PerKey: true}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		send(t, g, "GET /api", "user-"+strings.Repeat("x", i%7)+string(rune('a'+i%26)), 1)
	}
	f := newScraper(t, metrics.NewCollector(g)).scrape(t)
	inUse, limit := g.KeyMemory()
	if inUse <= 0 {
		t.Fatal("the per-key rule holds nothing")
	}
	for name, want := range map[string]int64{"slidegate_key_memory_bytes": inUse, "slidegate_key_memory_limit_bytes": limit} {
		ms := f[name].GetMetric()
		if len(ms) != 1 || ms[0].GetGauge().GetValue() != float64(want) || len(ms[0].GetLabel()) != 0 {
			t.Errorf("%s = %v, want one series of %d", name, ms, want)
		}
	}
}
