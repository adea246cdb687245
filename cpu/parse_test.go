package cpu

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseCPUMax(t *testing.T) {
	for _, c := range []struct {
		in      string
		cores   float64
		limited bool
		err     string
	}{
		{"max 100000\n", 0, false, ""},
		{"125000 100000\n", 1.25, true, ""},
		{"50000 100000", 0.5, true, ""},
		{"1000 1000000", 0.001, true, ""},
		{"", 0, false, "want \"QUOTA PERIOD\""},
		{"max", 0, false, "want \"QUOTA PERIOD\""},
		{"100 200 300", 0, false, "want \"QUOTA PERIOD\""},
		{"-5 100000", 0, false, `quota "-5"`},
		{"max -1", 0, false, `period "-1"`},
		{"max 0", 0, false, `period "0"`},
		{"1e5 100000", 0, false, `quota "1e5"`},
	} {
		cores, limited, err := parseCPUMax(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseCPUMax(%q) err = %v, want it to contain %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || cores != c.cores || limited != c.limited {
			t.Errorf("parseCPUMax(%q) = %v, %v, %v; want %v, %v", c.in, cores, limited, err, c.cores, c.limited)
		}
	}
}

func TestParseCFS(t *testing.T) {
	if cores, limited, err := parseCFS("125000\n", "100000\n"); err != nil || !limited || cores != 1.25 {
		t.Errorf("parseCFS(125000, 100000) = %v, %v, %v; want 1.25, true", cores, limited, err)
	}
	if _, limited, err := parseCFS("-1\n", "garbage"); err != nil || limited {
		t.Errorf("parseCFS(-1) = %v, %v; want no limit (the period is not read)", limited, err)
	}
	if _, _, err := parseCFS("100000", "0"); err == nil || !strings.Contains(err.Error(), `cpu.cfs_period_us "0"`) {
		t.Errorf("parseCFS(100000, 0) err = %v, want it to name the period", err)
	}
}

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		fail bool
	}{
		{"0-3\n", 4, false},
		{"0-1,32-33", 4, false},
		{"0,2,4,6", 4, false},
		{"5", 1, false},
		{"\n", 0, false},
		{"3-1", 0, true},
		{"-1", 0, true},
		{"0-", 0, true},
		{"a", 0, true},
		{"0,,1", 0, true},
		{"0-99999999", 0, true},
	} {
		n, err := parseCPUList(c.in)
		if (err != nil) != c.fail || n != c.n {
			t.Errorf("parseCPUList(%q) = %d, %v; want %d, failure %v", c.in, n, err, c.n, c.fail)
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	text := "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" +
		"30 22 0:27 / /sys/fs/cgroup rw shared:4 master:1 - cgroup2 cgroup2 rw\n" +
		`31 30 0:28 /docker/a\040b /mnt/cpu\134x rw - cgroup cgroup rw,cpu,cpuacct` + "\n"
	mounts, err := parseMountinfo(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 2 {
		t.Fatalf("got %d cgroup mounts, want 2: %+v", len(mounts), mounts)
	}
	if m := mounts[0]; !m.v2 || m.root != "/" || m.point != "/sys/fs/cgroup" {
		t.Errorf("mount 0 = %+v", m)
	}
	if m := mounts[1]; m.v2 || m.root != "/docker/a b" || m.point != `/mnt/cpu\x` || !m.has("cpu") || !m.has("cpuacct") || m.has("cpuset") {
		t.Errorf("mount 1 = %+v", m)
	}
	for _, bad := range []string{
		"30 22 0:27 / /sys/fs/cgroup rw cgroup2 cgroup2 rw", // no separator
		"30 22 0:27 / /sys/fs/cgroup rw - cgroup2",          // too few after it
		`30 22 0:27 / /sys/fs/cg\04 rw - cgroup2 cgroup2 rw`,
		`30 22 0:27 / /sys/fs/cg\999 rw - cgroup2 cgroup2 rw`,
		"- - -",
		"0 0 0 0 00 0 - cgroup 0", // no super options: found by the fuzzer
	} {
		if _, err := parseMountinfo(bad); err == nil {
			t.Errorf("parseMountinfo(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseCgroupFile(t *testing.T) {
	m, err := parseCgroupFile("12:cpu,cpuacct:/docker/x\n11:cpuset:/docker/y\n1:name=systemd:/z\n0::/a:b\n")
	if err != nil {
		t.Fatal(err)
	}
	if !m.hasCPU || m.cpu != "/docker/x" || !m.hasCPUAcct || m.cpuacct != "/docker/x" ||
		!m.hasCPUSet || m.cpuset != "/docker/y" || !m.hasUnified || m.unified != "/a:b" {
		t.Errorf("parseCgroupFile = %+v", m)
	}
	for _, bad := range []string{"garbage", "0::relative", "1:cpu"} {
		if _, err := parseCgroupFile(bad); err == nil {
			t.Errorf("parseCgroupFile(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	ticks, err := parseProcStat("77 (a) b) c) R 1 77 77 0 -1 0 0 0 0 0 150 50 0 0 20 0 1 0 5 6 7\n")
	if err != nil || ticks != 200 {
		t.Fatalf("parseProcStat = %d, %v; want 200", ticks, err)
	}
	for _, bad := range []string{"", "77 (x R 1", "77 (x) R 1 2 3", "77 (x) R 1 77 77 0 -1 0 0 0 0 0 -4 50 0"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) succeeded, want an error", bad)
		}
	}
}

// The fuzz targets feed garbage to every parser: none may panic, and what
// they return must be in range.

func FuzzParseMountinfo(f *testing.F) {
	f.Add("30 22 0:27 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw\n")
	f.Add(`31 30 0:28 /a\040b /m rw - cgroup cgroup rw,cpu` + "\n")
	f.Add("1 2 3 4 5 6 - cgroup\n")
	f.Fuzz(func(t *testing.T, s string) {
		mounts, err := parseMountinfo(s)
		if err != nil && mounts != nil {
			t.Fatalf("mounts %v with error %v", mounts, err)
		}
	})
}

func FuzzParseCgroupFile(f *testing.F) {
	f.Add("0::/a/b\n")
	f.Add("4:cpu,cpuacct:/docker/x\n3:cpuset:/\n")
	f.Add(":::\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseCgroupFile(s)
		if err == nil && m.hasUnified && !strings.HasPrefix(m.unified, "/") {
			t.Fatalf("unified path %q is not absolute", m.unified)
		}
	})
}

func FuzzParseCPUMax(f *testing.F) {
	f.Add("max 100000")
	f.Add("125000 100000\n")
	f.Add("9223372036854775807 1")
	f.Fuzz(func(t *testing.T, s string) {
		cores, limited, err := parseCPUMax(s)
		if err == nil && limited && !(cores > 0) {
			t.Fatalf("parseCPUMax(%q) = %v cores, want > 0", s, cores)
		}
		cores, limited, err = parseCFS(s, s)
		if err == nil && limited && !(cores > 0) {
			t.Fatalf("parseCFS(%q) = %v cores, want > 0", s, cores)
		}
	})
}

func FuzzParseCPUList(f *testing.F) {
	f.Add("0-3,8,10-11")
	f.Add("65536")
	f.Add("0-65536,0-65536")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseCPUList(s)
		if err == nil && n < 0 {
			t.Fatalf("parseCPUList(%q) = %d", s, n)
		}
	})
}

func FuzzParseUsage(f *testing.F) {
	f.Add("usage_usec 5\nuser_usec 3\n")
	f.Add("1 (x) R 1 2 3 4 5 6 7 8 9 10 11 12 13")
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseCPUStat(s); err == nil && n < 0 {
			t.Fatalf("parseCPUStat(%q) = %d", s, n)
		}
		if n, err := parseProcStat(s); err == nil && n < 0 {
			t.Fatalf("parseProcStat(%q) = %d", s, n)
		}
	})
}

// FuzzNewReader feeds garbage membership and mount files, and a garbage
// limit, to the whole reader: it may refuse them, never panic, and what it
// accepts has a capacity in (0, host CPUs].
func FuzzNewReader(f *testing.F) {
	f.Add("0::/a/b\n", "30 22 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "150000 100000")
	f.Add("4:cpu,cpuacct:/x\n", "31 30 0:28 /x /c rw - cgroup cgroup rw,cpu,cpuacct\n", "max 100000")
	f.Add("0::/../..\n", "1 0 0:1 / /../ rw - cgroup2 c rw\n", "1 1")
	f.Fuzz(func(t *testing.T, cgroup, mountinfo, limit string) {
		tree := fstest.MapFS{
			"proc/self/cgroup":    {Data: []byte(cgroup)},
			"proc/self/mountinfo": {Data: []byte(mountinfo)},
			"proc/self/stat":      {Data: []byte("1 (x) R 1 1 1 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 1 1 1\n")},
		}
		if m, err := parseCgroupFile(cgroup); err == nil && m.hasUnified {
			// Put usage and limit files where a sane layout would look.
			dir := fsPath("/sys/fs/cgroup" + m.unified)
			tree[dir+"/cpu.stat"] = &fstest.MapFile{Data: []byte("usage_usec 7\n")}
			tree[dir+"/cpu.max"] = &fstest.MapFile{Data: []byte(limit)}
		}
		r, err := newReader(tree, 8)
		if err != nil {
			return
		}
		if c, err := r.Capacity(); err != nil || !(c > 0 && c <= 8) {
			t.Fatalf("Capacity() = %v, %v; want in (0, 8]", c, err)
		}
	})
}
