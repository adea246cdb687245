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
func TestAdaptiveRecoveryAndProtectionByBlockPolicy(t *testing.T) {
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
