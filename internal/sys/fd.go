package sys

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// FD owns one file descriptor. Close is idempotent; after Close, Int returns -1
// and every syscall on it fails with EBADF.
type FD struct {
	mu  sync.RWMutex
	raw int
}

// NewFD takes ownership of raw.
func NewFD(raw int) *FD { return &FD{raw: raw} }

// Open opens path with O_CLOEXEC added.
func Open(path string, flags int) (*FD, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: NewErrno(err.(unix.Errno))}
		}
		return NewFD(fd), nil
	}
}

// Int returns the raw descriptor, or -1 after Close.
func (fd *FD) Int() int {
	if fd == nil {
		return -1
	}
	fd.mu.RLock()
	defer fd.mu.RUnlock()
	return fd.raw
}

// Close closes the descriptor once.
func (fd *FD) Close() error {
	if fd == nil {
		return nil
	}
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if fd.raw < 0 {
		return nil
	}
	err := unix.Close(fd.raw)
	fd.raw = -1
	if err != nil {
		return fmt.Errorf("close: %w", NewErrno(err.(unix.Errno)))
	}
	return nil
}

// use runs f with the descriptor held open (Close waits for f to return).
func (fd *FD) use(f func(raw int) error) error {
	fd.mu.RLock()
	defer fd.mu.RUnlock()
	if fd.raw < 0 {
		return NewErrno(unix.EBADF)
	}
	return f(fd.raw)
}

// Dup returns a new FD for the same open file (used to hand an fd to os.File
// for the runtime poller while keeping ownership rules simple).
func (fd *FD) Dup() (*FD, error) {
	var n int
	err := fd.use(func(raw int) error {
		var err error
		n, err = unix.FcntlInt(uintptr(raw), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return NewErrno(err.(unix.Errno))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return NewFD(n), nil
}
