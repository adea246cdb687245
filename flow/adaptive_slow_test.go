package flow

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

// An ending is a request in flight in the slow-minority simulation.
type ending struct {
	at int64
	p  *Permit
}

type endings []ending

func (h endings) Len() int           { return len(h) }
func (h endings) Less(i, j int) bool { return h[i].at < h[j].at }
func (h endings) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endings) Push(x any)        { *h = append(*h, x.(ending)) }
func (h *endings) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// slowMinority runs an adaptive limit over a service that is never
// overloaded (every request takes its own time, however many are in
// flight): Poisson arrivals at rate per second for d, a share slow of them
// taking factor times the others' 5 ms ± 20%. It returns how many of the
// fast requests were refused, and how many there were.
func slowMinority(t *testing.T, s AdaptiveSettings, rate float64, slow float64, factor int64, d time.Duration) (refused, fast int) {
	t.Helper()
	a, _ := newTestAdaptive(t, s)
	rng := rand.New(rand.NewPCG(7, 11))
	var h endings
	for now := int64(0); now < int64(d); now += int64(rng.ExpFloat64() / rate * 1e9) {
		for len(h) > 0 && h[0].at <= now {
			e := heap.Pop(&h).(ending)
			e.p.DoneAt(e.at, Succeeded)
		}
		rt := int64(float64(5*time.Millisecond) * (0.8 + 0.4*rng.Float64()))
		isSlow := rng.Float64() < slow
		if isSlow {
			rt *= factor
		} else {
			fast++
		}
		p := new(Permit)
		if !a.AcquireAt(now, p, "").Allowed {
			if !isSlow {
				refused++
			}
			continue
		}
		heap.Push(&h, ending{at: now + rt, p: p})
	}
	return refused, fast
}

// A minority of slow requests (up to 5% taking 100 times as long: a large
// upload, a rare expensive query; or 5 a second of 205 taking 3 s) does not
// bring the limit down: the limit judges by the median, which they do not
// move, and makes room for what they hold.
func TestAdaptiveIgnoresAMinorityOfSlowRequests(t *testing.T) {
	for _, alg := range []string{"gradient", "aimd"} {
		for _, c := range []struct {
			slow   float64
			factor int64
		}{{0.01, 100}, {0.024, 100}, {0.05, 100}, {5.0 / 205, 600}} {
			refused, fast := slowMinority(t, AdaptiveSettings{Algorithm: alg, MinLimit: 10}, 205, c.slow, c.factor, time.Minute)
			t.Logf("%v, %.1f%% of requests %d times slower: %d of %d others refused", alg, 100*c.slow, c.factor, refused, fast)
			if float64(refused) > 0.01*float64(fast) {
				t.Errorf("%v, %.1f%% of requests %d times slower: %d of %d others refused (%.1f%%), want at most 1%%",
					alg, 100*c.slow, c.factor, refused, fast, 100*float64(refused)/float64(fast))
			}
		}
	}
}
