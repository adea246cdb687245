package cpu

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// Mount lines of the layouts the tests build.
const (
	mountV2     = "30 22 0:27 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	mountV1CPU  = "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:8 - cgroup cgroup rw,cpu,cpuacct\n"
	mountV1Set  = "33 30 0:30 / /sys/fs/cgroup/cpuset rw,nosuid shared:9 - cgroup cgroup rw,cpuset\n"
	mountRootFS = "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
	mountProc   = "25 22 0:22 / /proc rw,nosuid - proc proc rw\n"
)

// usageWriter writes a cgroup's total CPU time into a fake tree, in the
// format and unit of the file that holds it.
type usageWriter func(t fstest.MapFS, used time.Duration)

func cpuStatAt(dir string) usageWriter {
	return func(t fstest.MapFS, used time.Duration) {
		t[dir+"/cpu.stat"] = &fstest.MapFile{Data: fmt.Appendf(nil,
			"usage_usec %d\nuser_usec %d\nsystem_usec 0\nnr_periods 0\n", used/time.Microsecond, used/time.Microsecond)}
	}
}

func cpuacctAt(dir string) usageWriter {
	return func(t fstest.MapFS, used time.Duration) {
		t[dir+"/cpuacct.usage"] = &fstest.MapFile{Data: fmt.Appendf(nil, "%d\n", used.Nanoseconds())}
	}
}

func procStat(t fstest.MapFS, used time.Duration) {
	ticks := used / (time.Second / userHZ)
	t["proc/self/stat"] = &fstest.MapFile{Data: fmt.Appendf(nil,
		"4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 100 0 0 0 %d %d 0 0 20 0 8 0 1000 1000000 100 18446744073709551615\n",
		ticks-ticks/3, ticks/3)}
}

// treeCase is a fake procfs and cgroupfs, and what it describes.
type treeCase struct {
	name         string
	cgroup       string            // proc/self/cgroup
	mountinfo    string            // proc/self/mountinfo
	files        map[string]string // the cgroup files, by fs path
	usage        usageWriter
	hostCPUs     int
	wantCapacity float64
	wantSource   string
}

func (c treeCase) build() fstest.MapFS {
	t := fstest.MapFS{
		"proc/self/cgroup":    {Data: []byte(c.cgroup)},
		"proc/self/mountinfo": {Data: []byte(c.mountinfo)},
	}
	for name, text := range c.files {
		t[name] = &fstest.MapFile{Data: []byte(text)}
	}
	c.usage(t, 0)
	procStat(t, 0)
	return t
}

var treeCases = []treeCase{
	{
		name:         "v2 with a limit",
		cgroup:       "0::/app.slice/app.service\n",
		mountinfo:    mountRootFS + mountProc + mountV2,
		files:        map[string]string{"sys/fs/cgroup/app.slice/app.service/cpu.max": "200000 100000\n"},
		usage:        cpuStatAt("sys/fs/cgroup/app.slice/app.service"),
		hostCPUs:     8,
		wantCapacity: 2,
		wantSource:   "cgroup v2 at /sys/fs/cgroup/app.slice/app.service",
	},
	{
		name:      "v2 nested, the ancestor's limit is tighter",
		cgroup:    "0::/kubepods.slice/pod1.slice/ctr.scope\n",
		mountinfo: mountRootFS + mountV2,
		files: map[string]string{
			"sys/fs/cgroup/kubepods.slice/pod1.slice/ctr.scope/cpu.max": "max 100000\n",
			"sys/fs/cgroup/kubepods.slice/pod1.slice/cpu.max":           "150000 100000\n",
			"sys/fs/cgroup/kubepods.slice/cpu.max":                      "400000 100000\n",
		},
		usage:        cpuStatAt("sys/fs/cgroup/kubepods.slice/pod1.slice/ctr.scope"),
		hostCPUs:     16,
		wantCapacity: 1.5,
		wantSource:   "cgroup v2 at /sys/fs/cgroup/kubepods.slice/pod1.slice/ctr.scope",
	},
	{
		name:      "v2 nested, a child's own limit is tighter than its parent's",
		cgroup:    "0::/a/b\n",
		mountinfo: mountV2,
		files: map[string]string{
			"sys/fs/cgroup/a/b/cpu.max": "50000 100000\n",
			"sys/fs/cgroup/a/cpu.max":   "300000 100000\n",
		},
		usage:        cpuStatAt("sys/fs/cgroup/a/b"),
		hostCPUs:     4,
		wantCapacity: 0.5,
		wantSource:   "cgroup v2 at /sys/fs/cgroup/a/b",
	},
	{
		name:      "v2 no limit, cpuset 4 of 64",
		cgroup:    "0::/pod\n",
		mountinfo: mountV2,
		files: map[string]string{
			"sys/fs/cgroup/pod/cpu.max":               "max 100000\n",
			"sys/fs/cgroup/pod/cpuset.cpus":           "\n",
			"sys/fs/cgroup/pod/cpuset.cpus.effective": "0-1,32-33\n",
		},
		usage:        cpuStatAt("sys/fs/cgroup/pod"),
		hostCPUs:     64,
		wantCapacity: 4,
		wantSource:   "cgroup v2 at /sys/fs/cgroup/pod",
	},
	{
		name:      "v2 cpuset only on the parent",
		cgroup:    "0::/pod/ctr\n",
		mountinfo: mountV2,
		files: map[string]string{
			"sys/fs/cgroup/pod/cpuset.cpus.effective": "8-13\n",
		},
		usage:        cpuStatAt("sys/fs/cgroup/pod/ctr"),
		hostCPUs:     64,
		wantCapacity: 6,
		wantSource:   "cgroup v2 at /sys/fs/cgroup/pod/ctr",
	},
	{
		name:         "v2 no limit at all: the host's CPUs",
		cgroup:       "0::/user.slice\n",
		mountinfo:    mountV2,
		files:        map[string]string{},
		usage:        cpuStatAt("sys/fs/cgroup/user.slice"),
		hostCPUs:     12,
		wantCapacity: 12,
		wantSource:   "cgroup v2 at /sys/fs/cgroup/user.slice",
	},
	{
		name:   "v2 in a private cgroup namespace: path / and mount root /",
		cgroup: "0::/\n",
		// The container's view: its own cgroup is the root of the mount.
		mountinfo:    "1200 1100 0:31 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n",
		files:        map[string]string{"sys/fs/cgroup/cpu.max": "50000 100000\n"},
		usage:        cpuStatAt("sys/fs/cgroup"),
		hostCPUs:     8,
		wantCapacity: 0.5,
		wantSource:   "cgroup v2 at /sys/fs/cgroup",
	},
	{
		name:   "v2 mount showing a subtree: the cgroup is the mount's root",
		cgroup: "0::/kubepods/pod1/ctr\n",
		// Mounted from outside the namespace: the mount's root is the
		// container's cgroup, so its files are at the mount point, not at
		// /sys/fs/cgroup/kubepods/pod1/ctr.
		mountinfo:    "1200 1100 0:31 /kubepods/pod1/ctr /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n",
		files:        map[string]string{"sys/fs/cgroup/cpu.max": "300000 100000\n"},
		usage:        cpuStatAt("sys/fs/cgroup"),
		hostCPUs:     8,
		wantCapacity: 3,
		wantSource:   "cgroup v2 at /sys/fs/cgroup",
	},
	{
		name:      "v2 mount showing a subtree above the cgroup",
		cgroup:    "0::/kubepods/pod1/ctr\n",
		mountinfo: "1200 1100 0:31 /kubepods /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n",
		files: map[string]string{
			"sys/fs/cgroup/pod1/ctr/cpu.max": "max 100000\n",
			"sys/fs/cgroup/pod1/cpu.max":     "200000 100000\n",
		},
		usage:        cpuStatAt("sys/fs/cgroup/pod1/ctr"),
		hostCPUs:     8,
		wantCapacity: 2,
		wantSource:   "cgroup v2 at /sys/fs/cgroup/pod1/ctr",
	},
	{
		name:      "v1 quota 125000/100000 is 1.25 CPUs",
		cgroup:    "4:cpu,cpuacct:/docker/abc\n3:cpuset:/docker/abc\n1:name=systemd:/docker/abc\n",
		mountinfo: mountRootFS + mountV1CPU + mountV1Set,
		files: map[string]string{
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us":  "125000\n",
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
			"sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us":      "-1\n",
			"sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_period_us":     "100000\n",
			"sys/fs/cgroup/cpuset/docker/abc/cpuset.cpus":            "0-7\n",
		},
		usage:        cpuacctAt("sys/fs/cgroup/cpu,cpuacct/docker/abc"),
		hostCPUs:     8,
		wantCapacity: 1.25,
		wantSource:   "cgroup v1 at /sys/fs/cgroup/cpu,cpuacct/docker/abc",
	},
	{
		name:      "v1 no quota, cpuset of 3",
		cgroup:    "4:cpu,cpuacct:/docker/abc\n3:cpuset:/docker/abc\n",
		mountinfo: mountV1CPU + mountV1Set,
		files: map[string]string{
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us":  "-1\n",
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
			"sys/fs/cgroup/cpuset/docker/abc/cpuset.effective_cpus":  "1-2,5\n",
			"sys/fs/cgroup/cpuset/docker/abc/cpuset.cpus":            "0-7\n",
		},
		usage:        cpuacctAt("sys/fs/cgroup/cpu,cpuacct/docker/abc"),
		hostCPUs:     8,
		wantCapacity: 3,
		wantSource:   "cgroup v1 at /sys/fs/cgroup/cpu,cpuacct/docker/abc",
	},
	{
		name:      "v1 no quota, no cpuset: the host's CPUs",
		cgroup:    "4:cpu,cpuacct:/docker/abc\n",
		mountinfo: mountV1CPU,
		files: map[string]string{
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us":  "-1\n",
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
		},
		usage:        cpuacctAt("sys/fs/cgroup/cpu,cpuacct/docker/abc"),
		hostCPUs:     6,
		wantCapacity: 6,
		wantSource:   "cgroup v1 at /sys/fs/cgroup/cpu,cpuacct/docker/abc",
	},
	{
		name:   "v1 on a hybrid host with cpu and cpuacct apart: v1, not the empty unified hierarchy",
		cgroup: "2:cpuacct:/job\n1:cpu:/job\n0::/job\n",
		mountinfo: "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n" +
			"32 30 0:29 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n" +
			"40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
		files: map[string]string{
			"sys/fs/cgroup/cpu/job/cpu.cfs_quota_us":  "250000\n",
			"sys/fs/cgroup/cpu/job/cpu.cfs_period_us": "100000\n",
			"sys/fs/cgroup/unified/job/cpu.stat":      "usage_usec 999999999\n",
		},
		usage:        cpuacctAt("sys/fs/cgroup/cpuacct/job"),
		hostCPUs:     8,
		wantCapacity: 2.5,
		wantSource:   "cgroup v1 at /sys/fs/cgroup/cpuacct/job",
	},
	{
		name:         "mount point with an escaped space",
		cgroup:       "0::/svc\n",
		mountinfo:    `30 22 0:27 / /sys/fs/my\040cgroup rw - cgroup2 cgroup2 rw` + "\n",
		files:        map[string]string{"sys/fs/my cgroup/svc/cpu.max": "100000 100000\n"},
		usage:        cpuStatAt("sys/fs/my cgroup/svc"),
		hostCPUs:     4,
		wantCapacity: 1,
		wantSource:   "cgroup v2 at /sys/fs/my cgroup/svc",
	},
	{
		name:         "no cgroup file system mounted: the process alone",
		cgroup:       "0::/\n",
		mountinfo:    mountRootFS + mountProc,
		files:        map[string]string{},
		usage:        procStat,
		hostCPUs:     2,
		wantCapacity: 2,
		wantSource:   "process (no cgroup file system mounted)",
	},
}

// TestUsageMatchesTheTree builds each tree, lets the cgroup use a known share
// of its capacity for a second, and checks the Sampler reports that share
// within ±5 % and the capacity exactly.
func TestUsageMatchesTheTree(t *testing.T) {
	for _, c := range treeCases {
		for _, share := range []float64{0.1, 0.37, 0.8, 1} {
			t.Run(fmt.Sprintf("%s/%v", c.name, share), func(t *testing.T) {
				tree := c.build()
				clk := clock.NewManual(int64(time.Hour))
				s, err := NewSampler(withRoot(tree), withHostCPUs(c.hostCPUs), WithClock(clk), WithSmoothing(0))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if got := s.Source(); got != c.wantSource {
					t.Errorf("Source() = %q, want %q", got, c.wantSource)
				}
				if got := s.Capacity(); got != c.wantCapacity {
					t.Errorf("Capacity() = %v, want %v", got, c.wantCapacity)
				}
				// A whole second, so that the process case's 10 ms ticks
				// round by at most 1 %.
				used := time.Duration(share * c.wantCapacity * float64(time.Second))
				c.usage(tree, used)
				if err := s.sampleAt(clk.Now() + int64(time.Second)); err != nil {
					t.Fatal(err)
				}
				if got := s.Usage(); math.Abs(got-share) > 0.05*share {
					t.Errorf("Usage() = %v, want %v ± 5 %%", got, share)
				}
			})
		}
	}
}

func TestMissingOrMalformedFilesAreNamed(t *testing.T) {
	base := treeCases[0] // v2 with a limit
	dir := "sys/fs/cgroup/app.slice/app.service"
	cases := []struct {
		name   string
		change func(fstest.MapFS)
		want   string
	}{
		{"no proc/self/cgroup", func(t fstest.MapFS) { delete(t, "proc/self/cgroup") }, "cgroup membership not readable"},
		{"no mountinfo", func(t fstest.MapFS) { delete(t, "proc/self/mountinfo") }, "cgroup mounts not readable"},
		{"no cpu.stat", func(t fstest.MapFS) { delete(t, dir+"/cpu.stat") }, "cgroup v2 at /" + dir + " CPU time not readable"},
		{"cpu.stat without usage_usec", func(t fstest.MapFS) { t[dir+"/cpu.stat"] = &fstest.MapFile{Data: []byte("user_usec 5\n")} }, "no usage_usec"},
		{"garbage cpu.max", func(t fstest.MapFS) { t[dir+"/cpu.max"] = &fstest.MapFile{Data: []byte("lots 100000\n")} }, `cpu.max quota "lots"`},
		{"zero period", func(t fstest.MapFS) { t[dir+"/cpu.max"] = &fstest.MapFile{Data: []byte("100000 0\n")} }, `cpu.max period "0"`},
		{"garbage cgroup line", func(t fstest.MapFS) {
			t["proc/self/cgroup"] = &fstest.MapFile{Data: []byte("nonsense\n")}
		}, `"nonsense"`},
		{"cgroup under no mount's root", func(t fstest.MapFS) {
			t["proc/self/mountinfo"] = &fstest.MapFile{Data: []byte("1 0 0:1 /other /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")}
		}, "under no mount's root"},
		{"bad cpuset", func(t fstest.MapFS) { t[dir+"/cpuset.cpus.effective"] = &fstest.MapFile{Data: []byte("3-1\n")} }, `range "3-1"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree := base.build()
			c.change(tree)
			_, err := NewSampler(withRoot(tree), withHostCPUs(4))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestV1MissingCPUAcctUsageIsNamed(t *testing.T) {
	tree := treeCases[9].build() // v1 quota 1.25
	delete(tree, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpuacct.usage")
	_, err := newReader(tree, 8)
	if err == nil || !strings.Contains(err.Error(), "cgroup v1 at /sys/fs/cgroup/cpu,cpuacct/docker/abc CPU time not readable") ||
		!errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want a named fs.ErrNotExist", err)
	}
}

func TestBadOptionsAreRefused(t *testing.T) {
	tree := treeCases[0].build()
	for _, c := range []struct {
		opt  Option
		want string
	}{
		{WithInterval(0), "interval 0s"},
		{WithInterval(2 * time.Minute), "interval 2m0s"},
		{WithSmoothing(-time.Second), "smoothing -1s"},
		{withHostCPUs(0), "host CPUs 0"},
		{WithClock(nil), "clock: nil"},
	} {
		_, err := NewSampler(withRoot(tree), c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want it to contain %q", err, c.want)
		}
	}
}

// TestLimitChangedAtRunTimeIsSeen: the limits are read on every sample.
func TestLimitChangedAtRunTimeIsSeen(t *testing.T) {
	c := treeCases[0]
	tree := c.build()
	clk := clock.NewManual(1)
	s, err := NewSampler(withRoot(tree), withHostCPUs(8), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tree["sys/fs/cgroup/app.slice/app.service/cpu.max"] = &fstest.MapFile{Data: []byte("max 100000\n")}
	if err := s.sampleAt(2); err != nil {
		t.Fatal(err)
	}
	if got := s.Capacity(); got != 8 {
		t.Fatalf("Capacity() after the limit was lifted = %v, want 8", got)
	}
}

// TestRealSystem reads this machine's own files: whatever the container, the
// capacity is positive and at most the CPUs the process may run on.
func TestRealSystem(t *testing.T) {
	s, err := NewSampler()
	if runtime.GOOS != "linux" {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("NewSampler() on %s: err = %v, want ErrUnavailable", runtime.GOOS, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c := s.Capacity(); c <= 0 || c > float64(runtime.NumCPU()) {
		t.Fatalf("Capacity() = %v, want in (0, %d]; source %s", c, runtime.NumCPU(), s.Source())
	}
	t.Logf("source %s, capacity %v", s.Source(), s.Capacity())
}

// TestDirTree reads a tree of real files, as os.DirFS("/") does in
// production, to check the fs.FS paths the Reader builds are valid there.
func TestDirTree(t *testing.T) {
	dir := t.TempDir()
	c := treeCases[1] // v2 nested
	for name, f := range c.build() {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := newReader(os.DirFS(dir), c.hostCPUs)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Capacity(); err != nil || got != c.wantCapacity {
		t.Fatalf("Capacity() = %v, %v; want %v", got, err, c.wantCapacity)
	}
}
