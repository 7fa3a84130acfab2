package sys

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// FD owns one file descriptor used for commands (the uverbs and rdma_cm
// files, netlink sockets). Close is idempotent; after Close, Int returns -1
// and every call on it fails with EBADF. All methods are safe for concurrent
// use: a call holds the descriptor open, so Close waits for calls in flight
// and a closed number is never reused by mistake.
type FD struct {
	mu  sync.RWMutex
	raw int
}

// NewFD takes ownership of raw.
func NewFD(raw int) *FD { return &FD{raw: raw} }

// Open opens path with O_CLOEXEC added.
func Open(path string, flags int) (*FD, error) {
	if k := fake; k != nil && k.Claims(path) {
		return fakeOpen(k, path, flags)
	}
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: errnoErr(err)}
		}
		return NewFD(fd), nil
	}
}

// O_RDWR and O_RDONLY are the open flags callers above internal/sys need.
const (
	O_RDWR   = unix.O_RDWR
	O_RDONLY = unix.O_RDONLY
)

// Pipe returns the read and write ends of a new pipe (tests use it as a
// stand-in for an event file).
func Pipe() (r, w *FD, err error) {
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		return nil, nil, errnoErr(err)
	}
	unix.CloseOnExec(p[0])
	unix.CloseOnExec(p[1])
	return NewFD(p[0]), NewFD(p[1]), nil
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
	if k := fake; k != nil {
		k.Closed(fd.raw)
	}
	err := unix.Close(fd.raw)
	fd.raw = -1
	if err != nil {
		return fmt.Errorf("close: %w", errnoErr(err))
	}
	return nil
}

// release gives up ownership: it returns the raw descriptor and leaves fd
// closed without closing the descriptor.
func (fd *FD) release() int {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	raw := fd.raw
	fd.raw = -1
	return raw
}

// use runs f with the descriptor held open (Close waits for f to return).
func (fd *FD) use(f func(raw int) error) error {
	fd.mu.RLock()
	defer fd.mu.RUnlock()
	if fd.raw < 0 {
		return NewErrno(EBADF)
	}
	return f(fd.raw)
}

// Dup returns a new FD for the same open file.
func (fd *FD) Dup() (*FD, error) {
	var n int
	err := fd.use(func(raw int) error {
		var err error
		n, err = unix.FcntlInt(uintptr(raw), unix.F_DUPFD_CLOEXEC, 0)
		return errnoErr(err)
	})
	if err != nil {
		return nil, err
	}
	return NewFD(n), nil
}
