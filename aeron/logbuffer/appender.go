package logbuffer

import (
	"fmt"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
)

// AppendFailed is returned by the append methods when the message did not
// fit in the rest of the term: the term has been padded to its end and the
// caller must rotate the log (RotateLog) and retry. Mirrors
// TermAppender.FAILED.
const AppendFailed int32 = -2

// ReservedValueSupplier computes the reserved value of a frame after its
// payload is written (e.g. a checksum); nil leaves the reserved value 0.
type ReservedValueSupplier func(term []byte, termOffset, frameLength int32) int64

// TermIDError is returned when the term id found in the tail differs from
// the one the publication expected: the append was delayed across a term
// rotation (TermAppender.checkTerm).
type TermIDError struct {
	Expected, Actual int32
}

func (e *TermIDError) Error() string {
	return fmt.Sprintf("logbuffer: action possibly delayed: expected term id %d, tail has term id %d", e.Expected, e.Actual)
}

// TermAppender appends frames to one partition of a log from any number of
// concurrent writers, in any number of processes: space is claimed with an
// atomic add on the partition's tail counter (mirrors Java TermAppender and
// the concurrent publication in aeron_publication.c).
type TermAppender struct {
	term []byte
	tail *atomic.Int64
}

// NewTermAppender returns an appender for partition of l.
func NewTermAppender(l *LogBuffer, partition int) *TermAppender {
	return &TermAppender{term: l.Term(partition), tail: shm.Int64At(l.meta.b, tailOffset(partition))}
}

// RawTailVolatile loads the partition's raw tail.
func (a *TermAppender) RawTailVolatile() int64 { return a.tail.Load() }

// Term returns the partition.
func (a *TermAppender) Term() []byte { return a.term }

func (a *TermAppender) claim(length int32, activeTermID int32) (termID, termOffset int32, resultingOffset int64, err error) {
	raw := a.tail.Add(int64(length)) - int64(length)
	termID = TermID(raw)
	off := raw & 0xFFFFFFFF
	if termID != activeTermID {
		return termID, 0, 0, &TermIDError{Expected: activeTermID, Actual: termID}
	}
	if off&(FrameAlignment-1) != 0 {
		// Only a corrupted tail counter can get here: claims are aligned.
		return termID, 0, 0, &CorruptFrameError{TermOffset: int32(off), TermLength: len(a.term)}
	}
	return termID, int32(min(off, int64(len(a.term)))), off + int64(length), nil
}

// handleEndOfLog pads the rest of the term if this claim was the one that
// crossed its end (mirrors TermAppender.handleEndOfLogCondition).
func (a *TermAppender) handleEndOfLog(hw *HeaderWriter, termOffset, termID int32) int32 {
	termLength := int32(len(a.term))
	if termOffset < termLength {
		padFrame(hw, a.term, termOffset, termLength-termOffset, termID)
	}
	return AppendFailed
}

// Claim reserves a frame for a payload of length bytes that the caller
// writes in place through claim, then commits or aborts
// (TermAppender.claim). It returns the resulting term offset or AppendFailed.
func (a *TermAppender) Claim(hw *HeaderWriter, length int, claim *BufferClaim, activeTermID int32) (int32, error) {
	frameLength := int32(length) + protocol.DataHeaderLength
	aligned := protocol.AlignedFrameLength(frameLength)
	termID, off, resulting, err := a.claim(aligned, activeTermID)
	if err != nil {
		return 0, err
	}
	if resulting > int64(len(a.term)) {
		return a.handleEndOfLog(hw, off, termID), nil
	}
	hw.Write(a.term, off, frameLength, termID)
	claim.wrap(a.term, off, frameLength)
	return int32(resulting), nil
}

// AppendUnfragmentedMessage appends src as one frame (flags B|E from the
// default header) and returns the resulting term offset or AppendFailed
// (TermAppender.appendUnfragmentedMessage).
func (a *TermAppender) AppendUnfragmentedMessage(hw *HeaderWriter, src []byte, rvs ReservedValueSupplier, activeTermID int32) (int32, error) {
	frameLength := int32(len(src)) + protocol.DataHeaderLength
	aligned := protocol.AlignedFrameLength(frameLength)
	termID, off, resulting, err := a.claim(aligned, activeTermID)
	if err != nil {
		return 0, err
	}
	if resulting > int64(len(a.term)) {
		return a.handleEndOfLog(hw, off, termID), nil
	}
	hw.Write(a.term, off, frameLength, termID)
	copy(a.term[off+protocol.DataHeaderLength:], src)
	if rvs != nil {
		le.PutUint64(a.term[off+24:], uint64(rvs(a.term, off, frameLength)))
	}
	FrameLengthOrdered(a.term, off, frameLength)
	return int32(resulting), nil
}

// AppendFragmentedMessage appends src as fragments of at most
// maxPayloadLength bytes (MTU - 32): the first flagged B, the last E
// (TermAppender.appendFragmentedMessage). All fragments are claimed at once
// so they are contiguous.
func (a *TermAppender) AppendFragmentedMessage(hw *HeaderWriter, src []byte, maxPayloadLength int, rvs ReservedValueSupplier, activeTermID int32) (int32, error) {
	if maxPayloadLength <= 0 || maxPayloadLength%FrameAlignment != 0 {
		return 0, fmt.Errorf("logbuffer: max payload length %d must be a positive multiple of %d (MTU - header)", maxPayloadLength, FrameAlignment)
	}
	length := len(src)
	numMaxPayloads := length / maxPayloadLength
	remaining := length % maxPayloadLength
	lastFrameLength := 0
	if remaining > 0 {
		lastFrameLength = protocol.Align(remaining+protocol.DataHeaderLength, FrameAlignment)
	}
	required := numMaxPayloads*(maxPayloadLength+protocol.DataHeaderLength) + lastFrameLength
	termID, off, resulting, err := a.claim(int32(required), activeTermID)
	if err != nil {
		return 0, err
	}
	if resulting > int64(len(a.term)) {
		return a.handleEndOfLog(hw, off, termID), nil
	}
	flags := protocol.FlagBegin
	frameOffset := off
	for left := length; left > 0; {
		n := min(left, maxPayloadLength)
		frameLength := int32(n) + protocol.DataHeaderLength
		hw.Write(a.term, frameOffset, frameLength, termID)
		start := length - left
		copy(a.term[frameOffset+protocol.DataHeaderLength:], src[start:start+n])
		if left <= maxPayloadLength {
			flags |= protocol.FlagEnd
		}
		a.term[frameOffset+5] = flags
		if rvs != nil {
			le.PutUint64(a.term[frameOffset+24:], uint64(rvs(a.term, frameOffset, frameLength)))
		}
		FrameLengthOrdered(a.term, frameOffset, frameLength)
		flags = 0
		frameOffset += protocol.AlignedFrameLength(frameLength)
		left -= n
	}
	return int32(resulting), nil
}

// AppendPadding appends a PAD frame of length bytes (plus header), e.g. to
// skip to a position (TermAppender.appendPadding).
func (a *TermAppender) AppendPadding(hw *HeaderWriter, length int, activeTermID int32) (int32, error) {
	frameLength := int32(length) + protocol.DataHeaderLength
	aligned := protocol.AlignedFrameLength(frameLength)
	termID, off, resulting, err := a.claim(aligned, activeTermID)
	if err != nil {
		return 0, err
	}
	if resulting > int64(len(a.term)) {
		return a.handleEndOfLog(hw, off, termID), nil
	}
	hw.Write(a.term, off, frameLength, termID)
	le.PutUint16(a.term[off+6:], uint16(protocol.TypePad))
	FrameLengthOrdered(a.term, off, frameLength)
	return int32(resulting), nil
}

// BufferClaim is a claimed frame whose payload the caller writes in place
// (Java BufferClaim). Commit publishes it; Abort turns it into padding.
type BufferClaim struct {
	term        []byte
	offset      int32
	frameLength int32
}

func (c *BufferClaim) wrap(term []byte, offset, frameLength int32) {
	c.term, c.offset, c.frameLength = term, offset, frameLength
}

// Buffer is the claimed payload.
func (c *BufferClaim) Buffer() []byte {
	return c.term[c.offset+protocol.DataHeaderLength : c.offset+c.frameLength]
}

// SetFlags sets the frame's flags (defaults to B|E).
func (c *BufferClaim) SetFlags(flags uint8) { c.term[c.offset+5] = flags }

// SetReservedValue sets the frame's reserved value.
func (c *BufferClaim) SetReservedValue(v int64) { le.PutUint64(c.term[c.offset+24:], uint64(v)) }

// Commit publishes the frame.
func (c *BufferClaim) Commit() { FrameLengthOrdered(c.term, c.offset, c.frameLength) }

// Abort publishes the frame as padding, so readers skip it.
func (c *BufferClaim) Abort() {
	le.PutUint16(c.term[c.offset+6:], uint16(protocol.TypePad))
	FrameLengthOrdered(c.term, c.offset, c.frameLength)
}
