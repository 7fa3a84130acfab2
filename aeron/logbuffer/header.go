package logbuffer

import (
	"fmt"

	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
)

// HeaderWriter writes frame headers from the log's default header
// (mirrors Java HeaderWriter / the C publication's header write).
type HeaderWriter struct {
	versionFlagsType int64 // upper half of the first header word
	sessionID        int64 // upper half of the second word
	streamID         int64 // lower half of the third word
}

// NewHeaderWriter builds a writer from a default frame header (32 bytes).
func NewHeaderWriter(defaultHeader []byte) (HeaderWriter, error) {
	if len(defaultHeader) < protocol.DataHeaderLength {
		return HeaderWriter{}, fmt.Errorf("logbuffer: default header of %d bytes, need %d", len(defaultHeader), protocol.DataHeaderLength)
	}
	return HeaderWriter{
		versionFlagsType: int64(le.Uint32(defaultHeader[4:])) << 32,
		sessionID:        int64(le.Uint32(defaultHeader[12:])) << 32,
		streamID:         int64(le.Uint32(defaultHeader[16:])),
	}, nil
}

// Write writes a header for a frame of length bytes at offset in term:
// frame_length is stored negated, with release semantics, so that readers
// and the sender see an incomplete frame until the writer stores the
// positive length.
func (w *HeaderWriter) Write(term []byte, offset, length, termID int32) {
	shm.StoreInt64(term, int(offset), w.versionFlagsType|int64(uint32(-length)))
	le.PutUint64(term[offset+8:], uint64(w.sessionID|int64(uint32(offset))))
	le.PutUint64(term[offset+16:], uint64(int64(termID)<<32|w.streamID))
}

// Header is a reader's view of the frame being delivered (Java
// io.aeron.logbuffer.Header).
type Header struct {
	term                []byte
	offset              int32
	initialTermID       int32
	positionBitsToShift int
}

// NewHeader makes a header for frames of a log with the given initial term
// id and term length.
func NewHeader(initialTermID, termLength int32) Header {
	return Header{initialTermID: initialTermID, positionBitsToShift: PositionBitsToShift(termLength)}
}

// Set points the header at a frame.
func (h *Header) Set(term []byte, offset int32) { h.term, h.offset = term, offset }

// Offset is the frame's offset in its term.
func (h *Header) Offset() int32 { return h.offset }

// Term is the term buffer holding the frame.
func (h *Header) Term() []byte { return h.term }

func (h *Header) FrameLength() int32 { return int32(le.Uint32(h.term[h.offset:])) }
func (h *Header) Flags() uint8       { return h.term[h.offset+5] }
func (h *Header) Type() protocol.FrameType {
	return protocol.FrameType(le.Uint16(h.term[h.offset+6:]))
}
func (h *Header) TermOffset() int32    { return int32(le.Uint32(h.term[h.offset+8:])) }
func (h *Header) SessionID() int32     { return int32(le.Uint32(h.term[h.offset+12:])) }
func (h *Header) StreamID() int32      { return int32(le.Uint32(h.term[h.offset+16:])) }
func (h *Header) TermID() int32        { return int32(le.Uint32(h.term[h.offset+20:])) }
func (h *Header) ReservedValue() int64 { return int64(le.Uint64(h.term[h.offset+24:])) }
func (h *Header) InitialTermID() int32 { return h.initialTermID }

// Position is the stream position just after this frame (Header.position).
func (h *Header) Position() int64 {
	next := protocol.AlignedFrameLength(h.offset + h.FrameLength())
	return ComputePosition(h.TermID(), next, h.positionBitsToShift, h.initialTermID)
}
