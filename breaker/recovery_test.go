package breaker_test

import (
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/breaker"
)

// The claims of BlockPolicy's documentation, checked by simulation: after a
// one-minute outage the default policy has recovered within one window (10 s)
// of it, CountBlocks takes about (W/K)·ln(R·W), and IgnoreBlocks about a
// second; under overload the counting policies hold the load near K times the
// dependency's capacity, and IgnoreBlocks does not.
func TestSRERecoveryAndProtectionByBlockPolicy(t *testing.T) {
	const window, k = 10.0, 2.0 // the defaults, in seconds
	for _, tc := range []struct {
		rate  int
		seeds []uint64
	}{{100, []uint64{1, 2, 3}}, {1000, []uint64{1, 2}}} {
		outage := scenario{rate: tc.rate, outage: 10 * time.Second, recovery: 70 * time.Second, length: 140 * time.Second}
		overload := scenario{rate: tc.rate, capacity: tc.rate / 10, length: 60 * time.Second}
		sre := window / k * math.Log(float64(tc.rate)*window)
		for _, seed := range tc.seeds {
			for _, p := range []breaker.BlockPolicy{breaker.CountBlocksWhileFailing, breaker.CountBlocks, breaker.IgnoreBlocks} {
				o, l := outage.run(p, seed), overload.run(p, seed)
				rec, load := o.recovery.Seconds(), l.sent/float64(overload.capacity)
				t.Logf("%d/s seed %d %v: leak %.1f/s, recovery %.1fs (SRE estimate %.1fs), overload %.2f × capacity",
					tc.rate, seed, p, o.leak, rec, sre, load)
				if o.recovery < 0 {
					t.Fatalf("%v never recovered", p)
				}
				switch p {
				case breaker.CountBlocksWhileFailing:
					if rec > window || o.leak > 2 || load > 2.2 {
						t.Errorf("%v: recovery %.1fs (want ≤ %vs), leak %.1f/s (want ≤ 2), load %.2f × capacity (want ≤ 2.2)", p, rec, window, o.leak, load)
					}
				case breaker.CountBlocks:
					if rec < sre/2 || rec > sre*1.5 || o.leak > 2 || load > 2.2 {
						t.Errorf("%v: recovery %.1fs (want about %.1fs), leak %.1f/s (want ≤ 2), load %.2f × capacity (want ≤ 2.2)", p, rec, sre, o.leak, load)
					}
				case breaker.IgnoreBlocks:
					if rec > 2 || load < 3 {
						t.Errorf("%v: recovery %.1fs (want ≤ 2s), load %.2f × capacity (want ≥ 3)", p, rec, load)
					}
				}
			}
		}
	}
}

// After a 10 s outage at 1,000 requests a second, the default breaker lets
// traffic back as a ramp, second by second, at least as fast as go-zero
// v1.10.3's breaker (17.8% of the requests in the second starting 1 s after
// the outage, 56% at 4 s, 94.8% at 8 s and all at 10 s), and never the load
// at once: no second lets through more than a third of the load above the
// second before it, nor much less than it.
func TestSRELetsTrafficBackAsARampAfterAnOutage(t *testing.T) {
	goZero := map[int]float64{1: 0.178, 4: 0.56, 8: 0.948, 10: 1}
	// Healthy for a window, then down for 10 s, then healthy for 12 s.
	outage := scenario{rate: 1000, outage: 10 * time.Second, recovery: 20 * time.Second, length: 32 * time.Second}
	for seed := uint64(1); seed <= 8; seed++ {
		share := outage.run(breaker.CountBlocksWhileFailing, seed).after
		t.Logf("seed %d: shares %.3f", seed, share)
		for s, want := range goZero {
			if share[s] < want {
				t.Errorf("seed %d: %.1f%% let through at +%ds, want at least go-zero's %.1f%%", seed, 100*share[s], s, 100*want)
			}
		}
		for s := 1; s < len(share); s++ {
			if rise := share[s] - share[s-1]; rise > 1.0/3 {
				t.Errorf("seed %d: the share let through rose from %.1f%% to %.1f%% at +%ds: a cliff", seed, 100*share[s-1], 100*share[s], s)
			}
			if share[s] < share[s-1]-0.05 {
				t.Errorf("seed %d: the share let through fell from %.1f%% to %.1f%% at +%ds", seed, 100*share[s-1], 100*share[s], s)
			}
		}
	}
}
