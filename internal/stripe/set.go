package stripe

import "sync/atomic"

// A Set holds a structure's stripes of type T once it has found
// contention: the structure keeps its first stripe, base, itself, and Grow
// adds the others, once, when a compare-and-swap on base (or any stripe)
// fails. Until then the Set is one nil pointer. The zero Set is ready.
type Set[T any] struct {
	all atomic.Pointer[[]*T] // every stripe, base first
}

// Pick returns the stripe of the processor hint names (usually Hint, which
// is called only once the Set has grown): base until then.
func (s *Set[T]) Pick(base *T, hint func() int) *T {
	m := s.all.Load()
	if m == nil {
		return base
	}
	return (*m)[hint()&(len(*m)-1)]
}

// Stripes returns every stripe, base first, or nil before the Set has grown
// (base is then the only one).
func (s *Set[T]) Stripes() []*T {
	if m := s.all.Load(); m != nil {
		return *m
	}
	return nil
}

// Grow adds the stripes, once: n in all (a power of two, usually Count()),
// base the first and fresh() making each other one. Counts written to base
// meanwhile stay there, so none is lost. Concurrent calls make one set.
func (s *Set[T]) Grow(base *T, n int, fresh func() *T) {
	if s.all.Load() != nil {
		return
	}
	m := make([]*T, n)
	m[0] = base
	for i := 1; i < n; i++ {
		m[i] = fresh()
	}
	s.all.CompareAndSwap(nil, &m)
}
