//go:build !unix

package main

import (
	"errors"
	"time"
)

// processCPUTime is not measured here: the demo's shed rules then read the
// cgroup's CPU, where it can be read at all.
func processCPUTime() (time.Duration, error) {
	return 0, errors.New("the process's CPU time is not measured on this system")
}
