package cpu_test

import (
	"fmt"

	"github.com/slidegate/slidegate/cpu"
)

// The CPU of the process's cgroup, for the shed rules of a guard
// (slidegate.WithCPU(s.Usage)).
func Example() {
	s, err := cpu.NewSampler()
	if err != nil {
		fmt.Println(err) // cpu.ErrUnavailable outside Linux
		return
	}
	defer s.Close()
	fmt.Printf("%s: %.2f CPUs, %.0f%% in use\n", s.Source(), s.Capacity(), 100*s.Usage())
	if s.Usage() > 0.75 {
		fmt.Println("shed")
	}
}
