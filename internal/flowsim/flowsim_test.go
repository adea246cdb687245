package flowsim

import (
	"math/rand/v2"
	"testing"
	"time"
)

// bruteMax checks every integer start time in range.
func bruteMax(a []Arrival, length int64) int64 {
	var best int64
	if len(a) == 0 {
		return 0
	}
	for s := a[0].At - length; s <= a[len(a)-1].At; s++ {
		var sum int64
		for _, x := range a {
			if x.At >= s && x.At < s+length {
				sum += x.N
			}
		}
		best = max(best, sum)
	}
	return best
}

func TestMaxInAnyIntervalMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 300; round++ {
		n := rng.IntN(30)
		a := make([]Arrival, n)
		for i := range a {
			a[i] = Arrival{rng.Int64N(100), 1 + rng.Int64N(3)}
		}
		a = sorted(a)
		length := 1 + rng.Int64N(40)
		if got, want := MaxInAnyInterval(a, time.Duration(length)), bruteMax(a, length); got != want {
			t.Fatalf("round %d: MaxInAnyInterval = %d, brute force %d, for %v over %d", round, got, want, a, length)
		}
	}
}

func TestPatternsAreInTimeOrderAndWithinTheRun(t *testing.T) {
	for _, p := range Patterns() {
		arr := p.Arrivals(rand.New(rand.NewPCG(1, 1)), 100, time.Second, 10*time.Second)
		if len(arr) == 0 {
			t.Fatalf("%s: no arrivals", p.Name)
		}
		for i, a := range arr {
			if a.At < 0 || a.At >= int64(10*time.Second) || a.N < 1 {
				t.Fatalf("%s: arrival %d = %+v out of range", p.Name, i, a)
			}
			if i > 0 && a.At < arr[i-1].At {
				t.Fatalf("%s: arrival %d at %d before %d", p.Name, i, a.At, arr[i-1].At)
			}
		}
	}
}
