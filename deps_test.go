package slidegate

import (
	"go/build"
	"os"
	"slices"
	"strings"
	"testing"
)

// The core packages import the standard library and one another only, and
// the module requires nothing but what package rulefile reads files with:
// a program that imports the core pulls in no client of Redis, gRPC or
// Prometheus (those are modules of their own).
func TestTheCoreImportsTheStandardLibraryOnly(t *testing.T) {
	core := []string{".", "clock", "window", "flow", "breaker", "cpu", "dashboard", "middleware/httpguard",
		"middleware/internal/clientip", "internal/notify", "internal/stripe", "internal/timegrid", "internal/flood"}
	for _, dir := range core {
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, imp := range p.Imports {
			const module = "github.com/slidegate/slidegate"
			switch {
			case imp == module:
			case strings.HasPrefix(imp, module+"/"):
				if !slices.Contains(core, strings.TrimPrefix(imp, module+"/")) {
					t.Errorf("%s imports %s, which is not a core package", dir, imp)
				}
			case strings.Contains(strings.Split(imp, "/")[0], "."):
				t.Errorf("%s imports %s, outside the standard library", dir, imp)
			}
		}
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
