//go:build linux

package sys

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// PinThread locks the calling goroutine to its OS thread and restricts
// that thread to cpu (sched_setaffinity), as Aeron's agents are pinned
// (aeron_thread_set_affinity). The goroutine stays locked until it
// returns, also when the affinity is refused (the error says why).
func PinThread(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Zero()
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("set the thread's CPU affinity to CPU %d: %w", cpu, err)
	}
	return nil
}

// ThreadCPUs returns the CPUs the calling OS thread may run on.
func ThreadCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for i := 0; i < 1024; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// ProcessCPUTime is the user plus system CPU time the process has used
// (getrusage RUSAGE_SELF).
func ProcessCPUTime() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
