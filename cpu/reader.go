package cpu

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"strings"
	"time"
)

// ErrUnavailable is returned where this package cannot measure CPU usage:
// outside Linux, when no file system root is given.
var ErrUnavailable = errors.New("cpu usage unavailable: it is read from Linux procfs and cgroupfs")

// maxFile bounds how much of one file a reader reads. mountinfo is the
// largest file read; a container's is a few kilobytes.
const maxFile = 4 << 20

// userHZ is the unit of the times in /proc/self/stat: USER_HZ, 100 ticks a
// second on every Linux architecture Go supports.
const userHZ = 100

// A reader reads the CPU time and the CPU capacity of the cgroup the process
// is in, from a procfs and a cgroupfs under one file system root.
//
// Where the numbers come from, in order of preference:
//
//   - cgroup v1, when the process is in a cpuacct hierarchy that is mounted:
//     CPU time from cpuacct.usage (nanoseconds); the limit from
//     cpu.cfs_quota_us / cpu.cfs_period_us of the cpu hierarchy; the cpuset
//     from cpuset.effective_cpus (or cpuset.cpus) of the cpuset hierarchy.
//     v1 is preferred on a hybrid host because there the unified hierarchy
//     carries no controllers: its cpu.stat would not count the container.
//   - cgroup v2 (the unified hierarchy, "0::/path"): CPU time from cpu.stat
//     usage_usec; the limit from cpu.max; the cpuset from
//     cpuset.cpus.effective (or cpuset.cpus).
//   - the process alone, when no cgroup file system is mounted where the
//     process can see it: CPU time from /proc/self/stat (utime + stime).
//     Only this process's own CPU time is counted then, not that of other
//     processes competing for the same CPUs: no file the process can see
//     attributes that competition to it.
//
// The cgroup is found as the kernel describes it, not assumed to be the
// root of the mount: /proc/self/cgroup gives its path in each hierarchy,
// relative to the process's cgroup namespace, and /proc/self/mountinfo gives
// each cgroup mount's root (the cgroup the mount shows at its mount point).
// The cgroup's directory is the mount point joined with the path below the
// mount's root. This is right both inside a private cgroup namespace (path
// "/", root "/") and outside one, where the mount shows the whole hierarchy
// and the process sits deep in it.
//
// The capacity is the tightest of: every quota on the path from the cgroup
// up to its mount's root (a limit on a parent, such as a systemd slice or a
// pod, binds its children whatever their own cpu.max says), the number of
// CPUs in the cpuset, and the host's CPUs available to the process. Quotas
// are kept fractional: 125000/100000 is 1.25 CPUs, not 2. Limits above the
// mount's root (the host side of a cgroup namespace) are invisible to the
// process and are not applied; the effective cpuset is, because the kernel
// folds the ancestors into cpuset.cpus.effective.
//
// A reader locates the cgroup once, when it is made; it reads the limits
// and the CPU time afresh on every call, so that a limit changed at run time
// is seen. A reader is safe for concurrent use.
type reader struct {
	root     fs.FS
	hostCPUs int
	source   string

	// usageFile is the file holding the CPU time, and usageUnit the
	// duration of one unit of it.
	usageFile string
	usageUnit time.Duration
	parseTime func(string) (int64, error)

	// limitDirs are the directories holding a quota, from the cgroup up to
	// its mount's root; quotaV1 tells which files they hold.
	limitDirs []string
	quotaV1   bool

	// cpusetDirs are the directories holding the cpuset, from the cgroup up;
	// cpusetFiles are the files to try in each, best first.
	cpusetDirs  []string
	cpusetFiles []string
}

// newReader locates the process's cgroup under root, a file system holding
// proc/self/cgroup, proc/self/mountinfo and the cgroup mounts they name (at
// their paths without the leading slash: os.DirFS("/") on Linux, or a fake
// tree in tests). hostCPUs is the number of CPUs the process may run on
// without any cgroup limit (runtime.NumCPU: the scheduler affinity); it must
// be at least 1.
//
// It returns an error naming the file when a file it needs is missing or
// malformed.
func newReader(root fs.FS, hostCPUs int) (*reader, error) {
	if root == nil {
		return nil, errors.New("cpu reader root: nil file system")
	}
	if hostCPUs < 1 {
		return nil, fmt.Errorf("cpu reader host CPUs %d: want at least 1", hostCPUs)
	}
	r := &reader{root: root, hostCPUs: hostCPUs}
	text, err := r.read("proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroup membership not readable: %w", err)
	}
	member, err := parseCgroupFile(text)
	if err != nil {
		return nil, fmt.Errorf("proc/self/cgroup: %w", err)
	}
	text, err = r.read("proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroup mounts not readable: %w", err)
	}
	mounts, err := parseMountinfo(text)
	if err != nil {
		return nil, fmt.Errorf("proc/self/mountinfo: %w", err)
	}
	isV1 := func(c string) func(mount) bool {
		return func(m mount) bool { return !m.v2 && m.has(c) }
	}
	isV2 := func(m mount) bool { return m.v2 }

	if member.hasCPUAcct {
		if dirs, ok, err := locate(mounts, member.cpuacct, isV1("cpuacct"), "cgroup v1 cpuacct"); err != nil {
			return nil, err
		} else if ok {
			r.source = "cgroup v1 at /" + dirs[0]
			r.usageFile = path.Join(dirs[0], "cpuacct.usage")
			r.usageUnit = time.Nanosecond
			r.parseTime = func(s string) (int64, error) { return parseUint("cpuacct.usage", s) }
			if member.hasCPU {
				if r.limitDirs, _, err = locate(mounts, member.cpu, isV1("cpu"), "cgroup v1 cpu"); err != nil {
					return nil, err
				}
				r.quotaV1 = true
			}
			if member.hasCPUSet {
				if r.cpusetDirs, _, err = locate(mounts, member.cpuset, isV1("cpuset"), "cgroup v1 cpuset"); err != nil {
					return nil, err
				}
				r.cpusetFiles = []string{"cpuset.effective_cpus", "cpuset.cpus"}
			}
			return r, r.check()
		}
	}
	if member.hasUnified {
		if dirs, ok, err := locate(mounts, member.unified, isV2, "cgroup v2"); err != nil {
			return nil, err
		} else if ok {
			r.source = "cgroup v2 at /" + dirs[0]
			r.usageFile = path.Join(dirs[0], "cpu.stat")
			r.usageUnit = time.Microsecond
			r.parseTime = parseCPUStat
			r.limitDirs = dirs
			r.cpusetDirs = dirs
			r.cpusetFiles = []string{"cpuset.cpus.effective", "cpuset.cpus"}
			return r, r.check()
		}
	}
	r.source = "process (no cgroup file system mounted)"
	r.usageFile = "proc/self/stat"
	r.usageUnit = time.Second / userHZ
	r.parseTime = parseProcStat
	return r, r.check()
}

// check reads everything once, so that a reader that cannot work is not
// made.
func (r *reader) check() error {
	if _, err := r.CPUTime(); err != nil {
		return err
	}
	_, err := r.Capacity()
	return err
}

// locate finds the directory of the cgroup at cgroupPath in the last mount
// that matches and shows it, and returns the directories from there up to the
// mount's root (as fs.FS paths). ok is false when no mount matches; it is an
// error when mounts match but none shows the cgroup.
func locate(mounts []mount, cgroupPath string, match func(mount) bool, what string) (dirs []string, ok bool, err error) {
	matched := false
	for i := len(mounts) - 1; i >= 0; i-- {
		m := mounts[i]
		if !match(m) {
			continue
		}
		matched = true
		var rel string
		switch {
		case m.root == "/":
			rel = cgroupPath
		case cgroupPath == m.root:
			rel = "/"
		case strings.HasPrefix(cgroupPath, m.root+"/"):
			rel = cgroupPath[len(m.root):]
		default:
			continue
		}
		if path.Clean(rel) != rel || !path.IsAbs(rel) {
			return nil, false, fmt.Errorf("%s path %s: not a clean absolute path", what, quote(cgroupPath))
		}
		top := fsPath(m.point)
		dir := fsPath(path.Join(m.point, rel))
		for d := dir; ; d = path.Dir(d) {
			dirs = append(dirs, d)
			if d == top || d == "." {
				break
			}
		}
		return dirs, true, nil
	}
	if matched {
		return nil, false, fmt.Errorf("%s path %s: under no mount's root in proc/self/mountinfo", what, quote(cgroupPath))
	}
	return nil, false, nil
}

// fsPath turns an absolute path into an fs.FS path.
func fsPath(p string) string {
	p = strings.TrimPrefix(path.Clean(p), "/")
	if p == "" {
		return "."
	}
	return p
}

// Source says where the numbers come from: "cgroup v2 at /sys/fs/cgroup/x",
// "cgroup v1 at ...", or "process (no cgroup file system mounted)".
func (r *reader) Source() string { return r.source }

// CPUTime returns the CPU time the cgroup (or, without one, the process) has
// used since it was created, summed over all CPUs. It only grows, except
// when the cgroup is removed and made again.
func (r *reader) CPUTime() (time.Duration, error) {
	text, err := r.read(r.usageFile)
	if err != nil {
		return 0, fmt.Errorf("%s CPU time not readable: %w", r.source, err)
	}
	n, err := r.parseTime(text)
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %w", r.source, r.usageFile, err)
	}
	if n > math.MaxInt64/int64(r.usageUnit) {
		return 0, fmt.Errorf("%s: %s: CPU time %d overflows", r.source, r.usageFile, n)
	}
	return time.Duration(n) * r.usageUnit, nil
}

// Capacity returns how many CPUs the cgroup may use: the least of the
// tightest quota on its path, the size of its cpuset and the host's CPUs.
// It is fractional when a quota is (1.25).
func (r *reader) Capacity() (float64, error) {
	capacity := float64(r.hostCPUs)
	for _, dir := range r.limitDirs {
		cores, limited, err := r.quota(dir)
		if err != nil {
			return 0, err
		}
		if limited && cores < capacity {
			capacity = cores
		}
	}
	for _, dir := range r.cpusetDirs {
		n, found, err := r.cpuset(dir)
		if err != nil {
			return 0, err
		}
		if found {
			capacity = min(capacity, float64(n))
			break
		}
	}
	return capacity, nil
}

// quota reads the quota in dir. A missing file is no limit: the root cgroup
// has none, nor does a cgroup whose cpu controller is not enabled.
func (r *reader) quota(dir string) (cores float64, limited bool, err error) {
	if !r.quotaV1 {
		text, err := r.read(path.Join(dir, "cpu.max"))
		if errors.Is(err, fs.ErrNotExist) {
			return 0, false, nil
		}
		if err == nil {
			cores, limited, err = parseCPUMax(text)
		}
		if err != nil {
			return 0, false, fmt.Errorf("cgroup v2 /%s/cpu.max: %w", dir, err)
		}
		return cores, limited, nil
	}
	quota, err := r.read(path.Join(dir, "cpu.cfs_quota_us"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	var period string
	if err == nil {
		period, err = r.read(path.Join(dir, "cpu.cfs_period_us"))
	}
	if err == nil {
		cores, limited, err = parseCFS(quota, period)
	}
	if err != nil {
		return 0, false, fmt.Errorf("cgroup v1 /%s quota: %w", dir, err)
	}
	return cores, limited, nil
}

// cpuset reads the number of CPUs in dir's cpuset. found is false when dir
// has no cpuset file, or an empty one (a v2 cpuset.cpus left empty inherits
// its parent's), so that the caller looks further up.
func (r *reader) cpuset(dir string) (n int, found bool, err error) {
	for _, name := range r.cpusetFiles {
		file := path.Join(dir, name)
		text, err := r.read(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			n, err = parseCPUList(text)
		}
		if err != nil {
			return 0, false, fmt.Errorf("/%s: %w", file, err)
		}
		if n > 0 {
			return n, true, nil
		}
	}
	return 0, false, nil
}

// read returns the text of the file at name, at most maxFile bytes of it.
func (r *reader) read(name string) (string, error) {
	f, err := r.root.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile))
	if err != nil {
		return "", fmt.Errorf("read /%s: %w", name, err)
	}
	return string(b), nil
}
