package topn

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

type item struct {
	v   int64
	key int
}

// byValue orders by value, largest first, ties by key: a total order
// over items of distinct keys, as the busiest keys are ordered.
func byValue(a, b item) int { return cmp.Or(cmp.Compare(b.v, a.v), cmp.Compare(a.key, b.key)) }

// TestSelectIsTheFirstNOfAFullSort holds Select to the first n of a full
// sort on random data: values drawn from few or many, so that ties on the
// value are common or rare, and every n from below zero to past the length.
func TestSelectIsTheFirstNOfAFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 2000 {
		size := rng.IntN(300)
		spread := []int64{1, 3, 1000, 1 << 40}[round%4]
		s := make([]item, size)
		for i := range s {
			s[i] = item{v: rng.Int64N(spread), key: i}
		}
		rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		n := rng.IntN(size+20) - 5
		want := slices.SortedFunc(slices.Values(s), byValue)[:max(min(n, size), 0)]
		got := Select(slices.Clone(s), n, byValue)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: Select of %d from %d = %v, want %v", round, n, size, got, want)
		}
	}
}

// TestSelectKeepsEveryElement checks that Select only reorders s.
func TestSelectKeepsEveryElement(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s := make([]item, 1000)
	for i := range s {
		s[i] = item{v: rng.Int64N(50), key: i}
	}
	c := slices.Clone(s)
	Select(c, 10, byValue)
	slices.SortFunc(c, byValue)
	slices.SortFunc(s, byValue)
	if !slices.Equal(c, s) {
		t.Error("Select lost or made up elements")
	}
}

// BenchmarkSelect selects 10 of 4,096 against a full sort.
func BenchmarkSelect(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	src := make([]item, 4096)
	for i := range src {
		src[i] = item{v: rng.Int64N(100), key: i}
	}
	s := make([]item, len(src))
	b.Run("select", func(b *testing.B) {
		for b.Loop() {
			copy(s, src)
			Select(s, 10, byValue)
		}
	})
	b.Run("sort", func(b *testing.B) {
		for b.Loop() {
			copy(s, src)
			slices.SortFunc(s, byValue)
		}
	})
}
