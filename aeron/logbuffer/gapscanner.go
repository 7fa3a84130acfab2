package logbuffer

import "github.com/ibgo/ibgo/aeron/protocol"

// GapHandler receives a gap found by ScanForGap.
type GapHandler func(termID, termOffset, length int32)

// ScanForGap scans term from termOffset for the first gap before
// limitOffset (the highest offset received). It reports the gap's start and
// length to onGap (if any) and returns the offset where contiguous frames
// end. The gap runs until the next non-zero frame length found in 32-byte
// steps. Mirrors aeron_term_gap_scanner_scan_for_gap.
func ScanForGap(term []byte, termID, termOffset, limitOffset int32, onGap GapHandler) int32 {
	limit := int64(min(limitOffset, int32(len(term)&^(FrameAlignment-1))))
	offset := int64(termOffset)
	if offset < 0 || offset&(FrameAlignment-1) != 0 {
		return termOffset
	}
	for offset < limit {
		frameLength := FrameLengthVolatile(term, int32(offset))
		if frameLength <= 0 {
			break
		}
		offset += int64(protocol.Align(int(frameLength), FrameAlignment))
	}
	gapBegin := offset
	if offset < limit {
		offset += protocol.DataHeaderLength
		for offset < limit {
			if FrameLengthVolatile(term, int32(offset)) != 0 {
				break
			}
			offset += protocol.DataHeaderLength
		}
		if onGap != nil {
			onGap(termID, int32(gapBegin), int32(offset-gapBegin))
		}
	}
	return int32(min(gapBegin, int64(len(term))))
}
