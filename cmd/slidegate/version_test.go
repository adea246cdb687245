package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestVersionNamesTheModuleAndTheGoVersion(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"version"}, &out, &errs); code != 0 {
		t.Fatalf("version: exit %d, %s", code, errs.String())
	}
	line := strings.TrimSpace(out.String())
	if !strings.HasPrefix(line, "slidegate ") || !strings.Contains(line, runtime.Version()) || strings.Contains(line, "\n") {
		t.Fatalf("version printed %q, want one line naming slidegate and %s", line, runtime.Version())
	}
	if code := run([]string{"version", "extra"}, &out, &errs); code != 2 {
		t.Fatalf("version extra: exit %d, want 2", code)
	}
}
