package cpu

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// A container limited to 1.5 CPUs by its pod, seen through a fake tree,
// that uses 1.2 CPU-seconds in a second is at 80%.
func TestAPodLimitedTo1Point5CPUsUsing1Point2IsAt80Percent(t *testing.T) {
	tree := fstest.MapFS{
		"proc/self/cgroup":               {Data: []byte("0::/pod/ctr\n")},
		"proc/self/mountinfo":            {Data: []byte("30 22 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")},
		"sys/fs/cgroup/pod/cpu.max":      {Data: []byte("150000 100000\n")},
		"sys/fs/cgroup/pod/ctr/cpu.max":  {Data: []byte("max 100000\n")},
		"sys/fs/cgroup/pod/ctr/cpu.stat": {Data: []byte("usage_usec 1000000\n")},
	}
	s, err := NewSampler(withRoot(tree), withHostCPUs(64), WithClock(clock.NewManual(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tree["sys/fs/cgroup/pod/ctr/cpu.stat"] = &fstest.MapFile{Data: []byte("usage_usec 2200000\n")}
	if err := s.sampleAt(int64(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Source(), "cgroup v2 at /sys/fs/cgroup/pod/ctr"; got != want {
		t.Errorf("source %q, want %q", got, want)
	}
	if s.Capacity() != 1.5 || s.Usage() < 0.7999 || s.Usage() > 0.8001 {
		t.Errorf("capacity %v CPUs, usage %v; want 1.5 and 0.8", s.Capacity(), s.Usage())
	}
}
