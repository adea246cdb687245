package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The configuration both services read: one domain, a per-second limit on
// the values of "user" (the accuracy and cost runs) and a per-minute limit
// on the values of "tenant" (the cost runs with two descriptors and the
// memory run). The rules name a key without a value, so that each value is
// counted on its own.

// domain is the configuration's one domain.
const domain = "compare"

// rules is the configuration: the limits per second and per minute.
type rules struct {
	PerSecond int64 // requests_per_unit of key "user", unit second
	PerMinute int64 // requests_per_unit of key "tenant", unit minute
}

// yaml returns the configuration file, in envoyproxy/ratelimit's format.
func (r rules) yaml() string {
	return fmt.Sprintf(`domain: %s
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: %d
  - key: tenant
    rate_limit:
      unit: minute
      requests_per_unit: %d
`, domain, r.PerSecond, r.PerMinute)
}

// writeConfig writes the configuration under root as envoyproxy/ratelimit
// reads it (RUNTIME_ROOT=root, RUNTIME_SUBDIRECTORY=ratelimit, the files
// in its config directory), and returns that directory, which is also
// slidegate serve's --config.
func writeConfig(root string, r rules) (string, error) {
	if r.PerSecond < 1 || r.PerMinute < 1 || r.PerSecond > math.MaxUint32 || r.PerMinute > math.MaxUint32 {
		return "", fmt.Errorf("limits %d per second and %d per minute: each must be 1 to 2^32-1", r.PerSecond, r.PerMinute)
	}
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, domain+".yaml"), []byte(r.yaml()), 0o644)
}

// maxInWindow returns the most of ts, offsets sorted ascending, that lie in
// one half-open window [t, t+w), for any t: the sliding max. Only windows
// that start at an element need be tried, as moving a window's start
// forward to its first element loses none.
func maxInWindow(ts []time.Duration, w time.Duration) int {
	best, i := 0, 0
	for j := range ts {
		for ts[j]-ts[i] >= w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// A pattern is the send times of one accuracy run: offsets from its start,
// which lies on a whole second of the wall clock, so that the edges of the
// fixed windows are at whole offsets.
type pattern struct {
	name  string
	about string
	sends func(limit int, d time.Duration, rng *rand.Rand) []time.Duration
}

// edgeSpread is how long a burst at a second's edge lasts: half before the
// edge, half after. 2 x the limit within it is 10 x the limit's rate, yet
// slow enough that three services on two cores answer each half on its
// side of the edge (within 20 ms, envoyproxy/ratelimit's queue pushed most
// of the half before the edge past it).
const edgeSpread = 200 * time.Millisecond

// patterns are the accuracy runs, after the existing accuracy runs: steady
// over the limit, a burst at each window edge, and random bursts.
var patterns = []pattern{
	{
		name:  "steady 1.5x",
		about: "1.5 x the limit a second, evenly spaced",
		sends: func(limit int, d time.Duration, _ *rand.Rand) []time.Duration {
			gap := time.Second / time.Duration(limit*3/2)
			var s []time.Duration
			for t := time.Duration(0); t < d; t += gap {
				s = append(s, t)
			}
			return s
		},
	},
	{
		name:  "burst at each edge",
		about: "2 x the limit within 200 ms straddling each second's edge (the limit before it, the limit after)",
		sends: func(limit int, d time.Duration, _ *rand.Rand) []time.Duration {
			var s []time.Duration
			n := 2 * limit
			for edge := time.Second; edge < d; edge += time.Second {
				for i := range n {
					s = append(s, edge-edgeSpread/2+edgeSpread*time.Duration(i)/time.Duration(n))
				}
			}
			return s
		},
	},
	{
		name:  "Poisson bursts",
		about: "bursts at Poisson times, 3 a second on average, each of 1 to the limit (uniform), all at once",
		sends: func(limit int, d time.Duration, rng *rand.Rand) []time.Duration {
			var s []time.Duration
			t := time.Duration(0)
			for {
				t += time.Duration(rng.ExpFloat64() / 3 * float64(time.Second))
				if t >= d {
					return s
				}
				for range 1 + rng.IntN(limit) {
					s = append(s, t)
				}
			}
		},
	},
}

// percentile returns the p-th quantile (0 < p <= 1) of sorted, the value at
// rank ceil(p*n), or 0 when sorted is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// sortedCopy returns the durations sorted.
func sortedCopy(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}
