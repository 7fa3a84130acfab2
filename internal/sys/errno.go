package sys

import (
	"errors"

	"golang.org/x/sys/unix"
)

// ErrNotSupported is the one "this cannot be done here" sentinel of the project.
// Public packages re-export it (uverbs.ErrNotSupported). Kernel errnos that mean
// "the kernel or device lacks this" wrap it, and so do ErrNoDevice and
// ErrNotSupportedOnOS.
var ErrNotSupported = errors.New("not supported")

// ErrNotSupportedOnOS is returned on operating systems without RDMA uverbs.
var ErrNotSupportedOnOS = wrapSentinel{"not supported on this operating system", ErrNotSupported}

// ErrNoDevice is returned when no RDMA device (or not the one asked for) exists.
var ErrNoDevice = wrapSentinel{"no RDMA device", ErrNotSupported}

type wrapSentinel struct {
	msg    string
	parent error
}

func (w wrapSentinel) Error() string { return w.msg }
func (w wrapSentinel) Unwrap() error { return w.parent }

// Errno is a kernel error number as returned by a syscall. It is a distinct type
// so that callers use errors.Is(err, unix.EINVAL) rather than ==, and so that
// the errnos that mean "unsupported" also match ErrNotSupported:
//
//   - ENOTTY: no ioctl framework at all (kernel too old) or wrong device file.
//   - EPROTONOSUPPORT: the ioctl framework cannot invoke the method, or a
//     mandatory attribute is unknown (uverbs_ioctl.c).
//   - EOPNOTSUPP: the driver lacks the feature, or the write command index is
//     unsupported (rdma_core.h: uapi_get_method).
type Errno struct{ errno unix.Errno }

// NewErrno wraps a raw errno; it returns nil for 0.
func NewErrno(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return &Errno{e}
}

func (e *Errno) Error() string { return e.errno.Error() }

// Unwrap returns the raw errno, so errors.Is(err, unix.EINVAL) and
// errors.Is(err, os.ErrPermission) work.
func (e *Errno) Unwrap() error { return e.errno }

// Errno returns the raw number.
func (e *Errno) Errno() unix.Errno { return e.errno }

// Is reports whether the errno means "not supported".
func (e *Errno) Is(target error) bool {
	if target == ErrNotSupported {
		return IsNotSupportedErrno(e.errno)
	}
	return false
}

// IsNotSupportedErrno reports whether a raw errno means the kernel or the
// device cannot do what was asked.
func IsNotSupportedErrno(e unix.Errno) bool {
	return e == unix.ENOTTY || e == unix.EPROTONOSUPPORT || e == unix.EOPNOTSUPP
}

// ErrnoOf returns the raw errno inside err, or 0.
func ErrnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// Errno values the providers test for or return; providers may not import
// golang.org/x/sys/unix.
const (
	EINVAL = unix.EINVAL
	ENOMEM = unix.ENOMEM
)
