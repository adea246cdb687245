package main

import (
	"runtime/debug"
	"strings"
)

// version returns what the binary says of itself: the module and its
// version ("(devel)" when built from a checkout), the Go version, and the
// VCS revision and time, marked "+dirty" if the tree had changes, when the
// build recorded them. What the build did not record is left out.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "slidegate: no build information"
	}
	parts := []string{"slidegate", bi.Main.Version, bi.GoVersion}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		parts = append(parts, rev+dirty)
	}
	if at != "" {
		parts = append(parts, at)
	}
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
}
