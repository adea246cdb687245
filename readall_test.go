package slidegate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/hooks"
	"github.com/slidegate/slidegate/window"
)

// TestEachResourceReadsTheTotalsResourcesReturns drives a guard with random
// traffic, blocked, failed, in flight, inbound and past its cap on
// resources, and holds the one-pass read of the exporters to what
// Resources and ResponseTimeTotals say of each resource.
func TestEachResourceReadsTheTotalsResourcesReturns(t *testing.T) {
	clk := clock.NewManual(int64(time.Hour))
	g, err := New(WithClock(clk), WithMaxResources(20))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(Rules{
		Flow:     []FlowRule{{Resource: "r1", Limit: 3}, {Resource: "r2", Limit: 2, Shadow: true}},
		Breakers: []BreakerRule{{Resource: "r3", Strategy: ErrorRatioBreaker, Threshold: 0.1}},
	}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var held []Entry
	for range 3000 {
		clk.Advance(time.Duration(rng.IntN(int(5 * time.Millisecond))))
		name := fmt.Sprint("r", rng.IntN(40)) // twice the cap: some go to OtherResource
		var opts []EntryOption
		if rng.IntN(3) == 0 {
			opts = append(opts, WithInbound())
		}
		e, err := g.EnterAt(context.Background(), clk.Now(), name, opts...)
		if err != nil {
			continue
		}
		switch rng.IntN(4) {
		case 0:
			held = append(held, e) // in flight
		case 1:
			e.ExitAt(clk.Now()+int64(rng.IntN(int(time.Second))), errors.New("failed"))
		default:
			e.ExitAt(clk.Now()+int64(rng.IntN(int(time.Second))), nil)
		}
	}
	want := g.Resources()
	var got []hooks.Resource
	var lat, wantLat window.SketchTotals
	hooks.Resources(g, func(r *hooks.Resource) {
		got = append(got, *r)
		r.Latency.TotalsInto(&lat)
		if !g.ResponseTimeTotals(r.Name, &wantLat) || lat != wantLat {
			t.Errorf("%s: response times %v, want those ResponseTimeTotals reads", r.Name, lat.Count())
		}
	})
	slices.SortFunc(got, func(a, b hooks.Resource) int { return strings.Compare(a.Name, b.Name) })
	if len(got) != len(want) || len(want) < 20 {
		t.Fatalf("read %d resources, Resources returns %d (want at least 20)", len(got), len(want))
	}
	other := false
	for i, w := range want {
		r := got[i]
		if r.Name != w.Resource || r.Inbound != w.Inbound || r.InFlight != w.InFlight || Totals(r.Totals) != w.Totals {
			t.Errorf("read %+v, Resources returns %+v", r, w)
		}
		other = other || r.Name == OtherResource
	}
	if !other {
		t.Errorf("no %s among %d resources: the test reaches no resource past the cap", OtherResource, len(want))
	}
	if len(held) == 0 {
		t.Error("no request held in flight")
	}
}
