package cpu_test

import (
	"fmt"
	"testing/fstest"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/cpu"
)

// A container limited to 1.5 CPUs by its pod, seen through a fake tree: in
// production NewSampler() reads the real one.
func Example() {
	tree := fstest.MapFS{
		"proc/self/cgroup":               {Data: []byte("0::/pod/ctr\n")},
		"proc/self/mountinfo":            {Data: []byte("30 22 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")},
		"sys/fs/cgroup/pod/cpu.max":      {Data: []byte("150000 100000\n")},
		"sys/fs/cgroup/pod/ctr/cpu.max":  {Data: []byte("max 100000\n")},
		"sys/fs/cgroup/pod/ctr/cpu.stat": {Data: []byte("usage_usec 1000000\n")},
	}
	clk := clock.NewManual(0)
	s, err := cpu.NewSampler(cpu.WithRoot(tree), cpu.WithHostCPUs(64), cpu.WithClock(clk))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	// 1.2 CPU-seconds in the next second: 80 % of 1.5 CPUs.
	tree["sys/fs/cgroup/pod/ctr/cpu.stat"] = &fstest.MapFile{Data: []byte("usage_usec 2200000\n")}
	if err := s.SampleAt(int64(time.Second)); err != nil { // the goroutine would at each interval
		fmt.Println(err)
		return
	}
	fmt.Println(s.Source())
	fmt.Printf("capacity %.2f CPUs, usage %.2f\n", s.Capacity(), s.Usage())
	if s.Usage() > 0.75 {
		fmt.Println("shed")
	}
	// Output:
	// cgroup v2 at /sys/fs/cgroup/pod/ctr
	// capacity 1.50 CPUs, usage 0.80
	// shed
}
