package cnc

import (
	"errors"
	"fmt"
)

// Sentinel errors.
var (
	// ErrNotReady: the CnC version is still 0, the driver has not finished
	// creating the file (clients wait and retry).
	ErrNotReady = errors.New("cnc: file not initialised yet (cnc_version 0)")
	// ErrIncompatible: the file's major CnC version differs from ours.
	ErrIncompatible = errors.New("cnc: incompatible CnC version")
	// ErrCorrupt: a length or record in the shared memory breaks the layout.
	ErrCorrupt = errors.New("cnc: corrupt data")
	// ErrInsufficientCapacity: the ring buffer has no room for the message now.
	ErrInsufficientCapacity = errors.New("cnc: insufficient capacity in ring buffer")
	// ErrLapped: a broadcast receiver fell more than a buffer behind the
	// transmitter ("unable to keep up with broadcast").
	ErrLapped = errors.New("cnc: unable to keep up with broadcast")
	// ErrInvalidArgument: a message type, length or counter id out of range.
	ErrInvalidArgument = errors.New("cnc: invalid argument")
)

// Error describes what failed, in which file (if known) and where.
type Error struct {
	Op     string // e.g. "open", "read ring buffer"
	Path   string // file, when known
	Offset int64  // byte offset of the offending structure, -1 if none
	Reason string
	Err    error // sentinel cause, or the underlying error
}

func (e *Error) Error() string {
	s := "cnc: " + e.Op
	if e.Path != "" {
		s += " " + e.Path
	}
	if e.Offset >= 0 {
		s += fmt.Sprintf(" at offset %d", e.Offset)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Err != nil && !errors.Is(e.Err, ErrCorrupt) && !errors.Is(e.Err, ErrInvalidArgument) {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

func corrupt(op string, off int64, format string, args ...any) error {
	return &Error{Op: op, Offset: off, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}

func invalid(op string, format string, args ...any) error {
	return &Error{Op: op, Offset: -1, Reason: fmt.Sprintf(format, args...), Err: ErrInvalidArgument}
}
