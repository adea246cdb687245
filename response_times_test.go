package slidegate

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/window"

	"github.com/slidegate/slidegate/internal/exported"
)

// binOf is the bin of response time d in [0, exported.BinRange), found by
// searching the edges exported.BinLow states.
func binOf(d time.Duration) int {
	for i := exported.Bins - 1; i >= 0; i-- {
		if exported.BinLow(i) <= d {
			return i
		}
	}
	panic("no bin")
}

// TestResponseTimeTotalsMatchAModel enters and exits requests with random
// response times and batches, inbound or not, over several minutes on the
// manual clock, and compares each resource's totals by bin, and the inbound
// traffic's, with counts kept by brute force.
func TestResponseTimeTotalsMatchAModel(t *testing.T) {
	clk := clock.NewManual(int64(time.Hour))
	g, err := New(WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	names := []string{"GET /a", "GET /b", "db"}
	want := map[string]*window.SketchTotals{}
	for _, n := range append(names, "(inbound)") {
		want[n] = new(window.SketchTotals)
	}
	count := func(into *window.SketchTotals, d time.Duration, n int64) {
		if d >= exported.BinRange {
			into.Over += n
		} else {
			into.Bins[binOf(d)] += n
		}
	}
	for range 5000 {
		name := names[rng.IntN(len(names))]
		var opts []EntryOption
		in := name != "db" && rng.IntN(2) == 0
		if in {
			opts = append(opts, WithInbound())
		}
		n := int64(1)
		if rng.IntN(5) == 0 {
			n = 1 + rng.Int64N(50)
			opts = append(opts, WithCount(n))
		}
		var d time.Duration
		switch rng.IntN(4) {
		case 0:
			d = time.Duration(rng.Int64N(3000)) // the linear bins and just above
		case 1:
			d = max(exported.BinLow(rng.IntN(exported.Bins))-time.Duration(rng.Int64N(2)), 0) // at an edge or just below
		case 2:
			d = exported.BinRange + time.Duration(rng.Int64N(int64(time.Minute)))
		default:
			d = time.Duration(rng.Int64N(int64(3 * time.Second)))
		}
		start := clk.Now()
		e, err := g.EnterAt(bg, start, name, opts...)
		if err != nil {
			t.Fatal(err)
		}
		e.ExitAt(start+int64(d), nil)
		count(want[name], d, n)
		if in {
			count(want["(inbound)"], d, n)
		}
		clk.Advance(time.Duration(rng.Int64N(int64(200 * time.Millisecond))))
	}
	var got window.SketchTotals
	for _, name := range names {
		if !g.ResponseTimeTotals(name, &got) {
			t.Fatalf("ResponseTimeTotals(%q): no statistics", name)
		}
		if got != *want[name] {
			t.Errorf("%s: totals by bin differ from the model's: %d requests, want %d", name, got.Count(), want[name].Count())
		}
		s, _ := g.StatsAt(clk.Now(), name)
		if got.Count() != s.Totals.Succeeded+s.Totals.Failed {
			t.Errorf("%s: the bins count %d requests, Totals %d", name, got.Count(), s.Totals.Succeeded+s.Totals.Failed)
		}
	}
	g.ResponseTimeTotals(InboundResource, &got)
	if got != *want["(inbound)"] {
		t.Errorf("inbound: totals by bin differ from the model's: %d requests, want %d", got.Count(), want["(inbound)"].Count())
	}

	got.Over = 7 // left over from an earlier read, which an unknown name must clear
	if g.ResponseTimeTotals("never entered", &got) || got != (window.SketchTotals{}) {
		t.Error("an unknown resource reports totals")
	}
}

func TestResponseTimeTotalsAllocateNothing(t *testing.T) {
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	mustEnter(t, g, "a").Exit(nil)
	var into window.SketchTotals
	if n := testing.AllocsPerRun(100, func() {
		g.ResponseTimeTotals("a", &into)
		g.ResponseTimeTotals(InboundResource, &into)
	}); n != 0 {
		t.Fatalf("%v allocations per read", n)
	}
}
