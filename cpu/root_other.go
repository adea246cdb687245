//go:build !linux

package cpu

import "io/fs"

// defaultRoot has nothing to read outside Linux: there is no procfs or
// cgroupfs. A root given with withRoot is still read, which is how the
// parsers are tested on every platform.
func defaultRoot() (fs.FS, error) { return nil, ErrUnavailable }
