// Package topn selects the first n elements of a slice in an order,
// without sorting the rest: what a scrape asks of thousands of keys.
package topn

import "slices"

// Select reorders s so that its first min(n, len(s)) elements are those
// that come first by cmp, in order, and returns them. The rest of s is
// left in no order. With cmp a total order (no two elements compare
// equal), the result is the first n of s sorted by cmp. It takes
// O(len(s) log n) comparisons: a heap of the n first so far, whose root is
// the last of them, replaced by each element that comes before it.
func Select[T any](s []T, n int, cmp func(a, b T) int) []T {
	n = max(min(n, len(s)), 0)
	if n == 0 {
		return s[:0]
	}
	if n == len(s) {
		slices.SortFunc(s, cmp)
		return s
	}
	h := s[:n]
	for i := n/2 - 1; i >= 0; i-- {
		down(h, i, cmp)
	}
	for i := n; i < len(s); i++ {
		if cmp(s[i], h[0]) < 0 {
			h[0], s[i] = s[i], h[0]
			down(h, 0, cmp)
		}
	}
	slices.SortFunc(h, cmp)
	return h
}

// down moves h[i] down the heap h, in which a parent comes after its
// children by cmp (the root is the last), to its place.
func down[T any](h []T, i int, cmp func(a, b T) int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && cmp(h[r], h[c]) > 0 {
			c = r
		}
		if cmp(h[c], h[i]) <= 0 {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
