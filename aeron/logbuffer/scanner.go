package logbuffer

import "github.com/ibgo/ibgo/aeron/protocol"

// ScanForAvailability is the sender's scan of a term from offset: it returns
// how many bytes of complete frames are available to send, at most
// maxLength, and, when the scan ended on a PAD frame, the length of the
// padding after its header (the sender transmits only the 32-byte header of
// a PAD and skips the rest). available is negative when the first frame
// alone exceeds maxLength. Mirrors aeron_term_scanner_scan_for_availability.
func ScanForAvailability(term []byte, offset, maxLength int32) (available, padding int32) {
	capacity := int32(len(term) &^ (FrameAlignment - 1))
	if offset < 0 || offset >= capacity || offset&(FrameAlignment-1) != 0 {
		return 0, 0
	}
	limit := int64(min(maxLength, capacity-offset))
	var avail int64
	for {
		at := int64(offset) + avail
		frameLength := FrameLengthVolatile(term, int32(at))
		if frameLength <= 0 {
			break
		}
		aligned := int64(protocol.Align(int(frameLength), FrameAlignment))
		if IsPaddingFrame(term, int32(at)) {
			padding = int32(aligned - protocol.DataHeaderLength)
			aligned = protocol.DataHeaderLength
		}
		avail += aligned
		if avail > limit {
			if aligned == avail {
				avail = -avail
			} else {
				avail -= aligned
			}
			padding = 0
			break
		}
		if padding != 0 || avail >= limit {
			break
		}
	}
	return int32(avail), padding
}
