package otelguard_test

import (
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/slidegate/slidegate"
)

// Enter and Exit allocate nothing with the instruments registered and the
// Producer given to the reader, before and after a collection: the
// package adds no code to the request path.
func TestEnterExitDoNotAllocateWithInstrumentsRegistered(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector makes sync.Pool drop entries; make test runs this test without it (make allocs)")
	}
	h := newHarness(t, slidegate.Rules{
		Flow:     []slidegate.FlowRule{{Resource: "a", Limit: 1 << 30}},
		Breakers: []slidegate.BreakerRule{{Resource: "a", Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5}},
	})
	step := func() {
		e, _ := h.g.Enter(bg, "a")
		e.Exit(nil)
		e, _ = h.g.Enter(bg, "b", slidegate.WithInbound())
		e.Exit(nil)
	}
	step() // fills the pooled entry's slices
	h.collect(t)
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Errorf("%v allocations per Enter+Exit with the instruments registered", n)
	}
	h.collect(t)
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Errorf("%v allocations per Enter+Exit after a collection", n)
	}
}

// Collections concurrent with traffic and with rule changes race with
// nothing, and once the traffic is over, the counters and the histograms
// say exactly what it was.
func TestCollectDuringTraffic(t *testing.T) {
	h := newHarness(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "r0", Limit: 1 << 30}}})
	const writers, each = 4, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := [...]string{"r0", "r1"}[w%2]
			for i := range each {
				e, err := h.g.Enter(bg, name)
				if err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					e.Exit(errFail)
				} else {
					e.Exit(nil)
				}
			}
		}()
	}
	stop := make(chan struct{})
	collected := make(chan int)
	go func() {
		n := 0
		defer func() { collected <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Not h.collect: FailNow belongs to the test's goroutine.
			var rm metricdata.ResourceMetrics
			if err := h.reader.Collect(bg, &rm); err != nil {
				t.Error(err)
				return
			}
			n++
			if n%4 == 0 {
				_ = h.g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "r0", Limit: 1<<30 + int64(n)}}})
			}
			h.clk.Advance(time.Millisecond)
		}
	}()
	wg.Wait()
	close(stop)
	if n := <-collected; n == 0 {
		t.Log("no collection overlapped the traffic")
	}
	ms := h.collect(t)
	for _, name := range []string{"r0", "r1"} {
		kv := []string{"slidegate.resource", name, "slidegate.direction", "outbound"}
		ok := value(t, ms, "slidegate.requests", append(kv, "slidegate.outcome", "succeeded")...)
		failed := value(t, ms, "slidegate.requests", append(kv, "slidegate.outcome", "failed")...)
		if ok+failed != writers/2*each || failed != writers/2*each/10 {
			t.Errorf("%s: %d succeeded and %d failed, want %d and %d", name, ok, failed, writers/2*each*9/10, writers/2*each/10)
		}
		if dp := histogram(t, ms, "slidegate.request.duration", kv...); dp.Count != writers/2*each {
			t.Errorf("%s: histogram count %d, want %d", name, dp.Count, writers/2*each)
		}
	}
}
