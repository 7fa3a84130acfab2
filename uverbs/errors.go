package uverbs

import (
	"errors"
	"fmt"

	"github.com/ibgo/ibgo/internal/sys"
)

// ErrNotSupported is returned (wrapped) when the kernel, the device or the
// operating system cannot do what was asked: ENOTTY, EPROTONOSUPPORT and
// EOPNOTSUPP from the kernel, a missing device, and non-Linux systems all
// match it with errors.Is.
var ErrNotSupported = sys.ErrNotSupported

// ErrNoDevice means no RDMA device exists, or not the one asked for. It
// wraps ErrNotSupported.
var ErrNoDevice = sys.ErrNoDevice

// ErrClosed is returned by operations on an object after Close. It wraps EBADF.
var ErrClosed = fmt.Errorf("object closed: %w", sys.NewErrno(sys.EBADF))

// Error is the error type of this package (a plain value): the operation, the device and
// object it was attempted on, and the cause (usually a kernel errno, which
// errors.Is and errors.As reach through Unwrap).
type Error struct {
	Op     string // e.g. "query port 1", "create cq"
	Device string // e.g. "rxe0"
	Err    error
	Hint   string // what to do about it, when we know
}

func (e *Error) Error() string {
	s := "uverbs: "
	if e.Device != "" {
		s += e.Device + ": "
	}
	s += e.Op + ": " + e.Err.Error()
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// opErr wraps err for operation op on device dev; nil stays nil.
func opErr(dev, op string, err error) error {
	if err == nil {
		return nil
	}
	var ue *Error
	if errors.As(err, &ue) && ue.Op == op {
		return err
	}
	return &Error{Op: op, Device: dev, Err: err}
}

// isFallback reports whether err from an ioctl means "use the legacy write
// command instead" (rdma-core libibverbs/cmd_fallback.c:
// _execute_ioctl_fallback): ENOTTY (no ioctl framework) or EPROTONOSUPPORT
// (method or mandatory attribute unknown).
func isFallback(err error) bool {
	e := sys.ErrnoOf(err)
	return e == sys.ENOTTY || e == sys.EPROTONOSUPPORT
}
