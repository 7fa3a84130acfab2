package protocol

import "strconv"

// Frame is one frame found in a datagram by NextFrame.
type Frame struct {
	Offset int         // where the frame starts in the datagram
	Header FrameHeader // its common header
	// Bytes is the frame as carried: header plus whatever part of the body
	// the datagram holds (a PAD travels as its 32-byte header only).
	Bytes []byte
	// Next is the offset of the following frame: DATA and PAD frames are
	// 32-byte aligned in a datagram; control frames are not batched, so Next
	// is their end.
	Next int
}

// minFrameLength is the length receivers require before they look at a frame
// of a known type (aeron_receive/send_channel_endpoint.c, 1.53
// aeron_is_frame_valid); -1 for types this package does not decode.
func minFrameLength(t FrameType) int {
	switch t {
	case TypeData, TypePad:
		return DataHeaderLength
	case TypeSetup:
		return SetupHeaderLength
	case TypeStatusMessage:
		return StatusMessageHeaderLength
	case TypeNak:
		return NakHeaderLength
	case TypeRTTM:
		return RTTMHeaderLength
	case TypeError:
		return ErrorHeaderLength
	case TypeResponseSetup:
		return ResponseSetupHeaderLength
	}
	return FrameHeaderLength
}

// NextFrame returns the frame that starts at offset off of a datagram. An
// error says why the bytes at off are not a frame (the offset is set in the
// *Error); the rest of the datagram cannot then be delimited, as Aeron too
// drops such a datagram. The typed Decode methods validate the fields.
func NextFrame(datagram []byte, off int) (Frame, error) {
	f := Frame{Offset: off}
	if off < 0 || off > len(datagram) {
		return f, &Error{Op: "decode", Type: TypePad, Offset: off, Reason: "offset outside the datagram", Err: ErrInvalid}
	}
	rest := datagram[off:]
	if len(rest) < FrameHeaderLength {
		return f, &Error{Op: "decode", Type: TypePad, Offset: off, Reason: errTrailing(len(rest)), Err: ErrTruncated}
	}
	h := &f.Header
	h.Decode(rest)
	fail := func(cause error, field, format string, args ...any) (Frame, error) {
		e := decodeErr(h.Type, field, cause, format, args...)
		e.Offset = off
		return f, e
	}
	if h.Version != CurrentVersion {
		return fail(ErrVersion, "version", "%d, want %d", h.Version, CurrentVersion)
	}
	switch h.Type {
	case TypeData, TypePad:
		if len(rest) < DataHeaderLength {
			return fail(ErrTruncated, "", "header needs %d bytes, %d left in the datagram", DataHeaderLength, len(rest))
		}
		fl := int(h.FrameLength)
		switch {
		case fl == 0 && h.Type == TypeData: // heartbeat
			f.Bytes = rest[:DataHeaderLength]
			f.Next = off + DataHeaderLength
			return f, nil
		case fl < DataHeaderLength:
			return fail(ErrInvalid, "frame_length", "%d is less than the %d-byte header", fl, DataHeaderLength)
		case h.Type == TypeData && fl > len(rest):
			return fail(ErrTruncated, "frame_length", "%d exceeds the %d bytes left in the datagram", fl, len(rest))
		}
		// A PAD's body is skipped by the sender; whatever follows the header
		// up to the aligned length still belongs to it in the term.
		n := min(Align(fl, FrameAlignment), len(rest))
		f.Bytes = rest[:min(fl, n)]
		f.Next = off + n
		return f, nil
	}
	minLen := minFrameLength(h.Type)
	fl := int(h.FrameLength)
	if fl < minLen {
		return fail(ErrInvalid, "frame_length", "%d is less than the %d-byte %s header", fl, minLen, h.Type)
	}
	if fl > len(rest) {
		return fail(ErrTruncated, "frame_length", "%d exceeds the %d bytes left in the datagram", fl, len(rest))
	}
	f.Bytes = rest[:fl]
	f.Next = off + fl
	return f, nil
}

func errTrailing(n int) string {
	if n == 0 {
		return "no bytes left for a frame header"
	}
	return "only " + strconv.Itoa(n) + " bytes left, less than the 8-byte frame header"
}
