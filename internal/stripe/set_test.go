package stripe

import (
	"sync"
	"testing"
)

func TestSetGrowsOnceAndPicksByHint(t *testing.T) {
	var s Set[int]
	base := new(int)
	if s.Pick(base, func() int { return 3 }) != base || s.Stripes() != nil {
		t.Fatal("a Set that has not grown must give base alone")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); s.Grow(base, 4, func() *int { return new(int) }) }()
	}
	wg.Wait()
	all := s.Stripes()
	if len(all) != 4 || all[0] != base {
		t.Fatalf("stripes %v, want 4 with base first", all)
	}
	first := all
	s.Grow(base, 8, func() *int { return new(int) })
	if got := s.Stripes(); len(got) != 4 || &got[0] != &first[0] {
		t.Fatal("a second Grow replaced the stripes")
	}
	for h := range 9 {
		if s.Pick(base, func() int { return h }) != all[h&3] {
			t.Fatalf("Pick(%d) is not stripe %d", h, h&3)
		}
	}
}
