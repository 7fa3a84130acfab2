package protocol

import "encoding/binary"

var le = binary.LittleEndian

// FrameHeader is the 8-byte header every frame starts with
// (aeron_frame_header_t).
type FrameHeader struct {
	FrameLength int32 // header plus body; for DATA written last, with release
	Version     uint8
	Flags       uint8
	Type        FrameType
}

// Decode reads the header at the start of b. It checks only that 8 bytes are
// there; version and length rules belong to the typed decoders.
func (h *FrameHeader) Decode(b []byte) error {
	if len(b) < FrameHeaderLength {
		return decodeErr(TypePad, "", ErrTruncated, "header needs %d bytes, have %d", FrameHeaderLength, len(b))
	}
	h.FrameLength = int32(le.Uint32(b[0:]))
	h.Version = b[4]
	h.Flags = b[5]
	h.Type = FrameType(le.Uint16(b[6:]))
	return nil
}

// Encode writes the header at the start of b and returns 8.
func (h *FrameHeader) Encode(b []byte) (int, error) {
	if len(b) < FrameHeaderLength {
		return 0, encodeErr(h.Type, FrameHeaderLength, len(b))
	}
	h.put(b, h.Type, h.FrameLength)
	return FrameHeaderLength, nil
}

func (h *FrameHeader) put(b []byte, t FrameType, frameLength int32) {
	_ = b[7]
	le.PutUint32(b[0:], uint32(frameLength))
	b[4] = h.Version
	b[5] = h.Flags
	le.PutUint16(b[6:], uint16(t))
}

// check validates what every receiver checks first: enough bytes for the
// typed header, the expected type, version 0, and a frame_length that is at
// least minLength and, when bounded, no more than the bytes present (Aeron
// 1.53 aeron_is_frame_valid).
func (h *FrameHeader) check(b []byte, want FrameType, minLength int, bounded bool) error {
	if len(b) < minLength {
		return decodeErr(want, "", ErrTruncated, "needs %d bytes, have %d", minLength, len(b))
	}
	if h.Type != want {
		return decodeErr(want, "type", ErrInvalid, "is %s (%d)", h.Type, int16(h.Type))
	}
	if h.Version != CurrentVersion {
		return decodeErr(want, "version", ErrVersion, "%d, want %d", h.Version, CurrentVersion)
	}
	if int(h.FrameLength) < minLength {
		return decodeErr(want, "frame_length", ErrInvalid, "%d is less than the %d-byte %s header", h.FrameLength, minLength, want)
	}
	if bounded && int(h.FrameLength) > len(b) {
		return decodeErr(want, "frame_length", ErrTruncated, "%d exceeds the %d bytes present", h.FrameLength, len(b))
	}
	return nil
}

// DataHeader is the 32-byte header of DATA and PAD frames
// (aeron_data_header_t, DataHeaderFlyweight). A heartbeat is a DATA header
// with FrameLength 0.
type DataHeader struct {
	FrameHeader
	TermOffset    int32
	SessionID     int32
	StreamID      int32
	TermID        int32
	ReservedValue int64
}

// Decode reads a DATA or PAD header at the start of b. FrameLength must be 0
// (a DATA heartbeat) or at least 32; it is not checked against len(b),
// because a PAD travels without its body and a header in a term may precede
// a payload that is still being written. DecodeFrame checks the payload.
func (h *DataHeader) Decode(b []byte) error {
	if len(b) < DataHeaderLength {
		return decodeErr(TypeData, "", ErrTruncated, "header needs %d bytes, have %d", DataHeaderLength, len(b))
	}
	_ = b[31]
	h.FrameLength = int32(le.Uint32(b[0:]))
	h.Version = b[4]
	h.Flags = b[5]
	h.Type = FrameType(le.Uint16(b[6:]))
	h.TermOffset = int32(le.Uint32(b[8:]))
	h.SessionID = int32(le.Uint32(b[12:]))
	h.StreamID = int32(le.Uint32(b[16:]))
	h.TermID = int32(le.Uint32(b[20:]))
	h.ReservedValue = int64(le.Uint64(b[24:]))
	if h.Type != TypeData && h.Type != TypePad {
		return decodeErr(TypeData, "type", ErrInvalid, "is %s (%d), want DATA or PAD", h.Type, int16(h.Type))
	}
	if h.Version != CurrentVersion {
		return decodeErr(h.Type, "version", ErrVersion, "%d, want %d", h.Version, CurrentVersion)
	}
	if h.FrameLength == 0 && h.Type == TypeData {
		return nil // heartbeat
	}
	if h.FrameLength < DataHeaderLength {
		return decodeErr(h.Type, "frame_length", ErrInvalid, "%d is less than the %d-byte header", h.FrameLength, DataHeaderLength)
	}
	if h.TermOffset < 0 || h.TermOffset&(FrameAlignment-1) != 0 {
		return decodeErr(h.Type, "term_offset", ErrInvalid, "%d is not a non-negative multiple of %d", h.TermOffset, FrameAlignment)
	}
	return nil
}

// DecodeFrame decodes a DATA or PAD frame at the start of b and returns the
// DATA payload (aliasing b; nil for PAD and heartbeats). The payload must be
// present in b.
func (h *DataHeader) DecodeFrame(b []byte) ([]byte, error) {
	if err := h.Decode(b); err != nil {
		return nil, err
	}
	if h.Type != TypeData || h.FrameLength == 0 {
		return nil, nil
	}
	if int(h.FrameLength) > len(b) {
		return nil, decodeErr(TypeData, "frame_length", ErrTruncated, "%d exceeds the %d bytes present", h.FrameLength, len(b))
	}
	return b[DataHeaderLength:h.FrameLength], nil
}

// Encode writes the 32-byte header, FrameLength and Type as given (DATA or
// PAD), and returns 32.
func (h *DataHeader) Encode(b []byte) (int, error) {
	if len(b) < DataHeaderLength {
		return 0, encodeErr(h.Type, DataHeaderLength, len(b))
	}
	_ = b[31]
	le.PutUint32(b[0:], uint32(h.FrameLength))
	b[4] = h.Version
	b[5] = h.Flags
	le.PutUint16(b[6:], uint16(h.Type))
	le.PutUint32(b[8:], uint32(h.TermOffset))
	le.PutUint32(b[12:], uint32(h.SessionID))
	le.PutUint32(b[16:], uint32(h.StreamID))
	le.PutUint32(b[20:], uint32(h.TermID))
	le.PutUint64(b[24:], uint64(h.ReservedValue))
	return DataHeaderLength, nil
}

// EncodeFrame writes a DATA frame carrying payload: it sets FrameLength to
// 32+len(payload) and Type to DATA, and returns the frame length (unaligned).
func (h *DataHeader) EncodeFrame(b []byte, payload []byte) (int, error) {
	n := DataHeaderLength + len(payload)
	if len(b) < n {
		return 0, encodeErr(TypeData, n, len(b))
	}
	h.FrameLength = int32(n)
	h.Type = TypeData
	h.Encode(b)
	copy(b[DataHeaderLength:n], payload)
	return n, nil
}

// IsHeartbeat reports whether h is a heartbeat (DATA with frame_length 0,
// aeron_publication_image_is_heartbeat).
func (h *DataHeader) IsHeartbeat() bool { return h.Type == TypeData && h.FrameLength == 0 }

// IsEndOfStream reports whether the EOS flag is set.
func (h *DataHeader) IsEndOfStream() bool { return h.Flags&FlagEOS != 0 }

// Setup is the SETUP frame a publication sends until a receiver answers
// (aeron_setup_header_t).
type Setup struct {
	FrameHeader
	TermOffset    int32
	SessionID     int32
	StreamID      int32
	InitialTermID int32
	ActiveTermID  int32
	TermLength    int32
	MTU           int32
	TTL           int32
}

// Decode reads a SETUP frame at the start of b.
func (s *Setup) Decode(b []byte) error {
	if err := s.FrameHeader.Decode(b); err != nil {
		return withType(err, TypeSetup)
	}
	if err := s.check(b, TypeSetup, SetupHeaderLength, true); err != nil {
		return err
	}
	_ = b[39]
	s.TermOffset = int32(le.Uint32(b[8:]))
	s.SessionID = int32(le.Uint32(b[12:]))
	s.StreamID = int32(le.Uint32(b[16:]))
	s.InitialTermID = int32(le.Uint32(b[20:]))
	s.ActiveTermID = int32(le.Uint32(b[24:]))
	s.TermLength = int32(le.Uint32(b[28:]))
	s.MTU = int32(le.Uint32(b[32:]))
	s.TTL = int32(le.Uint32(b[36:]))
	return nil
}

// Encode writes a 40-byte SETUP frame (type and frame_length are implied;
// version and flags come from s) and returns 40.
func (s *Setup) Encode(b []byte) (int, error) {
	if len(b) < SetupHeaderLength {
		return 0, encodeErr(TypeSetup, SetupHeaderLength, len(b))
	}
	_ = b[39]
	s.put(b, TypeSetup, SetupHeaderLength)
	le.PutUint32(b[8:], uint32(s.TermOffset))
	le.PutUint32(b[12:], uint32(s.SessionID))
	le.PutUint32(b[16:], uint32(s.StreamID))
	le.PutUint32(b[20:], uint32(s.InitialTermID))
	le.PutUint32(b[24:], uint32(s.ActiveTermID))
	le.PutUint32(b[28:], uint32(s.TermLength))
	le.PutUint32(b[32:], uint32(s.MTU))
	le.PutUint32(b[36:], uint32(s.TTL))
	return SetupHeaderLength, nil
}

// StatusMessage is the SM a receiver sends to report its consumption position
// and window (aeron_status_message_header_t), optionally followed by a group
// tag for tagged flow control.
type StatusMessage struct {
	FrameHeader
	SessionID             int32
	StreamID              int32
	ConsumptionTermID     int32
	ConsumptionTermOffset int32
	ReceiverWindow        int32
	ReceiverID            int64
	GroupTag              int64 // valid when HasGroupTag
	HasGroupTag           bool
}

// Decode reads a status message at the start of b. Like
// aeron_udp_protocol_group_tag, the group tag is present when frame_length is
// exactly 44.
func (m *StatusMessage) Decode(b []byte) error {
	if err := m.FrameHeader.Decode(b); err != nil {
		return withType(err, TypeStatusMessage)
	}
	if err := m.check(b, TypeStatusMessage, StatusMessageHeaderLength, true); err != nil {
		return err
	}
	_ = b[35]
	m.SessionID = int32(le.Uint32(b[8:]))
	m.StreamID = int32(le.Uint32(b[12:]))
	m.ConsumptionTermID = int32(le.Uint32(b[16:]))
	m.ConsumptionTermOffset = int32(le.Uint32(b[20:]))
	m.ReceiverWindow = int32(le.Uint32(b[24:]))
	m.ReceiverID = int64(le.Uint64(b[28:]))
	m.HasGroupTag = m.FrameLength == StatusMessageGroupTagLength
	m.GroupTag = 0
	if m.HasGroupTag {
		m.GroupTag = int64(le.Uint64(b[statusMessageGroupTagOffset:]))
	}
	return nil
}

// EncodedLength is 36, or 44 with a group tag.
func (m *StatusMessage) EncodedLength() int {
	if m.HasGroupTag {
		return StatusMessageGroupTagLength
	}
	return StatusMessageHeaderLength
}

// Encode writes the status message (36 bytes, 44 with a group tag) and
// returns its length.
func (m *StatusMessage) Encode(b []byte) (int, error) {
	n := m.EncodedLength()
	if len(b) < n {
		return 0, encodeErr(TypeStatusMessage, n, len(b))
	}
	_ = b[35]
	m.put(b, TypeStatusMessage, int32(n))
	le.PutUint32(b[8:], uint32(m.SessionID))
	le.PutUint32(b[12:], uint32(m.StreamID))
	le.PutUint32(b[16:], uint32(m.ConsumptionTermID))
	le.PutUint32(b[20:], uint32(m.ConsumptionTermOffset))
	le.PutUint32(b[24:], uint32(m.ReceiverWindow))
	le.PutUint64(b[28:], uint64(m.ReceiverID))
	if m.HasGroupTag {
		le.PutUint64(b[statusMessageGroupTagOffset:], uint64(m.GroupTag))
	}
	return n, nil
}

// Nak asks the sender to retransmit a range of a term (aeron_nak_header_t).
type Nak struct {
	FrameHeader
	SessionID  int32
	StreamID   int32
	TermID     int32
	TermOffset int32
	Length     int32
}

// Decode reads a NAK at the start of b.
func (n *Nak) Decode(b []byte) error {
	if err := n.FrameHeader.Decode(b); err != nil {
		return withType(err, TypeNak)
	}
	if err := n.check(b, TypeNak, NakHeaderLength, true); err != nil {
		return err
	}
	_ = b[27]
	n.SessionID = int32(le.Uint32(b[8:]))
	n.StreamID = int32(le.Uint32(b[12:]))
	n.TermID = int32(le.Uint32(b[16:]))
	n.TermOffset = int32(le.Uint32(b[20:]))
	n.Length = int32(le.Uint32(b[24:]))
	return nil
}

// Encode writes a 28-byte NAK and returns 28.
func (n *Nak) Encode(b []byte) (int, error) {
	if len(b) < NakHeaderLength {
		return 0, encodeErr(TypeNak, NakHeaderLength, len(b))
	}
	_ = b[27]
	n.put(b, TypeNak, NakHeaderLength)
	le.PutUint32(b[8:], uint32(n.SessionID))
	le.PutUint32(b[12:], uint32(n.StreamID))
	le.PutUint32(b[16:], uint32(n.TermID))
	le.PutUint32(b[20:], uint32(n.TermOffset))
	le.PutUint32(b[24:], uint32(n.Length))
	return NakHeaderLength, nil
}

// RTTMeasurement is the RTTM frame used by congestion control to measure the
// round trip (aeron_rttm_header_t). A request carries RTTMFlagReply.
type RTTMeasurement struct {
	FrameHeader
	SessionID      int32
	StreamID       int32
	EchoTimestamp  int64 // ns
	ReceptionDelta int64 // ns
	ReceiverID     int64
}

// Decode reads an RTTM frame at the start of b.
func (r *RTTMeasurement) Decode(b []byte) error {
	if err := r.FrameHeader.Decode(b); err != nil {
		return withType(err, TypeRTTM)
	}
	if err := r.check(b, TypeRTTM, RTTMHeaderLength, true); err != nil {
		return err
	}
	_ = b[39]
	r.SessionID = int32(le.Uint32(b[8:]))
	r.StreamID = int32(le.Uint32(b[12:]))
	r.EchoTimestamp = int64(le.Uint64(b[16:]))
	r.ReceptionDelta = int64(le.Uint64(b[24:]))
	r.ReceiverID = int64(le.Uint64(b[32:]))
	return nil
}

// Encode writes a 40-byte RTTM frame and returns 40.
func (r *RTTMeasurement) Encode(b []byte) (int, error) {
	if len(b) < RTTMHeaderLength {
		return 0, encodeErr(TypeRTTM, RTTMHeaderLength, len(b))
	}
	_ = b[39]
	r.put(b, TypeRTTM, RTTMHeaderLength)
	le.PutUint32(b[8:], uint32(r.SessionID))
	le.PutUint32(b[12:], uint32(r.StreamID))
	le.PutUint64(b[16:], uint64(r.EchoTimestamp))
	le.PutUint64(b[24:], uint64(r.ReceptionDelta))
	le.PutUint64(b[32:], uint64(r.ReceiverID))
	return RTTMHeaderLength, nil
}

// ErrorFrame is the ERR frame a receiver sends instead of status messages
// when it rejected an image (aeron_error_t, ErrorFlyweight).
type ErrorFrame struct {
	FrameHeader
	SessionID  int32
	StreamID   int32
	ReceiverID int64
	GroupTag   int64 // valid when Flags has ErrorFlagGroupTag
	ErrorCode  int32
	Message    []byte // ASCII, at most ErrorMaxTextLength; aliases the decoded bytes
}

// Decode reads an ERR frame at the start of b; Message aliases b.
func (e *ErrorFrame) Decode(b []byte) error {
	if err := e.FrameHeader.Decode(b); err != nil {
		return withType(err, TypeError)
	}
	if err := e.check(b, TypeError, ErrorHeaderLength, true); err != nil {
		return err
	}
	_ = b[39]
	e.SessionID = int32(le.Uint32(b[8:]))
	e.StreamID = int32(le.Uint32(b[12:]))
	e.ReceiverID = int64(le.Uint64(b[16:]))
	e.GroupTag = int64(le.Uint64(b[24:]))
	e.ErrorCode = int32(le.Uint32(b[32:]))
	n := int32(le.Uint32(b[36:]))
	if n < 0 || n > ErrorMaxTextLength || int(n) > int(e.FrameLength)-ErrorHeaderLength {
		return decodeErr(TypeError, "error_length", ErrInvalid, "%d is not within 0..min(%d, frame_length %d - %d)", n, ErrorMaxTextLength, e.FrameLength, ErrorHeaderLength)
	}
	e.Message = b[errorTextOffset : errorTextOffset+int(n)]
	return nil
}

// EncodedLength is 40 plus the message length.
func (e *ErrorFrame) EncodedLength() int { return ErrorHeaderLength + len(e.Message) }

// Encode writes the ERR frame and returns its length. Messages longer than
// ErrorMaxTextLength are refused (Aeron truncates them before sending).
func (e *ErrorFrame) Encode(b []byte) (int, error) {
	if len(e.Message) > ErrorMaxTextLength {
		return 0, &Error{Op: "encode", Type: TypeError, Offset: -1, Field: "error_length", Reason: "exceeds 1023", Err: ErrInvalid}
	}
	n := e.EncodedLength()
	if len(b) < n {
		return 0, encodeErr(TypeError, n, len(b))
	}
	_ = b[39]
	e.put(b, TypeError, int32(n))
	le.PutUint32(b[8:], uint32(e.SessionID))
	le.PutUint32(b[12:], uint32(e.StreamID))
	le.PutUint64(b[16:], uint64(e.ReceiverID))
	le.PutUint64(b[24:], uint64(e.GroupTag))
	le.PutUint32(b[32:], uint32(e.ErrorCode))
	le.PutUint32(b[36:], uint32(len(e.Message)))
	copy(b[errorTextOffset:n], e.Message)
	return n, nil
}

// ResponseSetup tells a request publisher which session id its response
// publication uses (aeron_response_setup_header_t).
type ResponseSetup struct {
	FrameHeader
	SessionID         int32
	StreamID          int32
	ResponseSessionID int32
}

// Decode reads a RSP_SETUP frame at the start of b.
func (r *ResponseSetup) Decode(b []byte) error {
	if err := r.FrameHeader.Decode(b); err != nil {
		return withType(err, TypeResponseSetup)
	}
	if err := r.check(b, TypeResponseSetup, ResponseSetupHeaderLength, true); err != nil {
		return err
	}
	_ = b[19]
	r.SessionID = int32(le.Uint32(b[8:]))
	r.StreamID = int32(le.Uint32(b[12:]))
	r.ResponseSessionID = int32(le.Uint32(b[16:]))
	return nil
}

// Encode writes a 20-byte RSP_SETUP frame and returns 20.
func (r *ResponseSetup) Encode(b []byte) (int, error) {
	if len(b) < ResponseSetupHeaderLength {
		return 0, encodeErr(TypeResponseSetup, ResponseSetupHeaderLength, len(b))
	}
	_ = b[19]
	r.put(b, TypeResponseSetup, ResponseSetupHeaderLength)
	le.PutUint32(b[8:], uint32(r.SessionID))
	le.PutUint32(b[12:], uint32(r.StreamID))
	le.PutUint32(b[16:], uint32(r.ResponseSessionID))
	return ResponseSetupHeaderLength, nil
}

func withType(err error, t FrameType) error {
	if e, ok := err.(*Error); ok {
		e.Type = t
	}
	return err
}
