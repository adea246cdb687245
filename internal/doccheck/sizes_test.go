package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A size in bytes as prose states one: 1.7 KB, 1,583 B, 64 KiB.
var size = regexp.MustCompile(`\d[\d,.]*\s*(B|KB|KiB|MB|MiB|bytes)\b`)

// The constant, not a test named after it (TestResourceBytesIs...).
var resourceBytes = regexp.MustCompile(`\bResourceBytes\b`)

// TestTheDocsNameResourceBytesInsteadOfStatingIt checks that no sentence
// of README.md and docs/*.md that names slidegate.ResourceBytes states a
// size beside it: the constant, held to what a resource takes by the root
// package's TestResourceBytesIsWhatAResourceTakes, is the one place the
// figure is written, where a restated one goes stale.
func TestTheDocsNameResourceBytesInsteadOfStatingIt(t *testing.T) {
	named := 0
	for _, file := range docs(t) {
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		text := string(src)
		for _, m := range resourceBytes.FindAllStringIndex(text, -1) {
			named++
			sentence := sentenceAround(text, m[0])
			if s := size.FindString(sentence); s != "" {
				t.Errorf("%s:%d: a sentence names ResourceBytes and states %q beside it; name the constant alone:\n\t%s",
					file, strings.Count(text[:m[0]], "\n")+1, s, strings.Join(strings.Fields(sentence), " "))
			}
		}
	}
	if named == 0 {
		t.Error("no sentence of the docs names ResourceBytes: how much a resource takes is nowhere")
	}
}

// sentenceAround returns the sentence of text around offset i: from the
// end of the sentence or paragraph before it to the end of its own.
func sentenceAround(text string, i int) string {
	start := 0
	for _, end := range []string{". ", ".\n", "\n\n"} {
		if j := strings.LastIndex(text[:i], end); j >= 0 && j+len(end) > start {
			start = j + len(end)
		}
	}
	stop := len(text)
	for _, end := range []string{". ", ".\n", "\n\n"} {
		if j := strings.Index(text[i:], end); j >= 0 && i+j < stop {
			stop = i + j
		}
	}
	return text[start:stop]
}
