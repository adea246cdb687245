package slidegate

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// keyFloor bounds what a per-key rule keeps whatever the budget: a per-key
// QPS rule of one window 16 KiB and, in each of its 64 shards, a sketch of
// 520 bytes and 8 hot entries (some 2.6 KiB); a per-key concurrency or
// throttle rule 4 KiB.
const keyFloor = 200 << 10

// floodRoutes sends keys distinct keys, once each, to each of routes
// resources with per-key rules (a QPS rule on each, and on every fourth a
// concurrency and a throttle rule too), over one second of g's clock, and
// returns how much the heap grew.
func floodRoutes(tb testing.TB, g *Guard, advance func(time.Duration), routes, keys int) int64 {
	tb.Helper()
	var rules Rules
	for r := range routes {
		name := "route-" + strconv.Itoa(r)
		rules.Flow = append(rules.Flow, FlowRule{Resource: name, Limit: 10, PerKey: true})
		if r%4 == 0 {
			rules.Flow = append(rules.Flow,
				FlowRule{Resource: name, Type: ConcurrencyRule, Limit: 100, PerKey: true},
				FlowRule{Resource: name, Type: ThrottleRule, Limit: 1000, PerKey: true})
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := g.SetRules(rules); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 0, 32)
	step := time.Second / time.Duration(keys)
	for k := range keys {
		advance(step)
		for r := range routes {
			buf = strconv.AppendInt(append(buf[:0], byte('a'+r%26), '-'), int64(k), 10)
			if e, err := g.Enter(bg, "route-"+strconv.Itoa(r), WithKey(string(buf))); err == nil {
				e.Exit(nil)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(g)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// TestKeyMemoryBoundsEveryPerKeyRuleOfTheGuard: twenty routes, each with
// per-key rules and a flood of distinct keys, hold no more together than
// the guard's budget and their floors; the heap grows by what the guard
// says they hold, and by little more.
func TestKeyMemoryBoundsEveryPerKeyRuleOfTheGuard(t *testing.T) {
	const routes, budget = 20, 16 << 20
	keys := 200_000
	if testing.Short() || raceDetector {
		keys = 20_000
	}
	clk := clock.NewManual(int64(time.Hour))
	g, err := New(WithClock(clk), WithKeyMemory(budget))
	if err != nil {
		t.Fatal(err)
	}
	heap := floodRoutes(t, g, func(d time.Duration) { clk.Advance(d) }, routes, keys)
	inUse, limit := g.KeyMemory()
	t.Logf("%d routes × %d keys: %.1f MiB held of %.0f MiB, heap grew %.1f MiB", routes, keys, float64(inUse)/(1<<20), float64(limit)/(1<<20), float64(heap)/(1<<20))
	rulesOf := routes + 2*(routes+3)/4
	if limit != budget || inUse > limit+int64(rulesOf)*keyFloor {
		t.Errorf("the per-key rules hold %d bytes, above the budget %d and their floors", inUse, limit)
	}
	if heap > inUse+4<<20 {
		t.Errorf("the heap grew by %d bytes, the per-key rules say they hold %d", heap, inUse)
	}
	if keys == 200_000 && inUse < limit/2 {
		t.Errorf("the per-key rules hold %d bytes of %d: the flood did not fill the budget, the test tests nothing", inUse, limit)
	}
}

func TestWithKeyMemoryRefusesANegativeBound(t *testing.T) {
	_, err := New(WithKeyMemory(-1))
	if !errors.Is(err, ErrInvalidConfig) || err.Error() != "slidegate: invalid configuration: key memory = -1: must be at least 0 bytes" {
		t.Fatalf("New(WithKeyMemory(-1)) = %v", err)
	}
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if _, limit := g.KeyMemory(); limit != 64<<20 {
		t.Fatalf("default key memory %d, want 64 MiB", limit)
	}
}

// BenchmarkKeyMemoryOfManyRoutes floods routes with per-key rules, each
// with a million distinct keys over a second, and reports the heap they
// take, with the guard's default budget. One iteration is one flood: run
// it with -benchtime 1x.
//
//	go test -run '^$' -bench KeyMemoryOfManyRoutes -benchtime 1x .
func BenchmarkKeyMemoryOfManyRoutes(b *testing.B) {
	for _, routes := range []int{8, 20} {
		b.Run(fmt.Sprint(routes, " routes"), func(b *testing.B) {
			for b.Loop() {
				clk := clock.NewManual(int64(time.Hour))
				g, err := New(WithClock(clk))
				if err != nil {
					b.Fatal(err)
				}
				heap := floodRoutes(b, g, func(d time.Duration) { clk.Advance(d) }, routes, 1_000_000)
				b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
			}
		})
	}
}
