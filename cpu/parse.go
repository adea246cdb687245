package cpu

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The parsers below read the kernel's text formats. They are portable (the
// files may come from any fs.FS) and they never panic: whatever the input,
// they return a value or an error naming the field and the value.

// maxLine bounds how much of one line an error message quotes.
const maxLine = 64

// quote quotes s for an error message, cut to maxLine bytes.
func quote(s string) string {
	if len(s) > maxLine {
		s = s[:maxLine] + "..."
	}
	return strconv.Quote(s)
}

// membership is what /proc/self/cgroup says about the process: its path in
// the unified (v2) hierarchy and in the v1 hierarchies of the controllers
// this package reads. A path is relative to the root of the process's cgroup
// namespace.
type membership struct {
	unified, cpu, cpuacct, cpuset             string
	hasUnified, hasCPU, hasCPUAcct, hasCPUSet bool
}

// parseCgroupFile reads /proc/self/cgroup: one line per hierarchy,
// "hierarchy-ID:controller-list:cgroup-path". The unified hierarchy is the
// line "0::/path"; a v1 hierarchy names its controllers ("4:cpu,cpuacct:/x").
// The path may itself contain colons, so a line splits at its first two.
func parseCgroupFile(text string) (membership, error) {
	var m membership
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		controllers, path, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || !strings.HasPrefix(path, "/") {
			return membership{}, fmt.Errorf("cgroup membership line %s: want id:controllers:/path", quote(line))
		}
		if id == "0" && controllers == "" {
			m.unified, m.hasUnified = path, true
			continue
		}
		for c := range strings.SplitSeq(controllers, ",") {
			switch c {
			case "cpu":
				m.cpu, m.hasCPU = path, true
			case "cpuacct":
				m.cpuacct, m.hasCPUAcct = path, true
			case "cpuset":
				m.cpuset, m.hasCPUSet = path, true
			}
		}
	}
	return m, nil
}

// mount is one cgroup filesystem from /proc/self/mountinfo.
type mount struct {
	// root is the cgroup, within its hierarchy, that is mounted: "/" for
	// the hierarchy's root, or a deeper path when the mount shows only a
	// subtree (a bind mount, or a mount made outside the process's cgroup
	// namespace).
	root string
	// point is where the mount is, in the process's file system.
	point string
	// v2 is true for a cgroup2 (unified) mount.
	v2 bool
	// controllers holds a v1 mount's controllers, from its super options.
	controllers []string
}

// has reports whether a v1 mount carries controller c.
func (m mount) has(c string) bool {
	for _, x := range m.controllers {
		if x == c {
			return true
		}
	}
	return false
}

// parseMountinfo returns the cgroup mounts in /proc/self/mountinfo, in the
// file's order (a later mount shadows an earlier one on the same point). A
// line is "id parent major:minor root point options [optional...] - fstype
// source superoptions"; root and point escape space, tab, newline and
// backslash as octal (\040). Lines of other file systems are skipped, but a
// malformed line is an error: a file that does not parse is not trusted.
func parseMountinfo(text string) ([]mount, error) {
	var mounts []mount
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 6 || sep < 0 || sep+4 > len(fields) {
			return nil, fmt.Errorf("mountinfo line %s: want id parent dev root point options ... - fstype source superoptions", quote(line))
		}
		fstype := fields[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		root, err := unescapeMountinfo(fields[3])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %s: root: %w", quote(line), err)
		}
		point, err := unescapeMountinfo(fields[4])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %s: mount point: %w", quote(line), err)
		}
		m := mount{root: root, point: point, v2: fstype == "cgroup2"}
		if !m.v2 {
			m.controllers = strings.Split(fields[sep+3], ",")
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space).
func unescapeMountinfo(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("escape at byte %d of %s: want \\ and three octal digits", i, quote(s))
		}
		n, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("escape at byte %d of %s: want \\ and three octal digits", i, quote(s))
		}
		b.WriteByte(byte(n))
		i += 3
	}
	return b.String(), nil
}

// parseCPUMax reads a v2 cpu.max file: "QUOTA PERIOD" in microseconds, or
// "max PERIOD" for no limit. It returns the limit in CPUs (quota/period,
// fractional: 125000/100000 is 1.25) and whether there is one.
func parseCPUMax(text string) (cores float64, limited bool, err error) {
	fields := strings.Fields(text)
	if len(fields) != 2 {
		return 0, false, fmt.Errorf("cpu.max %s: want \"QUOTA PERIOD\" or \"max PERIOD\"", quote(text))
	}
	period, err := parsePositive("cpu.max period", fields[1])
	if err != nil {
		return 0, false, err
	}
	if fields[0] == "max" {
		return 0, false, nil
	}
	quota, err := parsePositive("cpu.max quota", fields[0])
	if err != nil {
		return 0, false, err
	}
	return float64(quota) / float64(period), true, nil
}

// parseCFS reads the v1 pair cpu.cfs_quota_us and cpu.cfs_period_us. A quota
// of -1 means no limit.
func parseCFS(quotaText, periodText string) (cores float64, limited bool, err error) {
	q := strings.TrimSpace(quotaText)
	if q == "-1" {
		return 0, false, nil
	}
	quota, err := parsePositive("cpu.cfs_quota_us", q)
	if err != nil {
		return 0, false, err
	}
	period, err := parsePositive("cpu.cfs_period_us", strings.TrimSpace(periodText))
	if err != nil {
		return 0, false, err
	}
	return float64(quota) / float64(period), true, nil
}

// parsePositive parses a positive decimal integer, naming field in its error.
func parsePositive(field, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s %s: want a positive integer", field, quote(s))
	}
	return n, nil
}

// maxCPUIndex bounds the CPU numbers a cpuset list may name. The kernel's
// limit (NR_CPUS) is at most 8192; a larger number is not a real cpuset.
const maxCPUIndex = 1 << 16

// parseCPUList counts the CPUs in a cpuset list such as "0-3,8,10-11". The
// kernel prints ranges in ascending order without overlap, so the count is
// the sum of the range lengths. An empty list counts 0 CPUs.
func parseCPUList(text string) (int, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return 0, nil
	}
	n := 0
	for part := range strings.SplitSeq(text, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, errA := strconv.Atoi(lo)
		b := a
		var errB error
		if isRange {
			b, errB = strconv.Atoi(hi)
		}
		if errA != nil || errB != nil || a < 0 || b < a || b > maxCPUIndex {
			return 0, fmt.Errorf("cpuset list %s: range %s: want N or N-M with 0 <= N <= M <= %d", quote(text), quote(part), maxCPUIndex)
		}
		n += b - a + 1
	}
	return n, nil
}

// parseCPUStat reads usage_usec, the cgroup's total CPU time in
// microseconds, from a v2 cpu.stat file ("usage_usec 12345" among other
// "key value" lines).
func parseCPUStat(text string) (usec int64, err error) {
	for line := range strings.Lines(text) {
		key, value, _ := strings.Cut(strings.TrimSpace(line), " ")
		if key != "usage_usec" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("cpu.stat usage_usec %s: want a non-negative integer", quote(value))
		}
		return n, nil
	}
	return 0, fmt.Errorf("cpu.stat: no usage_usec line")
}

// parseUint reads a file holding one non-negative decimal integer
// (cpuacct.usage, in nanoseconds), naming field in its error.
func parseUint(field, text string) (int64, error) {
	s := strings.TrimSpace(text)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %s: want a non-negative integer", field, quote(s))
	}
	return n, nil
}

// parseProcStat reads utime+stime, the process's CPU time in clock ticks,
// from /proc/self/stat. The second field (the command name, in
// parentheses) may hold spaces and parentheses itself, so the fields are
// counted from the last ')': utime and stime are the 14th and 15th fields of
// the line, the 12th and 13th after the name.
func parseProcStat(text string) (ticks int64, err error) {
	end := strings.LastIndexByte(text, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/self/stat %s: no ')' after the command name", quote(text))
	}
	fields := strings.Fields(text[end+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/self/stat: %d fields after the command name, want at least 13", len(fields))
	}
	utime, err := parseUint("/proc/self/stat utime", fields[11])
	if err != nil {
		return 0, err
	}
	stime, err := parseUint("/proc/self/stat stime", fields[12])
	if err != nil {
		return 0, err
	}
	if utime > math.MaxInt64-stime {
		return 0, fmt.Errorf("/proc/self/stat utime %d + stime %d overflows", utime, stime)
	}
	return utime + stime, nil
}
