package logbuffer

import (
	"fmt"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
)

// ExclusiveTermAppender appends to one partition from a single writer: the
// writer keeps the term offset itself and publishes the tail with an
// ordered store instead of an atomic add (Java ExclusiveTermAppender,
// aeron_exclusive_publication.c). Not safe for concurrent use; readers and
// the driver may read concurrently.
type ExclusiveTermAppender struct {
	term []byte
	tail *atomic.Int64
}

// NewExclusiveTermAppender returns an exclusive appender for partition of l.
func NewExclusiveTermAppender(l *LogBuffer, partition int) *ExclusiveTermAppender {
	return &ExclusiveTermAppender{term: l.Term(partition), tail: shm.Int64At(l.meta.b, tailOffset(partition))}
}

// reserve publishes the new tail and reports whether the frame fits; when
// it does not, the rest of the term is padded (handleEndOfLogCondition).
func (a *ExclusiveTermAppender) reserve(hw *HeaderWriter, termID, termOffset, aligned int32) (int32, bool) {
	termLength := int32(len(a.term))
	resulting := termOffset + aligned
	a.tail.Store(PackTail(termID, resulting))
	if resulting > termLength {
		if termOffset < termLength {
			padFrame(hw, a.term, termOffset, termLength-termOffset, termID)
		}
		return AppendFailed, false
	}
	return resulting, true
}

// AppendUnfragmentedMessage appends src as one frame at termOffset and
// returns the resulting offset or AppendFailed (the term is then padded to
// its end and the caller rotates).
func (a *ExclusiveTermAppender) AppendUnfragmentedMessage(hw *HeaderWriter, termID, termOffset int32, src []byte) int32 {
	frameLength := int32(len(src)) + protocol.DataHeaderLength
	resulting, ok := a.reserve(hw, termID, termOffset, protocol.AlignedFrameLength(frameLength))
	if !ok {
		return resulting
	}
	hw.Write(a.term, termOffset, frameLength, termID)
	copy(a.term[termOffset+protocol.DataHeaderLength:], src)
	FrameLengthOrdered(a.term, termOffset, frameLength)
	return resulting
}

// AppendFragmentedMessage appends src as fragments of at most
// maxPayloadLength bytes, contiguous, first flagged B and last E.
func (a *ExclusiveTermAppender) AppendFragmentedMessage(hw *HeaderWriter, termID, termOffset int32, src []byte, maxPayloadLength int) (int32, error) {
	if maxPayloadLength <= 0 || maxPayloadLength%FrameAlignment != 0 {
		return 0, fmt.Errorf("logbuffer: max payload length %d must be a positive multiple of %d (MTU - header)", maxPayloadLength, FrameAlignment)
	}
	length := len(src)
	required := length / maxPayloadLength * (maxPayloadLength + protocol.DataHeaderLength)
	if rem := length % maxPayloadLength; rem > 0 {
		required += protocol.Align(rem+protocol.DataHeaderLength, FrameAlignment)
	}
	resulting, ok := a.reserve(hw, termID, termOffset, int32(required))
	if !ok {
		return resulting, nil
	}
	flags := protocol.FlagBegin
	frameOffset := termOffset
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
		FrameLengthOrdered(a.term, frameOffset, frameLength)
		flags = 0
		frameOffset += protocol.AlignedFrameLength(frameLength)
		left -= n
	}
	return resulting, nil
}

// Claim reserves a frame for length bytes at termOffset, to be written in
// place through claim and committed.
func (a *ExclusiveTermAppender) Claim(hw *HeaderWriter, termID, termOffset int32, length int, claim *BufferClaim) int32 {
	frameLength := int32(length) + protocol.DataHeaderLength
	resulting, ok := a.reserve(hw, termID, termOffset, protocol.AlignedFrameLength(frameLength))
	if !ok {
		return resulting
	}
	hw.Write(a.term, termOffset, frameLength, termID)
	claim.wrap(a.term, termOffset, frameLength)
	return resulting
}
