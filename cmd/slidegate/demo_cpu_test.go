package main

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
)

// busyCgroup is a cgroup of capacity CPUs that other work keeps at usage.
type busyCgroup struct{ usage, capacity float64 }

func (c busyCgroup) Usage() float64    { return c.usage }
func (c busyCgroup) Capacity() float64 { return c.capacity }

// On a machine that other work keeps at 100%, the demo's shed rules read
// what the demo itself uses (here 5% of 2 CPUs), and the spike tells its
// story: nothing is shed as overloaded, and the slow searches open their
// breaker. Replayed on a manual clock: what is measured is the rules.
func TestOtherWorkOnTheMachineLeavesTheDemoItsStory(t *testing.T) {
	var used time.Duration
	own := newOwnCPU(busyCgroup{usage: 1, capacity: 2}, func() (time.Duration, error) { return used, nil })
	for now := time.Duration(0); now <= 2*time.Second; now += ownCPUInterval {
		used = now / 10 // a tenth of a CPU: 5% of the cgroup's 2
		if err := own.sampleAt(int64(now)); err != nil {
			t.Fatal(err)
		}
	}
	if u := own.Usage(); u < 0.04 || u > 0.06 {
		t.Fatalf("the shed rules read %.3f, want the process's 0.05", u)
	}
	if c := own.Cgroup(); c != 1 {
		t.Fatalf("the cgroup reads %.3f, want 1", c)
	}
	for seed := range uint64(3) {
		r := replayDemo(t, own.Usage, func(time.Duration) *phase { return &phases[1] }, 10*time.Second, seed)
		st, _ := r.g.Stats(slidegate.InboundResource)
		in := st.Totals
		search, _ := r.g.Stats("GET /api/search")
		if shed := in.BlockedBy[flow.Overloaded]; shed > 0 {
			t.Errorf("seed %d: %d requests shed as overloaded while only other work keeps the CPU busy", seed, shed)
		}
		if search.Totals.BlockedBy[flow.BreakerOpen] == 0 {
			t.Errorf("seed %d: the slow searches never opened their breaker (blocked by reason %v)", seed, search.Totals.BlockedBy)
		}
	}
}
