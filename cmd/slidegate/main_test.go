package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte("flow:\n  - resource: a\n    limit: 10\nbreakers:\n  - resource: a\n    strategy: adaptive\n"), 0o644)
	os.WriteFile(bad, []byte(`{"flow":[{"resource":"a","limit":-1},{"resource":"b","behavior":"queue"}]}`), 0o644)

	code, out, _ := runCmd("check", good)
	if code != 0 || out != good+": ok: 1 flow rule, 1 breaker\n" {
		t.Fatalf("check good: %d %q", code, out)
	}
	code, out, _ = runCmd("check", bad)
	if code != 1 || !strings.Contains(out, bad+`: flow[0] (resource "a"): limit: -1 must not be negative`) ||
		!strings.Contains(out, `flow[1] (resource "b"): behavior: "queue"`) || !strings.HasSuffix(out, bad+": 2 problems\n") {
		t.Fatalf("check bad: %d\n%s", code, out)
	}
	if code, _, errOut := runCmd("check", filepath.Join(dir, "missing.yaml")); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("check missing: %d %q", code, errOut)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}, {"check"}, {"check", "a", "b"}} {
		if code, _, errOut := runCmd(args...); code != 2 || !strings.Contains(errOut, "usage") {
			t.Errorf("%q: %d %q, want status 2 and the usage", args, code, errOut)
		}
	}
	if code, out, _ := runCmd("help"); code != 0 || !strings.Contains(out, "slidegate check FILE") {
		t.Errorf("help: %d %q", code, out)
	}
}
