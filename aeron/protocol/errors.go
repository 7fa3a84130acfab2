package protocol

import (
	"errors"
	"fmt"
)

// Sentinel causes carried by *Error, for errors.Is.
var (
	// ErrTruncated: the bytes end before the frame or field does.
	ErrTruncated = errors.New("truncated")
	// ErrInvalid: a field breaks a rule of the protocol.
	ErrInvalid = errors.New("invalid")
	// ErrVersion: the frame's version is not CurrentVersion.
	ErrVersion = errors.New("unsupported version")
	// ErrShortBuffer: the destination of an Encode is too small.
	ErrShortBuffer = errors.New("destination too small")
)

// Error is the error type of this package. It says which frame, at which
// offset of its datagram (or -1 when not known), which field and which rule.
type Error struct {
	Op     string    // "decode" or "encode"
	Type   FrameType // frame type being handled
	Offset int       // offset of the frame in its datagram, -1 if unknown
	Field  string    // field at fault, e.g. "frame_length"; may be empty
	Reason string    // the rule, with the offending value
	Err    error     // one of the sentinels above
}

func (e *Error) Error() string {
	s := "protocol: " + e.Op + " " + e.Type.String() + " frame"
	if e.Offset >= 0 {
		s += fmt.Sprintf(" at offset %d", e.Offset)
	}
	s += ": "
	if e.Field != "" {
		s += e.Field + " "
	}
	return s + e.Reason
}

// Unwrap returns the sentinel cause.
func (e *Error) Unwrap() error { return e.Err }

func decodeErr(t FrameType, field string, cause error, format string, args ...any) *Error {
	return &Error{Op: "decode", Type: t, Offset: -1, Field: field, Reason: fmt.Sprintf(format, args...), Err: cause}
}

func encodeErr(t FrameType, need, have int) *Error {
	return &Error{Op: "encode", Type: t, Offset: -1, Reason: fmt.Sprintf("needs %d bytes, destination has %d", need, have), Err: ErrShortBuffer}
}

// withOffset sets the datagram offset of an error returned by a Decode method.
func withOffset(err error, off int) error {
	var e *Error
	if errors.As(err, &e) && e.Offset < 0 {
		e.Offset = off
	}
	return err
}
