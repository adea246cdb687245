package timegrid

import (
	"math/rand/v2"
	"testing"
)

func TestSlotsOfIsTheRemainder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 5, 10, 16, 20, 25, 26, 1000, 65536, 65537} {
		s := NewSlots(n)
		if s.N() != n {
			t.Fatalf("N() = %d, want %d", s.N(), n)
		}
		for i := 0; i < 20000; i++ {
			b := rng.Uint64N(1 << 62)
			if i < 100 {
				b = uint64(i)
			}
			if got, want := s.Of(b), int(b%uint64(n)); got != want {
				t.Fatalf("n %d: Of(%d) = %d, want %d", n, b, got, want)
			}
		}
	}
}
