package cm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/ibgo/ibgo/internal/sys"
)

// The kinds of failure callers branch on, with errors.Is. An *Error carries
// one of them (Kind) beside its cause.
var (
	// ErrUnreachable: the address did not resolve (ADDR_ERROR), the peer
	// never answered (UNREACHABLE), or the route lookup failed in the
	// kernel (ENETUNREACH, EHOSTUNREACH, ENODEV from RESOLVE_ADDR).
	ErrUnreachable = errors.New("address unreachable")
	// ErrRouteFailed: route resolution failed (ROUTE_ERROR, or ENODEV from
	// RESOLVE_ROUTE as for 127.0.0.1).
	ErrRouteFailed = errors.New("route resolution failed")
	// ErrRefused: the peer rejected the connection (REJECTED); the *Error
	// has the REJ reason and the peer's private data.
	ErrRefused = errors.New("connection refused")
	// ErrTimeout: the caller's deadline or timeout passed, or the kernel gave
	// up (status −ETIMEDOUT). Also matched by context.DeadlineExceeded.
	ErrTimeout = errors.New("timed out")
	// ErrDisconnected: the peer disconnected (DISCONNECTED) or went away.
	ErrDisconnected = errors.New("peer disconnected")
	// ErrPortInUse: the port is bound by another id (EADDRINUSE,
	// EADDRNOTAVAIL for a wildcard/specific conflict).
	ErrPortInUse = errors.New("port in use")
	// ErrClosed: the id, listener, connection or channel is closed.
	ErrClosed = errors.New("closed")
)

// RejectReason is an IB CM REJ reason (IBTA table 112): 8 means nobody
// listens on that service id, 28 is a consumer (application) reject.
type RejectReason uint8

const (
	RejectTimeout                  RejectReason = 1
	RejectInvalidServiceID         RejectReason = 8
	RejectConsumerDefined          RejectReason = 28
	RejectVendorOptionNotSupported RejectReason = 35
)

func (r RejectReason) String() string {
	switch r {
	case RejectTimeout:
		return "timeout"
	case RejectInvalidServiceID:
		return "invalid service id (no listener)"
	case RejectConsumerDefined:
		return "consumer defined"
	case RejectVendorOptionNotSupported:
		return "vendor option not supported"
	}
	return fmt.Sprintf("reason %d", uint8(r))
}

// Error is the error type of package cm: what was attempted (Op, with the
// address where there is one), the kind of failure (one of the Err*
// sentinels, or nil), the event that reported it, and the cause (a kernel
// errno, a context error). errors.Is matches both Kind and the cause. A
// plain value, safe to share once returned.
type Error struct {
	Op     string
	Kind   error
	Event  EventType // the failure event, when an event reported it
	Status int32     // the event's raw status
	// Reason and PrivateData describe a REJECTED (Kind ErrRefused): the REJ
	// reason and the peer's reject private data (148 bytes on RC, whatever
	// the peer put in; only reason 28 carries the peer's own data).
	Reason      RejectReason
	PrivateData []byte
	Err         error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("cm: ")
	b.WriteString(e.Op)
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(e.Kind.Error())
	}
	if e.Kind == ErrRefused {
		fmt.Fprintf(&b, " (REJ %d: %s)", uint8(e.Reason), e.Reason)
	} else if e.Event != 0 || e.Status != 0 {
		fmt.Fprintf(&b, " (%s, status %d)", e.Event, e.Status)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the kind and the cause.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// Is makes a deadline (context.DeadlineExceeded, ETIMEDOUT) match
// ErrTimeout.
func (e *Error) Is(target error) bool {
	if target == ErrTimeout {
		return errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, syscall.ETIMEDOUT)
	}
	if target == ErrClosed {
		return errors.Is(e.Err, sys.ErrFDClosed)
	}
	return false
}

// cmdErr wraps a command's errno with its kind.
func cmdErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	e := &Error{Op: op, Err: err}
	switch sys.ErrnoOf(err) {
	case syscall.EADDRINUSE, syscall.EADDRNOTAVAIL:
		e.Kind = ErrPortInUse
	case syscall.ENETUNREACH, syscall.EHOSTUNREACH:
		e.Kind = ErrUnreachable
	}
	if errors.Is(err, sys.ErrFDClosed) {
		e.Kind = ErrClosed
	}
	return e
}

// eventErr is the typed error of a failure event (nil for success events).
func eventErr(op string, ev *Event) error {
	if op == "" {
		op = strings.ToLower(strings.TrimPrefix(ev.Type.String(), "RDMA_CM_EVENT_"))
	}
	e := &Error{Op: op, Event: ev.Type, Status: ev.Status}
	errno := func() error {
		if ev.Status < 0 {
			return syscall.Errno(-ev.Status)
		}
		return nil
	}
	switch ev.Type {
	case EventAddrError, EventAddrinfoError:
		e.Kind, e.Err = ErrUnreachable, errno()
	case EventRouteError:
		e.Kind, e.Err = ErrRouteFailed, errno()
	case EventRejected:
		e.Kind, e.Reason = ErrRefused, RejectReason(ev.Status)
		e.PrivateData = ev.PrivateData()
	case EventUnreachable:
		e.Kind, e.Err = ErrUnreachable, errno()
		if ev.UD && ev.Status > 0 { // SIDR REP status: 1 no listener, 2 rejected, 3 no QP
			e.PrivateData = ev.PrivateData()
			if ev.Status == 2 {
				e.Kind, e.Reason = ErrRefused, RejectConsumerDefined
			}
		}
	case EventDisconnected:
		e.Kind, e.Err = ErrDisconnected, errno()
	case EventConnectError, EventMulticastError:
		e.Err = errno()
		if e.Err == nil {
			e.Err = syscall.EIO
		}
	case EventDeviceRemoval:
		e.Kind, e.Err = ErrClosed, sys.ErrNoDevice
	default:
		return nil
	}
	return e
}
