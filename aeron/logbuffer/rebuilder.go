package logbuffer

import (
	"fmt"

	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
)

// Insert writes a received packet (one or more frames, as carried in a
// datagram) into term at termOffset, unless a frame is already there. The
// body goes first and the first header word last, with release semantics,
// so a reader never sees a partial frame (mirrors aeron_term_rebuilder_insert).
// The packet must fit the term and termOffset must be frame aligned; the
// receiver validates both before calling.
func Insert(term []byte, termOffset int32, packet []byte) error {
	switch {
	case len(packet) < protocol.DataHeaderLength:
		return fmt.Errorf("logbuffer: insert: packet of %d bytes is shorter than a %d-byte frame header", len(packet), protocol.DataHeaderLength)
	case termOffset < 0 || termOffset&(FrameAlignment-1) != 0:
		return fmt.Errorf("logbuffer: insert: term offset %d is not a non-negative multiple of %d", termOffset, FrameAlignment)
	case int64(termOffset)+int64(len(packet)) > int64(len(term)):
		return fmt.Errorf("logbuffer: insert: %d bytes at term offset %d overrun the %d-byte term", len(packet), termOffset, len(term))
	}
	if FrameLengthVolatile(term, termOffset) != 0 {
		return nil // already there: a duplicate or overlapping retransmit
	}
	dst := term[termOffset:]
	copy(dst[protocol.DataHeaderLength:len(packet)], packet[protocol.DataHeaderLength:])
	copy(dst[8:protocol.DataHeaderLength], packet[8:protocol.DataHeaderLength])
	shm.StoreInt64(term, int(termOffset), int64(le.Uint64(packet)))
	return nil
}
