package flow

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// A modelConfig is a configuration in force from a time on, as the model
// checks it.
type modelConfig struct {
	from    int64
	windows []KeyWindow
	// since is, per window, when the run of configurations holding a
	// window of its interval and buckets began: a window counts a key's
	// requests from then (Set's contract; it may count more).
	since []int64
}

// modelAdmission is n requests of a key allowed at a time, under
// configuration cfg.
type modelAdmission struct {
	at, n int64
	cfg   int
}

// checkModel fails if any key was allowed, at any time, more than a window
// in force then allows in the interval of that window's length ending
// then: brute force over every admission, every window, every key.
func checkModel(t *testing.T, cfgs []modelConfig, got map[string][]modelAdmission) (worst float64) {
	t.Helper()
	for key, as := range got {
		for i, a := range as {
			c := cfgs[a.cfg]
			for j, w := range c.windows {
				limit := w.Limit
				if o, ok := w.Overrides[key]; ok {
					limit = o
				}
				from := max(a.at-int64(w.Interval)+1, c.since[j])
				var sum int64
				for _, b := range as[:i+1] {
					if b.at >= from {
						sum += b.n
					}
				}
				if sum > limit {
					t.Fatalf("key %q: %d allowed in the %v up to %v under window %d (%v in %d buckets, limit %d, counting from %v)",
						key, sum, w.Interval, time.Duration(a.at), j, w.Interval, w.Buckets, limit, time.Duration(c.since[j]))
				}
				if limit > 0 {
					worst = max(worst, float64(sum)/float64(limit))
				}
			}
		}
	}
	return worst
}

// randomWindows returns one to three windows of shapes drawn from a few,
// in random order, each with a random limit, some with overrides of a few
// of the busy keys.
func randomWindows(r *rand.Rand) []KeyWindow {
	shapes := []KeyWindow{
		{Interval: time.Second},
		{Interval: time.Second, Buckets: 5},
		{Interval: 3 * time.Second, Buckets: 6},
		{Interval: 10 * time.Second, Buckets: 10},
	}
	r.Shuffle(len(shapes), func(i, j int) { shapes[i], shapes[j] = shapes[j], shapes[i] })
	ws := shapes[:1+r.IntN(3)]
	for j := range ws {
		ws[j].Limit = 2 + r.Int64N(12)
		if ws[j].Interval > time.Second {
			ws[j].Limit *= 2
		}
		if r.IntN(3) == 0 {
			ws[j].Overrides = map[string]int64{}
			for range 1 + r.IntN(2) {
				ws[j].Overrides["k"+strconv.Itoa(r.IntN(6))] = r.Int64N(30)
			}
		}
	}
	return slices.Clone(ws)
}

// TestKeyedQPSModelWithReloadsAndEvictions drives a KeyedQPS with random
// requests of a few busy keys among many cold ones, on a budget that keeps
// each shard at its floor of entries (so that keys take one another's
// entries all the time), reloading random windows, limits and overrides
// every so often; and checks every admission against a brute-force model
// of every key's admissions and the windows in force.
func TestKeyedQPSModelWithReloadsAndEvictions(t *testing.T) {
	seeds := 6
	if testing.Short() || raceEnabled {
		seeds = 2
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 26))
			c := clock.NewManual(0)
			ws := randomWindows(r)
			small, _ := NewKeyMemory(0)
			q, err := NewKeyedQPS(KeyedQPSSettings{Windows: ws, Clock: c, KeyMemory: small})
			if err != nil {
				t.Fatal(err)
			}
			cfgs := []modelConfig{{windows: ws, since: make([]int64, len(ws))}}
			got := map[string][]modelAdmission{}
			now := int64(0)
			reloads := 0
			for range 40000 {
				now += r.Int64N(int64(2 * time.Millisecond))
				if r.IntN(2000) == 0 {
					c.Set(now)
					ws := randomWindows(r)
					if err := q.Set(ws); err != nil {
						t.Fatal(err)
					}
					prev := cfgs[len(cfgs)-1]
					next := modelConfig{from: now, windows: ws, since: make([]int64, len(ws))}
					for j, w := range ws {
						next.since[j] = now
						for pj, pw := range prev.windows {
							if pw.Interval == w.Interval && pw.Buckets == w.Buckets {
								next.since[j] = prev.since[pj]
							}
						}
					}
					cfgs = append(cfgs, next)
					reloads++
				}
				key := "k" + strconv.Itoa(r.IntN(6))
				if r.IntN(2) == 0 {
					key = "cold" + strconv.Itoa(r.IntN(5000))
				}
				n := 1 + r.Int64N(2)
				if d, j := q.AllowNAt(now, key, n); d.Allowed {
					if j != -1 {
						t.Fatalf("allowed with window %d", j)
					}
					got[key] = append(got[key], modelAdmission{at: now, n: n, cfg: len(cfgs) - 1})
				}
			}
			worst := checkModel(t, cfgs, got)
			t.Logf("%d reloads; the busiest key reached %.2f of a limit", reloads, worst)
			if worst < 1 || reloads < 5 {
				t.Fatalf("the busiest key reached %.2f of a limit in %d reloads: the model tests nothing", worst, reloads)
			}
		})
	}
}
