package logbuffer

import "github.com/ibgo/ibgo/aeron/protocol"

// FragmentHandler receives the payload of each DATA frame read from a term,
// with the header of its frame. The payload aliases the term: copy it to
// keep it after the handler returns.
type FragmentHandler func(payload []byte, header *Header)

// Read delivers up to fragmentsLimit DATA frames starting at termOffset,
// skipping padding, and stops at the first frame not yet committed. It
// returns the number of fragments delivered and the offset after the last
// frame consumed (mirrors TermReader.read; the caller advances its
// subscriber position by newOffset - termOffset). A frame whose length does
// not fit the term stops the read with a *CorruptFrameError.
func Read(term []byte, termOffset int32, handler FragmentHandler, fragmentsLimit int, header *Header) (fragments int, newOffset int32, err error) {
	offset := termOffset
	capacity := int32(len(term) &^ (FrameAlignment - 1)) // a partial tail holds no frame
	if offset < 0 || offset&(FrameAlignment-1) != 0 {
		return 0, offset, &CorruptFrameError{TermOffset: offset, TermLength: len(term)}
	}
	header.term = term
	for fragments < fragmentsLimit && offset < capacity {
		frameLength := FrameLengthVolatile(term, offset)
		if frameLength <= 0 {
			break
		}
		if err := checkFrame(term, offset, frameLength); err != nil {
			return fragments, offset, err
		}
		frameOffset := offset
		offset += protocol.AlignedFrameLength(frameLength)
		if !IsPaddingFrame(term, frameOffset) {
			fragments++
			header.offset = frameOffset
			handler(term[frameOffset+protocol.DataHeaderLength:frameOffset+frameLength], header)
		}
	}
	return fragments, offset, nil
}
