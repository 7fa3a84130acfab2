//go:build !linux

package sys

import (
	"runtime"
	"time"
)

// PinThread locks the calling goroutine to its OS thread; CPU affinity is
// Linux only.
func PinThread(cpu int) error {
	runtime.LockOSThread()
	return ErrNotSupportedOnOS
}

// ThreadCPUs is Linux only.
func ThreadCPUs() ([]int, error) { return nil, ErrNotSupportedOnOS }

// ProcessCPUTime is Linux only.
func ProcessCPUTime() (time.Duration, error) { return 0, ErrNotSupportedOnOS }
