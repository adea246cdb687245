// Package textcut cuts text from clients and configs to a bound, on a
// character, marking the cut: what logs, metrics and pages show of it.
package textcut

import "unicode/utf8"

// Cut returns s if it is at most n bytes long; else its longest prefix of
// at most n bytes that ends on a character boundary, and "…".
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
