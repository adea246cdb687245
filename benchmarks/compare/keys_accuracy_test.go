package compare

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/flowlimits"
)

// TestKeyAccuracy runs the per-key simulation of cmd/keytable at
// KeyScaleQuick (less under the race detector). It asserts the bound for slidegate's limiters, which
// guarantee it: no key allowed more than its limit in any interval, in any
// pattern. For sentinel it checks that every pattern was run and measured,
// and that the eviction attack lets its hot key over the limit (so the
// measurement does see over-admission); it logs every table (go test -v).
func TestKeyAccuracy(t *testing.T) {
	var progress *os.File
	if testing.Verbose() {
		progress = os.Stderr
	}
	scale := KeyScaleQuick
	if raceEnabled {
		// The race detector makes every request about ten times slower:
		// a quarter of the keys, over one and a half intervals, which
		// still offers the hot key more than its limit in every pattern.
		scale = KeyScale{ColdRate: 5000, Duration: 3 * KeyInterval / 2}
	}
	tables, err := KeyAccuracy(scale, KeyLimit, KeyInterval, KeySeed, progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != len(KeyLimiters()) {
		t.Fatalf("got %d tables, want %d", len(tables), len(KeyLimiters()))
	}
	for _, tab := range tables {
		name := tab.Limiter.Name
		if len(tab.Results) != len(KeyPatterns()) {
			t.Errorf("%s: %d results, want one per pattern (%d)", name, len(tab.Results), len(KeyPatterns()))
		}
		for _, r := range tab.Results {
			if r.Offered == 0 || r.Allowed == 0 || r.HotOffered == 0 || r.HotMax == 0 || r.Cold == 0 {
				t.Errorf("%s, %s: nothing measured: %+v", name, r.Pattern, r)
			}
			if r.Allowed > r.Offered || r.HotAllowed > r.HotOffered {
				t.Errorf("%s, %s: allowed more than offered: %+v", name, r.Pattern, r)
			}
			if r.HotOffered <= KeyLimit {
				t.Errorf("%s, %s: the hot key was offered %d, not over its limit %d", name, r.Pattern, r.HotOffered, KeyLimit)
			}
			// The measurement sees over-admission where there is some:
			// a cache of recent keys forgets the hot key under the
			// eviction attack, and lets it through again.
			if tab.Limiter.Name == "sentinel hotspot rule" && r.Pattern == "evict the hot key" && r.HotMax <= KeyLimit {
				t.Errorf("%s, %s: the hot key allowed %d at most in one interval, want over its limit %d (evicted)", name, r.Pattern, r.HotMax, KeyLimit)
			}
			if tab.Limiter.Ours && (r.MaxKey > KeyLimit || r.KeysOver != 0) {
				t.Errorf("%s, %s: key %q allowed %d in one interval (%d keys over), limit %d",
					name, r.Pattern, r.WorstKey, r.MaxKey, r.KeysOver, KeyLimit)
			}
		}
		var b strings.Builder
		if err := WriteKeyTable(&b, tab, KeyLimit); err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + b.String())
	}
	var b strings.Builder
	if err := WriteKeySummary(&b, tables, KeyLimit); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
}

// TestKeyPatternsEvictPastTheCaches checks the premise of the eviction
// attack: more fresh keys between two requests of the hot key than sentinel's
// hotspot caches keep for a rule of KeyInterval, and than slidegate keeps
// exact windows for.
func TestKeyPatternsEvictPastTheCaches(t *testing.T) {
	if c := hotspotCapacity(KeyInterval); evictBetween <= c {
		t.Errorf("evictBetween = %d, not above sentinel's hotspot capacity %d", evictBetween, c)
	}
	if evictBetween <= flowlimits.DefaultHotKeys {
		t.Errorf("evictBetween = %d, not above slidegate's hot keys %d", evictBetween, flowlimits.DefaultHotKeys)
	}
	if attackKeys <= hotspotCapacity(KeyInterval) || attackKeys <= flowlimits.DefaultHotKeys {
		t.Errorf("attackKeys = %d, not above the caches (%d, %d)", attackKeys, hotspotCapacity(KeyInterval), flowlimits.DefaultHotKeys)
	}
}

// TestKeyPatternsAreInTimeOrderWithinTheRun checks every pattern's arrivals
// at both scales: in time order, within the run, with key numbers below the
// count returned, and the hot key among them.
func TestKeyPatternsAreInTimeOrderWithinTheRun(t *testing.T) {
	for _, scale := range []KeyScale{KeyScaleQuick, {ColdRate: 1000, Duration: 2 * time.Second}} {
		for _, p := range KeyPatterns() {
			arr, keys := p.arrivals(scale, KeyLimit, KeyInterval, KeySeed)
			hot := 0
			for i, a := range arr {
				if a.at < 0 || a.at >= int64(scale.Duration) {
					t.Fatalf("%s: arrival %d at %d, outside [0, %v)", p.Name, i, a.at, scale.Duration)
				}
				if i > 0 && a.at < arr[i-1].at {
					t.Fatalf("%s: arrival %d at %d before the one before it (%d)", p.Name, i, a.at, arr[i-1].at)
				}
				if int(a.key) >= keys {
					t.Fatalf("%s: key %d, want below %d", p.Name, a.key, keys)
				}
				if a.key == hotKey {
					hot++
				}
			}
			if hot == 0 {
				t.Errorf("%s at %+v: no request of the hot key", p.Name, scale)
			}
		}
	}
}

// TestMaxInMatchesBruteForce checks the per-key sweep against counting every
// interval that starts at an arrival, on random arrivals of a few keys with
// random admissions.
func TestMaxInMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const length = 100
	for trial := range 500 {
		n := rng.IntN(60)
		arr := make([]keyArrival, n)
		keep := make([]bool, n)
		at := int64(0)
		for i := range arr {
			at += rng.Int64N(40) // ties too
			arr[i] = keyArrival{at: at, key: uint32(rng.IntN(3))}
			keep[i] = rng.IntN(3) > 0
		}
		x := indexByKey(arr, 3)
		for k := range 3 {
			idx := x.order[x.start[k]:x.start[k+1]]
			for _, kp := range [][]bool{nil, keep} {
				var want int64
				for _, i := range idx {
					if kp != nil && !kp[i] {
						continue
					}
					var in int64
					for _, j := range idx {
						if (kp == nil || kp[j]) && arr[j].at >= arr[i].at && arr[j].at < arr[i].at+length {
							in++
						}
					}
					want = max(want, in)
				}
				if got := maxIn(arr, idx, kp, length); got != want {
					t.Fatalf("trial %d, key %d, keep %v: maxIn = %d, want %d (%v)", trial, k, kp != nil, got, want, arr)
				}
			}
		}
	}
}

// TestKeyAccuracyRefusesBadArguments checks that arguments the patterns
// cannot run with, or that would make them too large, are refused with an
// error naming the argument and its value, before anything runs.
func TestKeyAccuracyRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		scale    KeyScale
		limit    int64
		interval time.Duration
		want     string
	}{
		{KeyScale{ColdRate: 0, Duration: time.Second}, KeyLimit, KeyInterval, "cold rate 0"},
		{KeyScale{ColdRate: maxColdRate + 1, Duration: time.Second}, KeyLimit, KeyInterval, "cold rate 2000001"},
		{KeyScale{ColdRate: 1000, Duration: time.Second / 2}, KeyLimit, KeyInterval, "duration 500ms"},
		{KeyScale{ColdRate: 1000, Duration: time.Hour}, KeyLimit, KeyInterval, "duration 1h0m0s"},
		{KeyScale{ColdRate: 1000, Duration: 2 * time.Second}, KeyLimit, 1500 * time.Millisecond, "interval 1.5s"},
		{KeyScale{ColdRate: 1000, Duration: time.Second}, 1, KeyInterval, "limit 1"},
		{KeyScale{ColdRate: 1000, Duration: time.Second}, maxKeyLimit + 1, KeyInterval, "limit 1001"},
	} {
		_, err := KeyAccuracy(tc.scale, tc.limit, tc.interval, KeySeed, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("KeyAccuracy(%+v, %d, %v) = %v, want an error naming %q", tc.scale, tc.limit, tc.interval, err, tc.want)
		}
	}
}
