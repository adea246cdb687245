package dashboard

import (
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
)

// shadowFixture is a fixture with these rules, and a sample taken since:
//
//	flow[0]  GET /a  qps 2 per second, in shadow
//	flow[1]  GET /b  qps 100
func shadowFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, nil)
	if err := f.g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /a", Limit: 2, Shadow: true},
		{Resource: "GET /b", Limit: 100},
	}}); err != nil {
		t.Fatal(err)
	}
	f.step(time.Second)
	return f
}

// resourceAt returns the resource called name among the resources of the
// decoded snapshot or event v.
func resourceAt(t *testing.T, v any, name string) any {
	t.Helper()
	for _, r := range objectAt(t, v, "resources").([]any) {
		if objectAt(t, r, "name") == name {
			return r
		}
	}
	t.Fatalf("no resource %q in %v", name, objectAt(t, v, "resources"))
	return nil
}

// number returns the JSON number at path in v.
func number(t *testing.T, v any, path ...any) float64 {
	t.Helper()
	m, ok := v.(map[string]any)
	if len(path) == 1 && ok {
		// objectAt takes a missing field and a zero alike for absent.
		x, present := m[path[0].(string)]
		if !present {
			t.Fatalf("no %q in %v", path[0], v)
		}
		n, _ := x.(float64)
		return n
	}
	return number(t, objectAt(t, v, path[:len(path)-1]...), path[len(path)-1])
}

// A request a shadow rule would have blocked is allowed, and the dashboard
// tells it apart: the would-block total in the stats of the resource and of
// the inbound traffic, and its rate per second in the points and the
// history, beside a blocked rate of 0.
func TestSnapshotsAndEventsCarryWhatShadowRulesWouldBlock(t *testing.T) {
	f := shadowFixture(t)
	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var first any
	s.next(t, "snapshot", &first)
	if got := number(t, objectAt(t, first, "inbound"), "stats", "totals", "would_block"); got != 0 {
		t.Errorf("the first snapshot's inbound would-block total: %v, want 0", got)
	}

	// 5 requests in one second against a shadow limit of 2: 3 would have
	// been blocked, all 5 are allowed.
	f.inbound(t, "GET /a", 5, time.Millisecond)
	f.inbound(t, "GET /b", 5, time.Millisecond)
	f.step(2 * time.Second)
	var ev any
	s.next(t, "sample", &ev)
	for _, c := range []struct {
		what      string
		r         any
		wouldRate float64
		would     float64
	}{
		{"GET /a", resourceAt(t, ev, "GET /a"), 1.5, 3},
		{"GET /b", resourceAt(t, ev, "GET /b"), 0, 0},
		{"the inbound traffic", objectAt(t, ev, "inbound"), 1.5, 3},
	} {
		if got := number(t, c.r, "stats", "totals", "would_block"); got != c.would {
			t.Errorf("%s: the event's would-block total %v, want %v", c.what, got, c.would)
		}
		if got := number(t, c.r, "stats", "totals", "blocked"); got != 0 {
			t.Errorf("%s: the event's blocked total %v, want 0: a shadow rule blocks nothing", c.what, got)
		}
		if got := number(t, c.r, "point", "would_block_rate"); got != c.wouldRate {
			t.Errorf("%s: the event's would-block rate %v, want %v", c.what, got, c.wouldRate)
		}
		if got := number(t, c.r, "point", "blocked_rate"); got != 0 {
			t.Errorf("%s: the event's blocked rate %v, want 0", c.what, got)
		}
	}

	// One more second, with 3 more that would have been blocked: the total
	// grows, the rate is of that second.
	f.inbound(t, "GET /a", 5, time.Millisecond)
	f.step(time.Second)
	s.next(t, "sample", &ev)
	if got := number(t, resourceAt(t, ev, "GET /a"), "point", "would_block_rate"); got != 3 {
		t.Errorf("the second event's would-block rate %v, want 3", got)
	}
	snap := rawJSON(t, f.d, "/api/snapshot")
	a := resourceAt(t, snap, "GET /a")
	if got := number(t, a, "stats", "totals", "would_block"); got != 6 {
		t.Errorf("the snapshot's would-block total %v, want 6", got)
	}
	for _, r := range []struct {
		what string
		v    any
	}{{"GET /a", a}, {"the inbound traffic", objectAt(t, snap, "inbound")}} {
		h := objectAt(t, r.v, "history").(map[string]any)
		rates, _ := h["would_block_rate"].([]any)
		ts, _ := h["t"].([]any)
		if len(rates) != len(ts) || len(rates) < 3 {
			t.Fatalf("%s: the history's would_block_rate %v, want one per point of %v", r.what, h["would_block_rate"], ts)
		}
		if got := rates[len(rates)-2:]; got[0] != 1.5 || got[1] != 3.0 {
			t.Errorf("%s: the history's newest would-block rates %v, want [1.5 3]", r.what, got)
		}
	}
	if got := objectAt(t, snap, "rules", "flow", 0, "shadow"); got != true {
		t.Errorf("the snapshot's flow[0] shadow: %v, want true", got)
	}

	// The field names, as the page reads them.
	totals := []string{"allowed", "blocked", "failed", "rt", "succeeded", "would_block"}
	if got := keys(t, "totals", objectAt(t, a, "stats", "totals")); !slices.Equal(got, totals) {
		t.Errorf("totals have the fields %q, want %q", got, totals)
	}
	history := []string{"allowed_rate", "blocked_rate", "breaker", "failed_rate", "in_flight", "p50", "p99", "t", "would_block_rate"}
	if got := keys(t, "a history", objectAt(t, a, "history")); !slices.Equal(got, history) {
		t.Errorf("a history has the fields %q, want %q", got, history)
	}
}

// Rules.Shadow puts every rule in shadow: the rules the frames carry say
// so, and what the rules would have blocked is counted as for one rule.
func TestEveryRuleInShadowIsCarriedAndCounted(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.g.SetRules(slidegate.Rules{Shadow: true, Flow: []slidegate.FlowRule{{Resource: "GET /a", Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	f.step(time.Second)
	f.inbound(t, "GET /a", 4, time.Millisecond)
	f.step(time.Second)
	snap := rawJSON(t, f.d, "/api/snapshot")
	if got := objectAt(t, snap, "rules", "shadow"); got != true {
		t.Errorf("the snapshot's rules: shadow %v, want true", got)
	}
	if got := number(t, resourceAt(t, snap, "GET /a"), "stats", "totals", "would_block"); got != 3 {
		t.Errorf("the would-block total %v, want 3", got)
	}
}

// Totals only grow while the guard keeps a resource; a would-block total
// that went down means the resource was made again, and the rate is of the
// new counts, never negative.
func TestTheWouldBlockRateBeginsAgainWithTheResource(t *testing.T) {
	var prev, cur slidegate.Totals
	prev.Allowed, prev.WouldBlockBy[flow.RateLimited] = 100, 40
	cur.Allowed, cur.WouldBlockBy[flow.RateLimited] = 120, 4
	if r := rates(prev, cur, 2); r.wouldBlock != 2 || r.allowed != 60 {
		t.Errorf("rates after the would-block total went from 40 to 4 in 2 s: %+v, want would block 2/s, allowed 60/s", r)
	}
	cur.WouldBlockBy[flow.RateLimited] = 50
	if r := rates(prev, cur, 2); r.wouldBlock != 5 || r.allowed != 10 {
		t.Errorf("rates after the would-block total went from 40 to 50 in 2 s: %+v, want would block 5/s, allowed 10/s", r)
	}
}

// The would-block rate fits in what was the padding of a point: the
// history costs what the documentation says, 64 bytes a point.
func TestAPointIs64Bytes(t *testing.T) {
	if n := unsafe.Sizeof(point{}); n != 64 {
		t.Errorf("a point takes %d bytes, want 64 (doc.go, WithHistory)", n)
	}
}

// A breaker in shadow that opens blocks nothing: its resource does not show
// it open; the breakers list does, marked.
func TestAShadowBreakerDoesNotMarkItsResource(t *testing.T) {
	f := newFixture(t, nil)
	one := int64(1)
	if err := f.g.SetRules(slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "db", Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: &one, Shadow: true},
		{Resource: "cache", Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: &one},
	}}); err != nil {
		t.Fatal(err)
	}
	f.requests(t, "db", 1, time.Millisecond, true)    // opens the shadow breaker
	f.requests(t, "cache", 1, time.Millisecond, true) // opens the enforced one
	f.step(time.Second)
	s := f.snapshot(t)
	for _, r := range s.Resources {
		switch r.Name {
		case "db":
			if r.Breaker != "" {
				t.Errorf("db, behind a shadow breaker only, shows breaker %q", r.Breaker)
			}
		case "cache":
			if r.Breaker != "open" {
				t.Errorf("cache shows breaker %q, want open", r.Breaker)
			}
		}
	}
	if len(s.Breakers) != 2 || !s.Breakers[0].Shadow || s.Breakers[0].State != "open" || s.Breakers[1].Shadow {
		t.Errorf("breakers %+v, want the shadow one open and marked, the other not marked", s.Breakers)
	}
}
