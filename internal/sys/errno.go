package sys

import (
	"errors"
	"syscall"
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

// The errnos packages above internal/sys compare against (errors.Is), so that
// they need neither syscall numbers nor golang.org/x/sys/unix. They are
// syscall.Errno values: errors.Is(err, sys.EINVAL) matches an *Errno and a
// bare errno alike.
const (
	EPERM           = syscall.EPERM
	ENOENT          = syscall.ENOENT
	EINTR           = syscall.EINTR
	EIO             = syscall.EIO
	EBADF           = syscall.EBADF
	EAGAIN          = syscall.EAGAIN
	ENOMEM          = syscall.ENOMEM
	EACCES          = syscall.EACCES
	EFAULT          = syscall.EFAULT
	EBUSY           = syscall.EBUSY
	EEXIST          = syscall.EEXIST
	ENODEV          = syscall.ENODEV
	ENODATA         = syscall.ENODATA
	EINVAL          = syscall.EINVAL
	ENOTTY          = syscall.ENOTTY
	ENOSPC          = syscall.ENOSPC
	ENOBUFS         = syscall.ENOBUFS
	ENOSYS          = syscall.ENOSYS
	EPROTONOSUPPORT = syscall.EPROTONOSUPPORT
	EOPNOTSUPP      = syscall.EOPNOTSUPP
	ETIMEDOUT       = syscall.ETIMEDOUT
	ECONNREFUSED    = syscall.ECONNREFUSED
)

// Errno is a kernel error number as returned by a syscall. It is a distinct type
// so that callers use errors.Is(err, sys.EINVAL) rather than ==, and so that
// the errnos that mean "unsupported" also match ErrNotSupported:
//
//   - ENOTTY: no ioctl framework at all (kernel too old) or wrong device file.
//   - EPROTONOSUPPORT: the ioctl framework cannot invoke the method, or a
//     mandatory attribute is unknown (uverbs_ioctl.c).
//   - EOPNOTSUPP: the driver lacks the feature, or the write command index is
//     unsupported (rdma_core.h: uapi_get_method).
type Errno struct{ errno syscall.Errno }

// NewErrno wraps a raw errno; it returns nil for 0.
func NewErrno(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return &Errno{e}
}

// errnoErr converts an error returned by golang.org/x/sys/unix (always an
// errno or nil) into an *Errno.
func errnoErr(err error) error {
	if err == nil {
		return nil
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return NewErrno(e)
	}
	return err
}

func (e *Errno) Error() string { return e.errno.Error() }

// Unwrap returns the raw errno, so errors.Is(err, sys.EINVAL) and
// errors.Is(err, os.ErrPermission) work.
func (e *Errno) Unwrap() error { return e.errno }

// Errno returns the raw number.
func (e *Errno) Errno() syscall.Errno { return e.errno }

// Is reports whether the errno means "not supported".
func (e *Errno) Is(target error) bool {
	if target == ErrNotSupported {
		return IsNotSupportedErrno(e.errno)
	}
	return false
}

// IsNotSupportedErrno reports whether a raw errno means the kernel or the
// device cannot do what was asked.
func IsNotSupportedErrno(e syscall.Errno) bool {
	return e == ENOTTY || e == EPROTONOSUPPORT || e == EOPNOTSUPP
}

// ErrnoOf returns the raw errno inside err, or 0.
func ErrnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}
