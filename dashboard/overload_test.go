package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
)

// fakeCPU is a CPU usage the test sets, read by the guard through
// slidegate.WithCPU.
type fakeCPU struct{ bits atomic.Uint64 }

func (c *fakeCPU) set(v float64)  { c.bits.Store(math.Float64bits(v)) }
func (c *fakeCPU) usage() float64 { return math.Float64frombits(c.bits.Load()) }

// overloadFixture is a fixture whose guard reads cpu, with these rules:
//
//	qps       GET /a     qps 1000          (not an overload rule)
//	shed      (inbound)  shed at CPU ≥ 0.8
//	adaptive  GET /a     adaptive from 50
//
// and a sample taken since.
func overloadFixture(t *testing.T) (*fixture, *fakeCPU) {
	t.Helper()
	cpu := new(fakeCPU)
	f := newFixture(t, []slidegate.Option{slidegate.WithCPU(cpu.usage)})
	if err := f.g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /a", Limit: 1000},
		{Resource: slidegate.InboundResource, Type: slidegate.ShedRule, CPUThreshold: 0.8},
		{Resource: "GET /a", Type: slidegate.AdaptiveRule, Limit: 50},
	}}); err != nil {
		t.Fatal(err)
	}
	f.step(time.Second)
	return f, cpu
}

// inbound sends n inbound requests to resource at the clock's time, each
// taking rt, and ends them in order; it fails the test if one is blocked.
func (f *fixture) inbound(t *testing.T, resource string, n int, rt time.Duration) {
	t.Helper()
	es := make([]slidegate.Entry, n)
	for i := range es {
		e, err := f.g.Enter(context.Background(), resource, slidegate.WithInbound())
		if err != nil {
			t.Fatalf("request %d of %d to %s: %v", i, n, resource, err)
		}
		es[i] = e
	}
	for _, e := range es {
		e.ExitAt(f.clk.Now()+int64(rt), nil)
	}
}

func TestSnapshotsAndEventsCarryTheOverloadRules(t *testing.T) {
	f, cpu := overloadFixture(t)
	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var first snapshotJSON
	s.next(t, "snapshot", &first)
	// Before anything is learnt: the shed rule has no limit yet.
	want := []overloadJSON{
		{Resource: "(inbound)", Rule: "shed", Type: "shed", Limit: -1, Learnt: -1, CPU: 0},
		{Resource: "GET /a", Rule: "adaptive", Type: "adaptive", Limit: 50, Learnt: 50, CPU: -1},
	}
	if !slices.Equal(first.Overload, want) {
		t.Errorf("the first snapshot's overload rules:\n%+v, want\n%+v", first.Overload, want)
	}

	// 40 requests of 10 ms in one bucket of 100 ms: 4 in flight at the
	// service's best. One more ends after the adaptive rule's first window
	// and gives it its baseline; one stays in flight.
	f.inbound(t, "GET /a", 40, 10*time.Millisecond)
	f.clk.Advance(200 * time.Millisecond)
	f.inbound(t, "GET /a", 1, 10*time.Millisecond)
	cpu.set(0.9)
	held, err := f.g.Enter(context.Background(), "GET /a", slidegate.WithInbound())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Exit(nil)
	adaptiveLimit := f.g.Overload()[1].Limit
	f.step(time.Second)

	want = []overloadJSON{
		{Resource: "(inbound)", Rule: "shed", Type: "shed", Limit: 4, Learnt: 4, InFlight: 1, Shedding: true, CPU: 0.9},
		{Resource: "GET /a", Rule: "adaptive", Type: "adaptive", Limit: adaptiveLimit, Learnt: adaptiveLimit, InFlight: 1, CPU: -1, Baseline: 0.010},
	}
	var ev eventJSON
	s.next(t, "sample", &ev)
	if !slices.Equal(ev.Overload, want) {
		t.Errorf("the event's overload rules:\n%+v, want\n%+v", ev.Overload, want)
	}
	if snap := f.snapshot(t); !slices.Equal(snap.Overload, want) {
		t.Errorf("the snapshot's overload rules:\n%+v, want\n%+v", snap.Overload, want)
	}

	// The field names, as the page reads them.
	o := objectAt(t, rawJSON(t, f.d, "/api/snapshot"), "overload", 1)
	fields := []string{"baseline", "cpu", "in_flight", "learnt", "limit", "resource", "rule", "shedding", "type"}
	if got := keys(t, "an overload rule", o); !slices.Equal(got, fields) {
		t.Errorf("an overload rule has the fields %q, want %q", got, fields)
	}

	// Without overload rules the list is empty, not null.
	if err := f.g.SetRules(slidegate.Rules{}); err != nil {
		t.Fatal(err)
	}
	f.step(time.Second)
	if o := objectAt(t, rawJSON(t, f.d, "/api/snapshot"), "overload"); o == nil || len(o.([]any)) != 0 {
		t.Errorf("the overload rules without any: %v, want []", o)
	}
}

// A CPU reading JSON cannot write (NaN, ±Inf), from a WithCPU at fault,
// must not fail the encoding of every snapshot and event: it is sent as -1,
// no reading.
func TestACPUReadingJSONCannotWriteIsNoReading(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		f, cpu := overloadFixture(t)
		cpu.set(v)
		f.step(time.Second)
		srv := newServer(t, f.d)
		s := openStream(t, srv.URL+"/api/events")
		var snap snapshotJSON
		s.next(t, "snapshot", &snap)
		f.step(time.Second)
		var ev eventJSON
		s.next(t, "sample", &ev)
		s.close()
		for what, o := range map[string][]overloadJSON{"snapshot": snap.Overload, "event": ev.Overload} {
			if len(o) != 2 || o[0].CPU != -1 {
				t.Errorf("CPU %v: the %s's overload rules %+v, want the shed rule's CPU -1", v, what, o)
			}
		}
	}
}

// The rules bound the overload rules a frame carries, whatever the
// traffic: a flood of inbound requests to many resources adds none.
func TestTheOverloadRulesAFrameCarriesAreTheRules(t *testing.T) {
	f, _ := overloadFixture(t)
	for i := range 500 {
		if e, err := f.g.Enter(context.Background(), "GET /"+string(rune('a'+i%26))+string(rune('a'+i/26)), slidegate.WithInbound()); err == nil {
			e.Exit(nil)
		} else if !errors.Is(err, flow.ErrBlocked) {
			t.Fatal(err)
		}
	}
	f.step(time.Second)
	ev := f.d.event(false)
	if len(ev.Overload) != 2 {
		t.Errorf("an event carries %d overload rules after a flood, want the 2 in force", len(ev.Overload))
	}
	b, err := json.Marshal(ev.Overload)
	if err != nil || len(b) > 512 {
		t.Errorf("the overload rules encode to %d bytes (%v), want at most 512", len(b), err)
	}
}
