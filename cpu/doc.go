// Package cpu measures how busy the CPUs the process may use are, right in
// every container, so that adaptive protection (load shedding) can decide on
// it with one atomic read.
//
// The model: a process lives in a cgroup, and the cgroup may use
// capacity = min(tightest quota on its path, CPUs in its cpuset, host CPUs)
// CPUs. Usage is the cgroup's CPU time over an interval divided by
// interval × capacity: 0 is idle, 1 is saturated, whatever the machine's
// size. A [Sampler] reads it in the background every 250 ms and keeps a
// moving average that shows an overload within a second; [Sampler.Usage]
// is one atomic load. The reading is done from any [io/fs.FS] ([WithRoot]),
// so that every layout is tested against a fake procfs and cgroupfs.
//
// The pitfalls it avoids, each seen in a widely used shedder:
//
//   - Host-wide /proc/stat divided by the cpuset's size: a pod with 4 of 64
//     CPUs reads 16 times too low and never sheds. Here the CPU time is the
//     cgroup's own (cpu.stat, cpuacct.usage).
//   - Reading /sys/fs/cgroup/cpu.max at the mount's root: right only inside a
//     private cgroup namespace. Here the cgroup's directory is found from
//     /proc/self/cgroup and the mount's root in /proc/self/mountinfo.
//   - Reading only the cgroup's own limit: a limit on a parent (a systemd
//     slice, a pod) binds too. Here every quota up to the mount's root is
//     read and the tightest wins.
//   - No cgroup v2 support, or a panic off Linux. Here v1, v2 and hybrid
//     hosts are read, and other systems get [ErrUnavailable].
//   - Rounding a quota up to whole CPUs (1.25 to 2). Here capacities are
//     fractional.
//
// Without a cgroup file system (a sandbox that hides it), the process's own
// CPU time from /proc/self/stat is measured against the CPUs it may run on:
// the only CPU time the process can attribute to itself.
//
// The package uses only the standard library and package clock.
package cpu
