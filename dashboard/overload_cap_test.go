package dashboard

import (
	"context"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
)

// The overload panel shows the cap a shed rule applies, not the bound it
// learnt: none while the CPU is cool, twice the bound while it is warm,
// the bound while it sheds. The page reads it as the rule's limit; the
// bound is beside it, as what the rule learnt.
func TestTheOverloadPanelShowsTheCapAShedRuleApplies(t *testing.T) {
	f, cpu := overloadFixture(t)
	// 40 requests of 10 ms in one bucket of 100 ms: 4 in flight at the
	// service's best.
	f.inbound(t, "GET /b", 40, 10*time.Millisecond)
	f.clk.Advance(200 * time.Millisecond)
	for _, tc := range []struct {
		name string
		cpu  float64
		want int64 // -1: no cap
	}{
		{"cool", 0.3, -1},
		{"warm", 0.6, 8},
		{"hot", 0.85, 4},
	} {
		cpu.set(tc.cpu)
		f.step(time.Second)
		shed := f.snapshot(t).Overload[0]
		var held []slidegate.Entry
		for len(held) < 100 {
			e, err := f.g.Enter(context.Background(), "GET /b", slidegate.WithInbound())
			if err != nil {
				break
			}
			held = append(held, e)
		}
		admitted := int64(len(held))
		for _, e := range held {
			e.Exit(context.Canceled) // no sample: what the rule learnt stays
		}
		if shed.Limit != tc.want || (tc.want < 0) != (admitted == 100) || (tc.want >= 0 && admitted != tc.want) {
			t.Errorf("CPU %s: the panel shows a limit of %d; the rule admitted %d in flight, want %d (-1: no cap)", tc.name, shed.Limit, admitted, tc.want)
		}
		if shed.Learnt != 4 {
			t.Errorf("CPU %s: the panel shows the rule learnt %d in flight, want 4", tc.name, shed.Learnt)
		}
	}
}
