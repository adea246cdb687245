package slidegate

import (
	"testing"
	"time"
)

// A shed rule's Cap is what it admits: as many requests in flight as it
// says before the next is shed, whatever the CPU; none while the CPU is
// cool. An adaptive rule's Cap is its limit.
func TestAShedRulesCapIsWhatItAdmits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold float64
		cpu       float64
		want      func(limit int64) int64
	}{
		{"cool", 0.8, 0.3, func(int64) int64 { return -1 }},
		{"warm", 0.8, 0.6, func(l int64) int64 { return 2 * l }},
		{"hot", 0.8, 0.85, func(l int64) int64 { return l }},
		{"no CPU signal", -1, 0, func(l int64) int64 { return 2 * l }},
	} {
		cpu := new(fakeCPU)
		g, clk := newGuard(t, Rules{Flow: []FlowRule{
			{Resource: InboundResource, Type: ShedRule, CPUThreshold: tc.threshold},
			{Resource: "b", Type: AdaptiveRule, Limit: 30},
		}}, WithCPU(cpu.usage))
		now := clk.Now()
		// 30 requests a bucket of 100 ms, 10 ms each: 3 in flight at the
		// service's best.
		serve(t, g, now, "a", 30, 10*time.Millisecond, nil, WithInbound())
		now += int64(100 * time.Millisecond)
		cpu.set(tc.cpu)
		st := g.OverloadAt(now)
		if len(st) != 2 || st[0].Limit != 3 || st[1].Cap != st[1].Limit || st[1].Cap != 30 {
			t.Fatalf("%s: status %+v, want a shed rule of limit 3 and an adaptive one of cap 30", tc.name, st)
		}
		want := tc.want(st[0].Limit)
		if st[0].Cap != want {
			t.Errorf("%s: the shed rule's cap is %d, want %d", tc.name, st[0].Cap, want)
		}
		admitted := int64(0)
		for ; admitted < 100; admitted++ {
			if _, err := g.EnterAt(bg, now, "a", WithInbound()); err != nil {
				break
			}
		}
		if (want < 0 && admitted < 100) || (want >= 0 && admitted != want) {
			t.Errorf("%s: the shed rule admitted %d in flight, its cap says %d", tc.name, admitted, st[0].Cap)
		}
	}
}
