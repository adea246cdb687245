package slidegate

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every package of the core module imports the standard library and other
// packages of the core only, but package rulefile, which reads YAML and
// watches files; and the module requires nothing more: a program that
// imports the core pulls in no client of Redis, gRPC or Prometheus (those
// are modules of their own). The packages are found by walking the
// module's directories, so a new one is checked too.
func TestTheCoreImportsTheStandardLibraryOnly(t *testing.T) {
	const module = "github.com/slidegate/slidegate"
	outside := map[string][]string{"rulefile": {"github.com/fsnotify/fsnotify", "go.yaml.in/yaml/v3"}}
	checked := 0
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dir != "." {
			if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		p, err := build.ImportDir(dir, 0)
		var none *build.NoGoError
		if errors.As(err, &none) {
			return nil
		}
		if err != nil {
			return err
		}
		checked++
		for _, imp := range p.Imports {
			switch {
			case imp == module || strings.HasPrefix(imp, module+"/"):
			case !strings.Contains(strings.Split(imp, "/")[0], "."): // the standard library
			case slices.Contains(outside[filepath.ToSlash(dir)], imp):
			default:
				t.Errorf("%s imports %s, outside the standard library and the core", dir, imp)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 15 {
		t.Fatalf("checked %d packages; the walk missed the core", checked)
	}
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{"github.com/fsnotify/fsnotify", "go.yaml.in/yaml/v3", "golang.org/x/sys"} // x/sys: fsnotify's
	inRequire := false
	for line := range strings.Lines(string(mod)) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "require" && len(f) > 1 && f[1] == "(":
			inRequire = true
		case f[0] == ")":
			inRequire = false
		case f[0] == "require" && len(f) >= 3 && !slices.Contains(allowed, f[1]),
			inRequire && !slices.Contains(allowed, f[0]):
			t.Errorf("go.mod requires %s; the core module requires only %v", strings.TrimSpace(line), allowed)
		}
	}
}
