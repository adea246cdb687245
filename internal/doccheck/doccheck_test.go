package doccheck

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// docs returns the Markdown files whose Go blocks must compile, relative
// to root: README.md and docs/*.md.
func docs(t *testing.T) []string {
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(more)
	for _, f := range more {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	return files
}

// compileWithin compiles the Go blocks of files, relative to dir, failing
// the test if the check cannot run.
func compileWithin(t *testing.T, dir string, files []string) report {
	t.Helper()
	// Generous: a cold build cache compiles the integrations' dependencies
	// (gRPC, the etcd client) first; a warm one takes seconds.
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	r, err := compile(ctx, ".", dir, files, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEveryGoBlockOfTheDocsCompiles(t *testing.T) {
	files := docs(t)
	r := compileWithin(t, root, files)
	if len(r.compiled) == 0 {
		t.Fatalf("no ```go block in %s: the extraction is broken", strings.Join(files, ", "))
	}
	for i, b := range r.compiled {
		if msg, failed := r.failures[i]; failed {
			t.Errorf("%s:%d: this ```go block does not compile:\n%s", b.file, b.line, indent(msg))
		}
	}
	if len(r.other) > 0 {
		t.Errorf("the go command said, of no block:\n%s", indent(strings.Join(r.other, "\n")))
	}
	for _, b := range r.skipped {
		t.Logf("%s:%d: a ```go fragment block, not compiled", b.file, b.line)
	}
	t.Logf("%d Go blocks compiled, %d fragments skipped, in %s", len(r.compiled), len(r.skipped), strings.Join(files, ", "))
}

// TestABlockThatDoesNotCompileIsNamedByItsLine compiles blocks of every
// shape the check accepts (testdata/blocks.md) beside blocks that do not
// compile: each of those says on the line it must fail at, in a
// "// want: message" comment, what the compiler or go vet must say.
func TestABlockThatDoesNotCompileIsNamedByItsLine(t *testing.T) {
	r := compileWithin(t, ".", []string{"testdata/blocks.md"})
	wanted := 0
	for i, b := range r.compiled {
		where, want := wantedFailure(b)
		msg, failed := r.failures[i]
		switch {
		case want == "" && failed:
			t.Errorf("%s:%d: the block should compile, and fails:\n%s", b.file, b.line, indent(msg))
		case want == "":
		case !failed:
			t.Errorf("%s:%d: the block compiles; want a failure at line %d: %s", b.file, b.line, where, want)
		case !strings.Contains(msg, fmt.Sprintf("%s:%d:", b.file, where)) || !strings.Contains(msg, want):
			t.Errorf("%s:%d: want a failure at %s:%d: %s; got:\n%s", b.file, b.line, b.file, where, want, indent(msg))
		default:
			wanted++
		}
	}
	if wanted != 3 {
		t.Errorf("%d blocks failed as they should, want 3", wanted)
	}
	if len(r.other) > 0 {
		t.Errorf("the go command said, of no block:\n%s", indent(strings.Join(r.other, "\n")))
	}
	if len(r.compiled) != 8 || len(r.skipped) != 1 {
		t.Errorf("%d Go blocks compiled and %d fragments skipped, want 8 and 1", len(r.compiled), len(r.skipped))
	}
}

// wantedFailure returns the Markdown line and the message of block b's
// "// want: message" comment, if it has one.
func wantedFailure(b block) (line int, message string) {
	for i, l := range strings.Split(b.code, "\n") {
		if _, want, ok := strings.Cut(l, "// want: "); ok {
			return b.codeLine() + i, want
		}
	}
	return 0, ""
}

func TestFencesAreFoundAsCommonMarkHasThem(t *testing.T) {
	src := strings.Join([]string{
		"text",              // 1
		"```go",             // 2
		"a := 1",            // 3
		"```",               // 4
		"~~~~ go fragment",  // 5
		"```",               // 6: shorter and another character: content
		"~~~~~",             // 7
		"  ````sh",          // 8
		"  ls",              // 9
		"   ```",            // 10: too short to close
		"  ````",            // 11
		"inline ```code```", // 12: not a fence
		"    ```",           // 13: indented four: code, not a fence
	}, "\n")
	got, err := blocks("x.md", src)
	if err != nil {
		t.Fatal(err)
	}
	want := []block{
		{file: "x.md", line: 2, info: "go", code: "a := 1\n"},
		{file: "x.md", line: 5, info: "go fragment", code: "```\n"},
		{file: "x.md", line: 8, info: "sh", code: "ls\n ```\n"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("blocks:\n got %+v\nwant %+v", got, want)
	}
	if !got[0].isGo() || got[0].isFragment() || !got[1].isGo() || !got[1].isFragment() || got[2].isGo() {
		t.Errorf("go, go fragment, sh: isGo and isFragment are wrong")
	}
	if _, err := blocks("x.md", "```go\na := 1\n"); err == nil || !strings.Contains(err.Error(), "x.md:1:") {
		t.Errorf("a fence never closed: err = %v, want one naming x.md:1", err)
	}
}

// TestEveryPackageABlockMayNameIsRequired checks that imports.go, which
// keeps the modules the blocks compile against in go.mod, names every
// package outside the standard library that importPaths has, and no other.
func TestEveryPackageABlockMayNameIsRequired(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "imports.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var required, named []string
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		required = append(required, p)
	}
	for _, p := range importPaths {
		if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
			named = append(named, p)
		}
	}
	slices.Sort(required)
	slices.Sort(named)
	if !slices.Equal(required, named) {
		t.Errorf("imports.go imports\n\t%s\nimportPaths names, outside the standard library,\n\t%s",
			strings.Join(required, "\n\t"), strings.Join(named, "\n\t"))
	}
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}
