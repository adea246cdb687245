// Package cpu measures how busy the CPUs that the process may use are. It
// is right in every container, so that adaptive protection (load shedding)
// can decide on it with one atomic read.
//
// A process lives in a cgroup. The number of CPUs the cgroup may use, its
// capacity, is
//
//	capacity = min(tightest quota on its path, CPUs in its cpuset, host CPUs)
//
// Usage is the cgroup's CPU time over an interval divided by
// interval × capacity. 0 is idle and 1 is saturated, whatever the
// machine's size. A [Sampler] reads it in the background every 250 ms. It
// keeps a moving average that shows an overload within a second.
// [Sampler.Usage] is one atomic load.
//
// The CPU time is the cgroup's own (cpu.stat, cpuacct.usage), not the
// host's. The cgroup's directory is found from /proc/self/cgroup, and the
// mount's root from /proc/self/mountinfo. So it is right both inside a
// private cgroup namespace and outside one. Every quota from the cgroup up
// to the mount's root is read, and the tightest wins: a limit on a parent,
// such as a systemd slice or a pod, binds too. Capacities are fractional; a
// quota of 1.25 CPUs is not rounded to 2. cgroup v1, v2 and hybrid hosts
// are read. Other systems get [ErrUnavailable].
//
// Without a cgroup file system (a sandbox that hides it), the process's own
// CPU time from /proc/self/stat is measured against the CPUs it may run on.
// It is the only CPU time the process can attribute to itself.
//
// The files are read from any [io/fs.FS], so that every layout
// is tested against a fake procfs and cgroupfs. docs/cpu.md says where each
// number comes from and which mistakes of other shedders the package avoids.
//
// The package uses only the standard library and package clock.
package cpu
