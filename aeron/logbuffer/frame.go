package logbuffer

import (
	"fmt"

	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
)

// Frame accessors in a term (FrameDescriptor). Offsets are frame starts:
// multiples of FrameAlignment inside the term.

// FrameLengthVolatile loads a frame's length with acquire semantics: a
// positive value means the frame is complete.
func FrameLengthVolatile(term []byte, offset int32) int32 { return shm.LoadInt32(term, int(offset)) }

// FrameLengthOrdered stores a frame's length with release semantics,
// publishing the frame.
func FrameLengthOrdered(term []byte, offset, length int32) {
	shm.StoreInt32(term, int(offset), length)
}

// FrameType is the type field of the frame at offset.
func FrameType(term []byte, offset int32) protocol.FrameType {
	return protocol.FrameType(le.Uint16(term[offset+6:]))
}

// IsPaddingFrame reports whether the frame at offset is a PAD.
func IsPaddingFrame(term []byte, offset int32) bool {
	return FrameType(term, offset) == protocol.TypePad
}

// FrameFlags is the flags field of the frame at offset.
func FrameFlags(term []byte, offset int32) uint8 { return term[offset+5] }

// CorruptFrameError is a frame in a term whose length breaks the layout:
// less than a header, or running past the end of the term.
type CorruptFrameError struct {
	TermOffset  int32
	FrameLength int32
	TermLength  int
}

func (e *CorruptFrameError) Error() string {
	if e.TermOffset < 0 || e.TermOffset%FrameAlignment != 0 {
		return fmt.Sprintf("logbuffer: term offset %d is not a frame boundary (a non-negative multiple of %d)", e.TermOffset, FrameAlignment)
	}
	return fmt.Sprintf("logbuffer: corrupt frame at term offset %d: frame_length %d does not fit a %d-byte term", e.TermOffset, e.FrameLength, e.TermLength)
}

func checkFrame(term []byte, offset, frameLength int32) error {
	if frameLength < protocol.DataHeaderLength || int64(offset)+int64(frameLength) > int64(len(term)) {
		return &CorruptFrameError{TermOffset: offset, FrameLength: frameLength, TermLength: len(term)}
	}
	return nil
}
