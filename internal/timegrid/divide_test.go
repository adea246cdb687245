package timegrid

import (
	"math"
	"math/rand/v2"
	"testing"
)

func checkDivisor(t *testing.T, d, x uint64) {
	t.Helper()
	v := newDivisor(d)
	if got, want := v.div(x), x/d; got != want {
		t.Fatalf("%d / %d = %d, want %d", x, d, got, want)
	}
}

func TestDivisorMatchesHardwareDivision(t *testing.T) {
	const top = 1<<63 - 1
	divisors := []uint64{2, 3, 5, 7, 10, 60, 100, 1000, 1 << 20, 1<<20 + 1, 1e6, 1e9, 1e9 + 7, 123456789, 1 << 40, 1<<62 - 1, 1 << 62, top}
	xs := []uint64{0, 1, 2, 3, 999, 1000, 1001, 1 << 32, 1<<62 - 1, 1 << 62, top - 1, top}
	for _, d := range divisors {
		for _, x := range xs {
			checkDivisor(t, d, x)
			if x >= d {
				checkDivisor(t, d, x-x%d)   // exact multiple
				checkDivisor(t, d, x-x%d-1) // just below one
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		d := rng.Uint64N(1<<rng.IntN(63)) + 2
		checkDivisor(t, d, rng.Uint64N(math.MaxInt64))
	}
}

func FuzzDivisor(f *testing.F) {
	f.Add(uint64(3), uint64(10))
	f.Add(uint64(1e9), uint64(1<<63-1))
	f.Fuzz(func(t *testing.T, d, x uint64) {
		d = d%(1<<63-1) + 2
		x %= 1 << 63
		checkDivisor(t, d, x)
	})
}
