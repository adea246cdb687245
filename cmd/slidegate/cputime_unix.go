//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPUTime returns the CPU time this process has used, user and
// system, summed over its threads.
func processCPUTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
