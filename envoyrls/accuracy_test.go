package envoyrls

import (
	"testing"
	"time"
)

// A burst at each window edge, and more traffic between, never gets more
// than requests_per_unit in any window of one unit, wherever it starts:
// the bound envoyproxy/ratelimit's fixed windows keep only for windows
// that start on a unit's edge (a burst each side of an edge gets twice
// the limit there). The requests go through Envoy's gRPC client; the
// service reads a manual clock.
func TestABurstAtEachWindowEdgeNeverGetsMoreThanTheLimitInAnyWindow(t *testing.T) {
	for _, c := range []struct {
		key   string
		limit int
		unit  time.Duration
	}{
		{"a", 10, time.Second},
		{"files", 3, time.Minute}, // own/*: 3 a minute per value
	} {
		r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
		value := "1"
		if c.key == "files" {
			value = "own/x"
		}
		start := r.clock.Now()
		var allowed []int64
		// Offsets within each unit: just before its edge, on it, just after,
		// and in the middle; a burst of twice the limit at each.
		offsets := []time.Duration{c.unit - time.Millisecond, c.unit, c.unit + time.Millisecond, c.unit + c.unit/2}
		for k := range 12 {
			for _, off := range offsets {
				at := start + int64(k)*int64(c.unit) + int64(off)
				if at < r.clock.Now() {
					continue
				}
				r.clock.Set(at)
				for range 2 * c.limit {
					if r.ask(t, request("d", desc(c.key, value))).OverallCode == ok {
						allowed = append(allowed, at)
					}
				}
			}
		}
		// The most allowed in any window [t, t+unit): the worst starts at an
		// allowed request.
		most := 0
		for i, from := range allowed {
			n := 0
			for _, at := range allowed[i:] {
				if at < from+int64(c.unit) {
					n++
				}
			}
			most = max(most, n)
		}
		if most > c.limit {
			t.Errorf("%s: %d allowed in one window of %v, limit %d", c.key, most, c.unit, c.limit)
		}
		// And the limit is used: over 12 units, at least 5 of them full.
		if len(allowed) < 5*c.limit {
			t.Errorf("%s: only %d allowed over 12 units of %d", c.key, len(allowed), c.limit)
		}
		t.Logf("%s: %d allowed over 12 units; most in one window %d of %d", c.key, len(allowed), most, c.limit)
	}
}
