package logbuffer

import "github.com/ibgo/ibgo/aeron/protocol"

// UnblockStatus is what Unblock did.
type UnblockStatus int

const (
	// NoAction: nothing at the blocked offset could be safely padded.
	NoAction UnblockStatus = iota
	// Unblocked: a padding frame now covers the blocked claim.
	Unblocked
	// UnblockedToEnd: a padding frame now covers the rest of the term.
	UnblockedToEnd
)

func (s UnblockStatus) String() string {
	switch s {
	case NoAction:
		return "no action"
	case Unblocked:
		return "unblocked"
	case UnblockedToEnd:
		return "unblocked to end"
	}
	return "unknown"
}

// Unblock turns a claim that a publisher made but never committed into
// padding, so that consumers of the term can move past it. This is what the
// media driver does for a publication whose consumer position has not moved
// for the publication unblock timeout while the tail is beyond it: the
// publisher died, or its claim was delayed across a term rotation
// (TermIDError) and so will never be written.
//
// blockedOffset is where consumers stopped, tailOffset the partition's tail
// offset (values past the term's end are treated as its end) and termID the
// term the partition holds.
//
// A negative frame length at blockedOffset is a header written but not
// committed; its length is kept. A zero frame length is padded up to the
// next frame found in FrameAlignment steps (when everything between is
// still zero) or, when none is found before the end of the term, to the end
// of the term. Semantics as Aeron's TermUnblocker.
func Unblock(hw *HeaderWriter, term []byte, blockedOffset, tailOffset, termID int32) UnblockStatus {
	termLength := int32(len(term)) &^ (FrameAlignment - 1)
	if blockedOffset < 0 || blockedOffset >= termLength || blockedOffset&(FrameAlignment-1) != 0 {
		return NoAction
	}
	tailOffset = min(tailOffset, termLength)
	frameLength := FrameLengthVolatile(term, blockedOffset)
	switch {
	case frameLength < 0:
		if int64(blockedOffset)-int64(frameLength) > int64(termLength) {
			return NoAction // a corrupt length: padding it would run off the term
		}
		padFrame(hw, term, blockedOffset, -frameLength, termID)
		return Unblocked
	case frameLength > 0:
		return NoAction // committed: consumers are not blocked here
	}
	offset := blockedOffset + FrameAlignment
	for ; offset < tailOffset; offset += FrameAlignment {
		if FrameLengthVolatile(term, offset) == 0 {
			continue
		}
		if !zeroedBetween(term, blockedOffset, offset) {
			return NoAction
		}
		padFrame(hw, term, blockedOffset, offset-blockedOffset, termID)
		return Unblocked
	}
	if offset >= termLength && FrameLengthVolatile(term, blockedOffset) == 0 {
		padFrame(hw, term, blockedOffset, termLength-blockedOffset, termID)
		return UnblockedToEnd
	}
	return NoAction
}

// zeroedBetween reports whether every frame length from from up to (not
// including) to is still zero: scanning back catches a publisher that
// committed a frame behind the scan.
func zeroedBetween(term []byte, from, to int32) bool {
	for off := to - FrameAlignment; off >= from; off -= FrameAlignment {
		if FrameLengthVolatile(term, off) != 0 {
			return false
		}
	}
	return true
}

// padFrame writes a padding frame of length bytes at offset and commits it.
func padFrame(hw *HeaderWriter, term []byte, offset, length, termID int32) {
	hw.Write(term, offset, length, termID)
	le.PutUint16(term[offset+6:], uint16(protocol.TypePad))
	FrameLengthOrdered(term, offset, length)
}
