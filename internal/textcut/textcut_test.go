package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCutEndsOnACharacterAndMarksTheCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"abé", 3, "ab…"},   // é is 2 bytes: it does not fit in 3
		{"abé", 4, "abé"},   // it fits whole
		{"abéd", 4, "abé…"}, // a whole é kept before the cut
		{"€€", 4, "€…"},
		{"€", 2, "…"},
		{"", 0, ""},
	} {
		if got := Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q; want %q", c.s, c.n, got, c.want)
		}
	}
	long := strings.Repeat("日本", 200)
	for n := range 20 {
		got := Cut(long, n)
		if !utf8.ValidString(got) || len(got) > n+len("…") {
			t.Errorf("Cut(long, %d) = %q: not valid, or longer than %d bytes and the mark", n, got, n)
		}
	}
}
