package logbuffer

import (
	"fmt"
	"math/bits"

	"github.com/ibgo/ibgo/aeron/protocol"
)

// Log buffer geometry (aeron_logbuffer_descriptor.h).
const (
	PartitionCount              = 3
	TermMinLength               = 64 << 10
	TermMaxLength               = 1 << 30
	PageMinSize                 = 4 << 10
	PageMaxSize                 = 1 << 30
	MetadataLength              = PageMinSize
	FrameAlignment              = protocol.FrameAlignment
	DefaultFrameHeaderMaxLength = 128
)

// Offsets in the metadata section (aeron_logbuffer_metadata_t, packed to 4).
const (
	TermTailCountersOffset               = 0 // [3]int64
	ActiveTermCountOffset                = 24
	EndOfStreamPositionOffset            = 128
	IsConnectedOffset                    = 136
	ActiveTransportCountOffset           = 140
	CorrelationIDOffset                  = 256
	InitialTermIDOffset                  = 264
	DefaultFrameHeaderLengthOffset       = 268
	MTULengthOffset                      = 272
	TermLengthOffset                     = 276
	PageSizeOffset                       = 280
	PublicationWindowLengthOffset        = 284
	ReceiverWindowLengthOffset           = 288
	SocketSndbufLengthOffset             = 292
	OSDefaultSocketSndbufLengthOffset    = 296
	OSMaxSocketSndbufLengthOffset        = 300
	SocketRcvbufLengthOffset             = 304
	OSDefaultSocketRcvbufLengthOffset    = 308
	OSMaxSocketRcvbufLengthOffset        = 312
	MaxResendOffset                      = 316
	DefaultFrameHeaderOffset             = 320
	EntityTagOffset                      = 448
	ResponseCorrelationIDOffset          = 456
	LingerTimeoutNsOffset                = 464
	UntetheredWindowLimitTimeoutNsOffset = 472
	UntetheredRestingTimeoutNsOffset     = 480
	GroupOffset                          = 488
	IsResponseOffset                     = 489
	RejoinOffset                         = 490
	ReliableOffset                       = 491
	SparseOffset                         = 492
	SignalEOSOffset                      = 493
	SpiesSimulateConnectionOffset        = 494
	TetherOffset                         = 495
	// Aeron 1.53 additions; zero in logs written by 1.48.
	IsPublicationRevokedOffset      = 496
	LogTypeOffset                   = 497
	UntetheredLingerTimeoutNsOffset = 500
	// MetadataStructLength is sizeof(aeron_logbuffer_metadata_t) in 1.48.
	MetadataStructLength = 496
)

// LogType is the 1.53 metadata type byte.
type LogType uint8

// Log types.
const (
	LogTypeConcurrentPublication LogType = 0
	LogTypeExclusivePublication  LogType = 1
	LogTypeImage                 LogType = 2
)

// CheckTermLength mirrors aeron_logbuffer_check_term_length.
func CheckTermLength(termLength int64) error {
	switch {
	case termLength < TermMinLength:
		return fmt.Errorf("logbuffer: term length less than min length of %d: length=%d", TermMinLength, termLength)
	case termLength > TermMaxLength:
		return fmt.Errorf("logbuffer: term length greater than max length of %d: length=%d", TermMaxLength, termLength)
	case termLength&(termLength-1) != 0:
		return fmt.Errorf("logbuffer: term length not a power of 2: length=%d", termLength)
	}
	return nil
}

// CheckPageSize mirrors aeron_logbuffer_check_page_size.
func CheckPageSize(pageSize int64) error {
	switch {
	case pageSize < PageMinSize:
		return fmt.Errorf("logbuffer: page size less than min size of %d: size=%d", PageMinSize, pageSize)
	case pageSize > PageMaxSize:
		return fmt.Errorf("logbuffer: page size greater than max size of %d: size=%d", PageMaxSize, pageSize)
	case pageSize&(pageSize-1) != 0:
		return fmt.Errorf("logbuffer: page size not a power of 2: size=%d", pageSize)
	}
	return nil
}

// ComputeLogLength is the file length for a term length and page size:
// three terms and the metadata, rounded up to the page size
// (aeron_logbuffer_compute_log_length).
func ComputeLogLength(termLength, pageSize int64) int64 {
	n := termLength*PartitionCount + MetadataLength
	return (n + pageSize - 1) &^ (pageSize - 1)
}

// PositionBitsToShift is log2(termLength) for a power-of-two term length.
func PositionBitsToShift(termLength int32) int { return bits.TrailingZeros32(uint32(termLength)) }

// ComputeTermCount is termID - initialTermID with int32 wrap-around.
func ComputeTermCount(termID, initialTermID int32) int32 { return termID - initialTermID }

// ComputePosition mirrors aeron_logbuffer_compute_position:
// ((termID - initialTermID) << bits) + termOffset, the term count taken as a
// wrapping int32.
func ComputePosition(termID, termOffset int32, positionBitsToShift int, initialTermID int32) int64 {
	return int64(termID-initialTermID)<<positionBitsToShift + int64(termOffset)
}

// ComputeTermBeginPosition is the position of the start of term termID.
func ComputeTermBeginPosition(termID int32, positionBitsToShift int, initialTermID int32) int64 {
	return int64(termID-initialTermID) << positionBitsToShift
}

// ComputeTermIDFromPosition mirrors aeron_logbuffer_compute_term_id_from_position.
func ComputeTermIDFromPosition(position int64, positionBitsToShift int, initialTermID int32) int32 {
	return int32(uint64(position)>>positionBitsToShift) + initialTermID
}

// ComputeTermOffsetFromPosition is the offset of position within its term.
func ComputeTermOffsetFromPosition(position int64, positionBitsToShift int) int32 {
	return int32(position & (1<<positionBitsToShift - 1))
}

func mod3(n int64) int {
	r := int(n % PartitionCount)
	if r < 0 { // only for term counts that wrapped, which Aeron never reaches
		r += PartitionCount
	}
	return r
}

// IndexByTerm is the partition that holds activeTermID.
func IndexByTerm(initialTermID, activeTermID int32) int {
	return mod3(int64(activeTermID - initialTermID))
}

// IndexByTermCount is the partition for a term count.
func IndexByTermCount(termCount int64) int { return mod3(termCount) }

// IndexByPosition is the partition that holds position.
func IndexByPosition(position int64, positionBitsToShift int) int {
	return int((uint64(position) >> positionBitsToShift) % PartitionCount)
}

// PackTail packs a term id and offset into a raw tail counter value.
func PackTail(termID, termOffset int32) int64 {
	return int64(termID)<<32 | int64(uint32(termOffset))
}

// TermID is the term id of a raw tail.
func TermID(rawTail int64) int32 { return int32(rawTail >> 32) }

// TermOffset is the offset of a raw tail, clamped to the term length: after
// a claim that overran the term the raw offset exceeds it
// (aeron_logbuffer_term_offset).
func TermOffset(rawTail int64, termLength int32) int32 {
	off := rawTail & 0xFFFFFFFF
	if off < int64(termLength) {
		return int32(off)
	}
	return termLength
}
