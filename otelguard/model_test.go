package otelguard_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/exported"
	"github.com/slidegate/slidegate/otelguard"
	"github.com/slidegate/slidegate/window"
)

// TestCollectionsSayWhatResourcesSays drives a guard with random traffic
// between collections (names not valid UTF-8 among them, inbound ones,
// blocked, failed and held requests, resources evicted and back) and holds
// every collection to what Guard.Resources and Guard.ResponseTimeTotals
// say, read as the instruments and the Producer once read them: every
// data point of slidegate.requests and slidegate.in_flight_requests, and
// the histograms' counts, sums and order (by name).
func TestCollectionsSayWhatResourcesSays(t *testing.T) {
	t.Run("valid names", func(t *testing.T) { collectAgainstResources(t, nil) })
	t.Run("invalid names", func(t *testing.T) { collectAgainstResources(t, []string{"a\xff", "a\xfe", "a\uFFFD", "b\xc0"}) })
}

// collectAgainstResources is TestCollectionsSayWhatResourcesSays with the
// names extra among those entered.
func collectAgainstResources(t *testing.T, extra []string) {
	clk := clock.NewManual(1 << 40)
	g, err := slidegate.New(slidegate.WithClock(clk), slidegate.WithMaxResources(30))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(slidegate.Rules{
		Flow:     []slidegate.FlowRule{{Resource: "r1", Limit: 3}, {Resource: "r2", Limit: 2, Shadow: true}},
		Breakers: []slidegate.BreakerRule{{Resource: "r3", Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.1}},
	}); err != nil {
		t.Fatal(err)
	}
	p, err := otelguard.NewProducer(g, otelguard.WithAttributes(attribute.String("service", "s")))
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithCardinalityLimit(0))
	t.Cleanup(func() { _ = mp.Shutdown(bg) })
	if _, err := otelguard.Register(g, mp, otelguard.WithAttributes(attribute.String("service", "s"))); err != nil {
		t.Fatal(err)
	}
	names := append([]string{"r1", "r2", "r3"}, extra...)
	for i := range 40 {
		names = append(names, fmt.Sprint("n", i))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 12 {
		if round == 6 {
			clk.Advance(time.Hour) // every resource idle: new names evict them
		}
		for range 50 + rng.IntN(200) {
			clk.Advance(time.Duration(rng.IntN(int(3 * time.Millisecond))))
			name := names[rng.IntN(min(len(names), 10+4*round))]
			var opts []slidegate.EntryOption
			if rng.IntN(4) == 0 {
				opts = append(opts, slidegate.WithInbound())
			}
			e, err := g.EnterAt(bg, clk.Now(), name, opts...)
			if err != nil {
				continue
			}
			switch rng.IntN(5) {
			case 0: // held
			case 1:
				e.ExitAt(clk.Now()+int64(rng.IntN(int(time.Second))), errFail)
			default:
				e.ExitAt(clk.Now()+int64(rng.IntN(int(time.Second))), nil)
			}
		}
		for range 2 { // the second with the same resources as the first
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(bg, &rm); err != nil {
				t.Fatal(err)
			}
			checkAgainstResources(t, round, g, rm)
		}
	}
}

// checkAgainstResources holds rm to the model: g's Resources, merged by
// attribute value and direction in the order they come by name.
func checkAgainstResources(t *testing.T, round int, g *slidegate.Guard, rm metricdata.ResourceMetrics) {
	t.Helper()
	type key struct {
		name    string
		inbound bool
	}
	type want struct {
		key
		totals   slidegate.Totals
		inFlight int64
		count    int64
		sum      float64 // seconds, added as the Producer adds merged points
	}
	var order []key
	byKey := map[key]*want{}
	var buf window.SketchTotals
	for _, s := range g.Resources() {
		k := key{exported.Value(s.Resource), s.Inbound}
		w := byKey[k]
		if w == nil {
			w = &want{key: k}
			byKey[k] = w
			order = append(order, k)
		}
		w.inFlight += s.InFlight
		w.totals.Allowed += s.Totals.Allowed
		w.totals.Succeeded += s.Totals.Succeeded
		w.totals.Failed += s.Totals.Failed
		w.totals.RT += s.Totals.RT
		w.sum += s.Totals.RT.Seconds()
		for r := range s.Totals.BlockedBy {
			w.totals.BlockedBy[r] += s.Totals.BlockedBy[r]
			w.totals.WouldBlockBy[r] += s.Totals.WouldBlockBy[r]
		}
		g.ResponseTimeTotals(s.Resource, &buf)
		w.count += buf.Count()
	}
	wantPoints := map[attribute.Distinct]int64{}
	wantInFlight := map[attribute.Distinct]int64{}
	for _, k := range order {
		w := byKey[k]
		base := []string{"service", "s", "slidegate.resource", k.name, "slidegate.direction", map[bool]string{true: "inbound", false: "outbound"}[k.inbound]}
		with := func(kv ...string) attribute.Distinct {
			set := attrs(append(base[:6:6], kv...)...)
			return set.Equivalent()
		}
		wantPoints[with("slidegate.outcome", "allowed")] = w.totals.Allowed
		wantPoints[with("slidegate.outcome", "succeeded")] = w.totals.Succeeded
		wantPoints[with("slidegate.outcome", "failed")] = w.totals.Failed
		for r, n := range w.totals.BlockedBy {
			if n > 0 {
				wantPoints[with("slidegate.outcome", "blocked", "slidegate.reason", reasonCode(r))] = n
			}
			if n := w.totals.WouldBlockBy[r]; n > 0 {
				wantPoints[with("slidegate.outcome", "would_block", "slidegate.reason", reasonCode(r))] = n
			}
		}
		wantInFlight[with()] = w.inFlight
	}
	in, _ := g.Stats(slidegate.InboundResource)
	var gotPoints, gotInFlight map[attribute.Distinct]int64
	var hist []metricdata.HistogramDataPoint[float64]
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "slidegate.requests":
				gotPoints = intPoints(t, m)
			case "slidegate.in_flight_requests":
				gotInFlight = intPoints(t, m)
			case "slidegate.request.duration":
				hist = m.Data.(metricdata.Histogram[float64]).DataPoints
			case "slidegate.inbound.requests":
				set := attrs("service", "s", "slidegate.outcome", "allowed")
				if got := intPoints(t, m)[set.Equivalent()]; got != in.Totals.Allowed {
					t.Errorf("round %d: inbound allowed %d, want %d", round, got, in.Totals.Allowed)
				}
			}
		}
	}
	compare := func(what string, got, want map[attribute.Distinct]int64) {
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("round %d: %s %v = %d (there: %v), want %d", round, what, k, g, ok, v)
			}
		}
		if len(got) != len(want) {
			t.Errorf("round %d: %s has %d data points, want %d", round, what, len(got), len(want))
		}
	}
	compare("slidegate.requests", gotPoints, wantPoints)
	compare("slidegate.in_flight_requests", gotInFlight, wantInFlight)
	if len(hist) != len(order) {
		t.Fatalf("round %d: %d histograms, want %d", round, len(hist), len(order))
	}
	for i, k := range order {
		w, dp := byKey[k], hist[i]
		r, _ := dp.Attributes.Value("slidegate.resource")
		d, _ := dp.Attributes.Value("slidegate.direction")
		if r.AsString() != k.name || (d.AsString() == "inbound") != k.inbound {
			t.Errorf("round %d: histogram %d is %q %s, want %q inbound=%v", round, i, r.AsString(), d.AsString(), k.name, k.inbound)
		}
		if int64(dp.Count) != w.count || dp.Sum != w.sum {
			t.Errorf("round %d: %q: histogram count %d sum %v, want %d and %v", round, k.name, dp.Count, dp.Sum, w.count, w.sum)
		}
	}
	if round > 0 && len(order) < 8 {
		t.Errorf("round %d: only %d resources", round, len(order))
	}
}

// intPoints returns m's int64 data points by attribute set.
func intPoints(t *testing.T, m metricdata.Metrics) map[attribute.Distinct]int64 {
	out := map[attribute.Distinct]int64{}
	for k, dp := range points(t, m) {
		out[k] = dp.Value
	}
	return out
}

// reasonCode is the value of slidegate.reason for reason r.
func reasonCode(r int) string { return flow.Reason(r).Code() }
