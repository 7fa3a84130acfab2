package logbuffer

import (
	"encoding/binary"
	"fmt"

	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
)

var le = binary.LittleEndian

// Metadata is a view of a log buffer's metadata section. Words that another
// process updates concurrently (tails, active term count, end of stream,
// connection flags) are read and written atomically; the configuration
// fields are written once by the driver before the log is published and are
// plain.
type Metadata struct {
	b []byte
}

// NewMetadata wraps a MetadataLength-byte, 8-byte-aligned section.
func NewMetadata(b []byte) (*Metadata, error) {
	if len(b) < MetadataLength {
		return nil, fmt.Errorf("logbuffer: metadata needs %d bytes, have %d", MetadataLength, len(b))
	}
	if !shm.Aligned(b, 8) {
		return nil, fmt.Errorf("logbuffer: metadata must be 8-byte aligned for atomic access")
	}
	return &Metadata{b: b[:MetadataLength]}, nil
}

// Bytes returns the section.
func (m *Metadata) Bytes() []byte { return m.b }

func tailOffset(partition int) int { return TermTailCountersOffset + partition*8 }

// RawTailVolatile loads the raw tail of a partition.
func (m *Metadata) RawTailVolatile(partition int) int64 {
	return shm.LoadInt64(m.b, tailOffset(partition))
}

// SetRawTailOrdered stores the raw tail of a partition.
func (m *Metadata) SetRawTailOrdered(partition int, rawTail int64) {
	shm.StoreInt64(m.b, tailOffset(partition), rawTail)
}

// CasRawTail compare-and-sets the raw tail of a partition.
func (m *Metadata) CasRawTail(partition int, expected, update int64) bool {
	return shm.CompareAndSwapInt64(m.b, tailOffset(partition), expected, update)
}

// ActiveTermCount loads the active term count; the active partition is the
// count modulo 3.
func (m *Metadata) ActiveTermCount() int32 { return shm.LoadInt32(m.b, ActiveTermCountOffset) }

// SetActiveTermCountOrdered stores the active term count.
func (m *Metadata) SetActiveTermCountOrdered(n int32) {
	shm.StoreInt32(m.b, ActiveTermCountOffset, n)
}

// CasActiveTermCount compare-and-sets the active term count.
func (m *Metadata) CasActiveTermCount(expected, update int32) bool {
	return shm.CompareAndSwapInt32(m.b, ActiveTermCountOffset, expected, update)
}

// ActivePartitionIndex is the partition publications append to.
func (m *Metadata) ActivePartitionIndex() int { return IndexByTermCount(int64(m.ActiveTermCount())) }

// RawTailActive loads the raw tail of the active partition
// (AERON_LOGBUFFER_RAWTAIL_VOLATILE).
func (m *Metadata) RawTailActive() int64 { return m.RawTailVolatile(m.ActivePartitionIndex()) }

// InitialiseTailWithTermID sets a partition's tail to the start of termID.
func (m *Metadata) InitialiseTailWithTermID(partition int, termID int32) {
	m.SetRawTailOrdered(partition, PackTail(termID, 0))
}

// RotateLog moves the log to the next term after the current one filled up:
// it sets the next partition's tail to the start of term currentTermID+1
// (unless another writer already did) and advances the active term count.
// It reports whether this call advanced the count.
// Mirrors LogBufferDescriptor.rotateLog.
func (m *Metadata) RotateLog(currentTermCount, currentTermID int32) bool {
	nextTermID := currentTermID + 1
	nextTermCount := currentTermCount + 1
	next := IndexByTermCount(int64(nextTermCount))
	expectedTermID := nextTermID - PartitionCount
	for {
		raw := m.RawTailVolatile(next)
		if TermID(raw) != expectedTermID {
			break
		}
		if m.CasRawTail(next, raw, PackTail(nextTermID, 0)) {
			break
		}
	}
	return m.CasActiveTermCount(currentTermCount, nextTermCount)
}

// EndOfStreamPosition is INT64_MAX until the publication ended.
func (m *Metadata) EndOfStreamPosition() int64 { return shm.LoadInt64(m.b, EndOfStreamPositionOffset) }

// SetEndOfStreamPosition stores the end-of-stream position.
func (m *Metadata) SetEndOfStreamPosition(p int64) {
	shm.StoreInt64(m.b, EndOfStreamPositionOffset, p)
}

// IsConnected is the publication's connected flag, read by offer.
func (m *Metadata) IsConnected() bool { return shm.LoadInt32(m.b, IsConnectedOffset) == 1 }

// SetIsConnected stores the connected flag.
func (m *Metadata) SetIsConnected(v bool) {
	var n int32
	if v {
		n = 1
	}
	shm.StoreInt32(m.b, IsConnectedOffset, n)
}

// ActiveTransportCount is the number of live sources of an image.
func (m *Metadata) ActiveTransportCount() int32 {
	return shm.LoadInt32(m.b, ActiveTransportCountOffset)
}

// SetActiveTransportCount stores the number of live sources.
func (m *Metadata) SetActiveTransportCount(n int32) {
	shm.StoreInt32(m.b, ActiveTransportCountOffset, n)
}

func (m *Metadata) i32(off int) int32       { return int32(le.Uint32(m.b[off:])) }
func (m *Metadata) setI32(off int, v int32) { le.PutUint32(m.b[off:], uint32(v)) }
func (m *Metadata) i64(off int) int64       { return int64(le.Uint64(m.b[off:])) }
func (m *Metadata) setI64(off int, v int64) { le.PutUint64(m.b[off:], uint64(v)) }
func (m *Metadata) flag(off int) bool       { return m.b[off] != 0 }
func (m *Metadata) setFlag(off int, v bool) {
	m.b[off] = 0
	if v {
		m.b[off] = 1
	}
}

// Configuration written by the driver when it creates the log.

func (m *Metadata) CorrelationID() int64               { return m.i64(CorrelationIDOffset) }
func (m *Metadata) SetCorrelationID(v int64)           { m.setI64(CorrelationIDOffset, v) }
func (m *Metadata) InitialTermID() int32               { return m.i32(InitialTermIDOffset) }
func (m *Metadata) SetInitialTermID(v int32)           { m.setI32(InitialTermIDOffset, v) }
func (m *Metadata) DefaultFrameHeaderLength() int32    { return m.i32(DefaultFrameHeaderLengthOffset) }
func (m *Metadata) MTULength() int32                   { return m.i32(MTULengthOffset) }
func (m *Metadata) SetMTULength(v int32)               { m.setI32(MTULengthOffset, v) }
func (m *Metadata) TermLength() int32                  { return m.i32(TermLengthOffset) }
func (m *Metadata) SetTermLength(v int32)              { m.setI32(TermLengthOffset, v) }
func (m *Metadata) PageSize() int32                    { return m.i32(PageSizeOffset) }
func (m *Metadata) SetPageSize(v int32)                { m.setI32(PageSizeOffset, v) }
func (m *Metadata) PublicationWindowLength() int32     { return m.i32(PublicationWindowLengthOffset) }
func (m *Metadata) SetPublicationWindowLength(v int32) { m.setI32(PublicationWindowLengthOffset, v) }
func (m *Metadata) ReceiverWindowLength() int32        { return m.i32(ReceiverWindowLengthOffset) }
func (m *Metadata) SetReceiverWindowLength(v int32)    { m.setI32(ReceiverWindowLengthOffset, v) }
func (m *Metadata) SocketSndbufLength() int32          { return m.i32(SocketSndbufLengthOffset) }
func (m *Metadata) SetSocketSndbufLength(v int32)      { m.setI32(SocketSndbufLengthOffset, v) }
func (m *Metadata) OSDefaultSocketSndbufLength() int32 {
	return m.i32(OSDefaultSocketSndbufLengthOffset)
}
func (m *Metadata) SetOSDefaultSocketSndbufLength(v int32) {
	m.setI32(OSDefaultSocketSndbufLengthOffset, v)
}
func (m *Metadata) OSMaxSocketSndbufLength() int32     { return m.i32(OSMaxSocketSndbufLengthOffset) }
func (m *Metadata) SetOSMaxSocketSndbufLength(v int32) { m.setI32(OSMaxSocketSndbufLengthOffset, v) }
func (m *Metadata) SocketRcvbufLength() int32          { return m.i32(SocketRcvbufLengthOffset) }
func (m *Metadata) SetSocketRcvbufLength(v int32)      { m.setI32(SocketRcvbufLengthOffset, v) }
func (m *Metadata) OSDefaultSocketRcvbufLength() int32 {
	return m.i32(OSDefaultSocketRcvbufLengthOffset)
}
func (m *Metadata) SetOSDefaultSocketRcvbufLength(v int32) {
	m.setI32(OSDefaultSocketRcvbufLengthOffset, v)
}
func (m *Metadata) OSMaxSocketRcvbufLength() int32     { return m.i32(OSMaxSocketRcvbufLengthOffset) }
func (m *Metadata) SetOSMaxSocketRcvbufLength(v int32) { m.setI32(OSMaxSocketRcvbufLengthOffset, v) }
func (m *Metadata) MaxResend() int32                   { return m.i32(MaxResendOffset) }
func (m *Metadata) SetMaxResend(v int32)               { m.setI32(MaxResendOffset, v) }
func (m *Metadata) EntityTag() int64                   { return m.i64(EntityTagOffset) }
func (m *Metadata) SetEntityTag(v int64)               { m.setI64(EntityTagOffset, v) }
func (m *Metadata) ResponseCorrelationID() int64       { return m.i64(ResponseCorrelationIDOffset) }
func (m *Metadata) SetResponseCorrelationID(v int64)   { m.setI64(ResponseCorrelationIDOffset, v) }
func (m *Metadata) LingerTimeoutNs() int64             { return m.i64(LingerTimeoutNsOffset) }
func (m *Metadata) SetLingerTimeoutNs(v int64)         { m.setI64(LingerTimeoutNsOffset, v) }
func (m *Metadata) UntetheredWindowLimitTimeoutNs() int64 {
	return m.i64(UntetheredWindowLimitTimeoutNsOffset)
}
func (m *Metadata) SetUntetheredWindowLimitTimeoutNs(v int64) {
	m.setI64(UntetheredWindowLimitTimeoutNsOffset, v)
}
func (m *Metadata) UntetheredRestingTimeoutNs() int64 { return m.i64(UntetheredRestingTimeoutNsOffset) }
func (m *Metadata) SetUntetheredRestingTimeoutNs(v int64) {
	m.setI64(UntetheredRestingTimeoutNsOffset, v)
}
func (m *Metadata) Group() bool                       { return m.flag(GroupOffset) }
func (m *Metadata) SetGroup(v bool)                   { m.setFlag(GroupOffset, v) }
func (m *Metadata) IsResponse() bool                  { return m.flag(IsResponseOffset) }
func (m *Metadata) SetIsResponse(v bool)              { m.setFlag(IsResponseOffset, v) }
func (m *Metadata) Rejoin() bool                      { return m.flag(RejoinOffset) }
func (m *Metadata) SetRejoin(v bool)                  { m.setFlag(RejoinOffset, v) }
func (m *Metadata) Reliable() bool                    { return m.flag(ReliableOffset) }
func (m *Metadata) SetReliable(v bool)                { m.setFlag(ReliableOffset, v) }
func (m *Metadata) Sparse() bool                      { return m.flag(SparseOffset) }
func (m *Metadata) SetSparse(v bool)                  { m.setFlag(SparseOffset, v) }
func (m *Metadata) SignalEOS() bool                   { return m.flag(SignalEOSOffset) }
func (m *Metadata) SetSignalEOS(v bool)               { m.setFlag(SignalEOSOffset, v) }
func (m *Metadata) SpiesSimulateConnection() bool     { return m.flag(SpiesSimulateConnectionOffset) }
func (m *Metadata) SetSpiesSimulateConnection(v bool) { m.setFlag(SpiesSimulateConnectionOffset, v) }
func (m *Metadata) Tether() bool                      { return m.flag(TetherOffset) }
func (m *Metadata) SetTether(v bool)                  { m.setFlag(TetherOffset, v) }
func (m *Metadata) IsPublicationRevoked() bool        { return m.flag(IsPublicationRevokedOffset) }
func (m *Metadata) SetIsPublicationRevoked(v bool)    { m.setFlag(IsPublicationRevokedOffset, v) }
func (m *Metadata) LogType() LogType                  { return LogType(m.b[LogTypeOffset]) }
func (m *Metadata) SetLogType(t LogType)              { m.b[LogTypeOffset] = byte(t) }
func (m *Metadata) UntetheredLingerTimeoutNs() int64  { return m.i64(UntetheredLingerTimeoutNsOffset) }
func (m *Metadata) SetUntetheredLingerTimeoutNs(v int64) {
	m.setI64(UntetheredLingerTimeoutNsOffset, v)
}

// DefaultFrameHeader returns the DATA header template that publications copy
// into every frame (flags 0xC0, type DATA, session, stream, initial term id).
func (m *Metadata) DefaultFrameHeader() []byte {
	n := int(m.DefaultFrameHeaderLength())
	if n < 0 || n > DefaultFrameHeaderMaxLength {
		n = 0
	}
	return m.b[DefaultFrameHeaderOffset : DefaultFrameHeaderOffset+n]
}

// StoreDefaultFrameHeader stores hdr (at most 128 bytes) as the template
// and its length.
func (m *Metadata) StoreDefaultFrameHeader(hdr []byte) error {
	if len(hdr) > DefaultFrameHeaderMaxLength {
		return fmt.Errorf("logbuffer: default frame header of %d bytes exceeds %d", len(hdr), DefaultFrameHeaderMaxLength)
	}
	m.setI32(DefaultFrameHeaderLengthOffset, int32(len(hdr)))
	copy(m.b[DefaultFrameHeaderOffset:DefaultFrameHeaderOffset+DefaultFrameHeaderMaxLength], hdr)
	return nil
}

// StoreDefaultDataHeader writes the standard 32-byte template for a session
// and stream, as the driver does for a new publication.
func (m *Metadata) StoreDefaultDataHeader(sessionID, streamID, initialTermID int32) {
	var hdr [protocol.DataHeaderLength]byte
	h := protocol.DataHeader{
		FrameHeader: protocol.FrameHeader{Flags: protocol.FlagsUnfragmented, Type: protocol.TypeData},
		SessionID:   sessionID, StreamID: streamID, TermID: initialTermID,
	}
	h.Encode(hdr[:])
	m.StoreDefaultFrameHeader(hdr[:])
}
