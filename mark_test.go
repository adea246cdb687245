package slidegate

import (
	"testing"
	"time"
)

// TestARequestEndingInALaterBucketCountsItsOutcomeThere holds the resource's
// counts to the bucket of the time each happens, whichever way Exit finds
// it: a request that enters near the end of one bucket and exits in the
// next counts as allowed in the first and as succeeded in the second, so
// that once the first has left the window only its outcome is read.
func TestARequestEndingInALaterBucketCountsItsOutcomeThere(t *testing.T) {
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 1000}}})
	for _, via := range []string{"name", "handle"} {
		name := "a"
		if via == "handle" {
			name = "b"
		}
		start := clk.Now() + int64(900*time.Millisecond)
		var e Entry
		var err error
		if via == "handle" {
			e, err = g.Resource(name).EnterAt(bg, start)
		} else {
			e, err = g.EnterAt(bg, start, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		e.ExitAt(start+int64(200*time.Millisecond), nil)
		both, _ := g.StatsAt(start+int64(1200*time.Millisecond), name)
		if both.Allowed != 1 || both.Succeeded != 1 || both.AvgRT != 200*time.Millisecond {
			t.Fatalf("%s: with both buckets in the window: %+v", via, both)
		}
		later, _ := g.StatsAt(start+int64(9700*time.Millisecond), name)
		if later.Allowed != 0 || later.Succeeded != 1 || later.AvgRT != 200*time.Millisecond {
			t.Fatalf("%s: with the entry's bucket out of the window: allowed %d, succeeded %d, mean %v; want 0, 1, 200ms",
				via, later.Allowed, later.Succeeded, later.AvgRT)
		}
		clk.Advance(time.Minute)
	}
}
