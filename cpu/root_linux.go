//go:build linux

package cpu

import (
	"io/fs"
	"os"
)

// defaultRoot is the real file system: procfs and cgroupfs are where Linux
// mounts them.
func defaultRoot() (fs.FS, error) { return os.DirFS("/"), nil }
