package doccheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// A report is what compiling the Go blocks of some Markdown files found.
type report struct {
	compiled []block        // the Go blocks compiled, in order
	skipped  []block        // the fragments (```go fragment), not compiled
	failures map[int]string // the compiler's messages, by index in compiled
	other    []string       // messages that name no block
}

// compile compiles the Go blocks of the Markdown files (paths relative to
// root) in a module made in work, which requires what module modDir
// requires, and reports what the compiler and go vet said of each block.
// The error is for a check that could not run.
func compile(ctx context.Context, modDir, root string, files []string, work string) (report, error) {
	r := report{failures: map[int]string{}}
	root, err := filepath.Abs(root)
	if err != nil {
		return r, err
	}
	for _, file := range files {
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return r, err
		}
		bs, err := blocks(filepath.ToSlash(file), string(src))
		if err != nil {
			return r, err
		}
		for _, b := range bs {
			switch {
			case b.isFragment():
				r.skipped = append(r.skipped, b)
			case b.isGo():
				r.compiled = append(r.compiled, b)
			}
		}
	}
	if err := writeModule(ctx, modDir, work); err != nil {
		return r, err
	}
	for i, b := range r.compiled {
		pkg := blockPackage(i)
		dir := filepath.Join(work, pkg)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return r, err
		}
		gen := filepath.Join(dir, "block.go")
		if err := os.WriteFile(gen, goFile(b, pkg, filepath.Join(root, b.file), gen), 0o644); err != nil {
			return r, err
		}
	}
	if len(r.compiled) == 0 {
		return r, nil
	}
	// Every error of the compiler first (go vet names only a package's
	// first), then go vet's findings in the blocks that compiled.
	out, failed, err := goCommand(ctx, work, "build", "./...")
	if err != nil {
		return r, err
	}
	if failed {
		r.attribute(out, root, work)
	}
	vet := []string{"vet"}
	for i := range r.compiled {
		if _, failed := r.failures[i]; !failed {
			vet = append(vet, "./"+blockPackage(i))
		}
	}
	if len(vet) == 1 {
		return r, nil
	}
	out, failed, err = goCommand(ctx, work, vet...)
	if err != nil {
		return r, err
	}
	if failed {
		r.attribute(out, root, work)
	}
	return r, nil
}

// blockPackage names the package of the i-th block.
func blockPackage(i int) string { return fmt.Sprintf("b%03d", i) }

// attribute files each line of the output of a go command that failed
// under the block it names, with the Markdown file named as the caller
// named it; a line without a position (a continuation, "too many errors")
// goes with the line before it. If no line names a block, the output is
// kept whole, so that the failure is not lost.
func (r *report) attribute(out, root, work string) {
	last, named := -1, false
	var others []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimPrefix(line, "vet: ")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "# ") || strings.HasPrefix(line, "go: downloading ") {
			continue
		}
		at := -1
		for i, b := range r.compiled {
			md := filepath.Join(root, b.file) + ":"
			if rest, ok := strings.CutPrefix(line, md); ok {
				n, _, _ := strings.Cut(rest, ":")
				if l, err := strconv.Atoi(n); err == nil && l >= b.codeLine() && l <= b.lastLine() {
					at = i
					line = b.file + ":" + rest
					break
				}
			}
			if strings.Contains(line, blockPackage(i)+string(filepath.Separator)+"block.go") {
				at = i
				break
			}
		}
		if at < 0 && (strings.HasPrefix(line, "\t") || strings.HasPrefix(line, " ") || !strings.Contains(line, ":")) {
			at = last
		}
		line = strings.ReplaceAll(line, work+string(filepath.Separator), "")
		if at < 0 {
			others = append(others, line)
			continue
		}
		last, named = at, true
		r.failures[at] += line + "\n"
	}
	if !named {
		others = []string{strings.TrimSpace(out)}
	}
	r.other = append(r.other, others...)
}

// writeModule writes in work the go.mod and go.sum of a module that
// requires what module modDir requires, with its replacements made
// absolute.
func writeModule(ctx context.Context, modDir, work string) error {
	out, failed, err := goCommand(ctx, modDir, "mod", "edit", "-json")
	if err != nil || failed {
		return fmt.Errorf("reading %s/go.mod: %v%s", modDir, err, out)
	}
	var mod struct {
		Go      string
		Require []struct {
			Path, Version string
			Indirect      bool
		}
		Replace []struct {
			Old, New struct{ Path, Version string }
		}
	}
	if err := json.Unmarshal([]byte(out), &mod); err != nil {
		return fmt.Errorf("reading %s/go.mod: %w", modDir, err)
	}
	abs, err := filepath.Abs(modDir)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module docblocks\n\ngo %s\n\n", mod.Go)
	for _, r := range mod.Require {
		fmt.Fprintf(&b, "require %s %s\n", r.Path, r.Version)
	}
	for _, r := range mod.Replace {
		old, new := r.Old.Path, r.New.Path
		if r.Old.Version != "" {
			old += " " + r.Old.Version
		}
		if r.New.Version != "" {
			new += " " + r.New.Version
		} else if !filepath.IsAbs(new) {
			new = filepath.Join(abs, new)
		}
		fmt.Fprintf(&b, "replace %s => %s\n", old, new)
	}
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(modDir, "go.sum"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(work, "go.sum"), sum, 0o644)
}

// goCommand runs the go command in dir, alone in its module (GOWORK=off),
// and returns its output; failed says it exited with a status other than
// 0, err that it could not run.
func goCommand(ctx context.Context, dir string, args ...string) (out string, failed bool, err error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	if _, ok := err.(*exec.ExitError); ok && ctx.Err() == nil {
		return buf.String(), true, nil
	}
	if err != nil {
		return buf.String(), false, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, buf.String())
	}
	return buf.String(), false, nil
}
