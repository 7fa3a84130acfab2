package cnc

import (
	"fmt"
	"net/netip"
)

// Control protocol message bodies (aeron_control_protocol.h, Java
// io.aeron.command.*Flyweight). Encoders append to dst and return it, so a
// caller can reuse one buffer; decoders check every length against the
// message and return a *CommandError naming the field that does not fit,
// which the driver answers with MALFORMED_COMMAND. The message types are
// plain values; decoded byte slices alias the input.

// CorrelatedHeaderLength is {int64 client_id, int64 correlation_id}.
const CorrelatedHeaderLength = 16

// CommandError is a command or response whose layout does not fit its
// declared length.
type CommandError struct {
	TypeID int32
	Reason string
}

func (e *CommandError) Error() string {
	name := MessageName(e.TypeID)
	if name == "" {
		name = fmt.Sprintf("message type 0x%x", e.TypeID)
	}
	return fmt.Sprintf("malformed %s: %s", name, e.Reason)
}

type reader struct {
	b      []byte
	typeID int32
	err    error
}

func (r *reader) fail(off int, n int, what string) {
	if r.err == nil {
		r.err = &CommandError{TypeID: r.typeID, Reason: fmt.Sprintf("%s needs bytes %d..%d, message has %d", what, off, off+n, len(r.b))}
	}
}

func (r *reader) i32(off int, what string) int32 {
	if off < 0 || off+4 > len(r.b) {
		r.fail(off, 4, what)
		return 0
	}
	return int32(le.Uint32(r.b[off:]))
}

func (r *reader) i64(off int, what string) int64 {
	if off < 0 || off+8 > len(r.b) {
		r.fail(off, 8, what)
		return 0
	}
	return int64(le.Uint64(r.b[off:]))
}

// bytes reads an int32 length at off and that many bytes after it.
func (r *reader) bytes(off int, what string) ([]byte, int) {
	n := r.i32(off, what+" length")
	if r.err != nil {
		return nil, 0
	}
	if n < 0 || int64(off)+4+int64(n) > int64(len(r.b)) {
		if r.err == nil {
			r.err = &CommandError{TypeID: r.typeID, Reason: fmt.Sprintf("%s length %d at offset %d runs past the %d-byte message", what, n, off, len(r.b))}
		}
		return nil, 0
	}
	return r.b[off+4 : off+4+int(n)], off + 4 + int(n)
}

func appendI32(dst []byte, v int32) []byte { return le.AppendUint32(dst, uint32(v)) }
func appendI64(dst []byte, v int64) []byte { return le.AppendUint64(dst, uint64(v)) }
func appendStr(dst []byte, s string) []byte {
	dst = appendI32(dst, int32(len(s)))
	return append(dst, s...)
}
func pad4(dst []byte) []byte {
	for len(dst)%4 != 0 {
		dst = append(dst, 0)
	}
	return dst
}

// Correlated is the header of every command.
type Correlated struct {
	ClientID, CorrelationID int64
}

// DecodeCorrelated reads the command header.
func DecodeCorrelated(typeID int32, b []byte) (Correlated, error) {
	r := reader{b: b, typeID: typeID}
	c := Correlated{ClientID: r.i64(0, "client_id"), CorrelationID: r.i64(8, "correlation_id")}
	return c, r.err
}

func appendCorrelated(dst []byte, c Correlated) []byte {
	return appendI64(appendI64(dst, c.ClientID), c.CorrelationID)
}

// PublicationCommand is ADD_PUBLICATION / ADD_EXCLUSIVE_PUBLICATION.
type PublicationCommand struct {
	Correlated
	StreamID int32
	Channel  string
}

// AppendPublicationCommand encodes a PublicationCommand.
func AppendPublicationCommand(dst []byte, c PublicationCommand) []byte {
	return appendStr(appendI32(appendCorrelated(dst, c.Correlated), c.StreamID), c.Channel)
}

// DecodePublicationCommand decodes ADD_PUBLICATION / ADD_EXCLUSIVE_PUBLICATION.
func DecodePublicationCommand(typeID int32, b []byte) (PublicationCommand, error) {
	r := reader{b: b, typeID: typeID}
	c := PublicationCommand{Correlated: Correlated{r.i64(0, "client_id"), r.i64(8, "correlation_id")}, StreamID: r.i32(16, "stream_id")}
	ch, _ := r.bytes(20, "channel")
	c.Channel = string(ch)
	return c, r.err
}

// RemoveCommand is REMOVE_PUBLICATION / REMOVE_SUBSCRIPTION / REMOVE_COUNTER;
// Flags is the 1.53 REMOVE_PUBLICATION flags field (bit 0: revoke), 0 when
// the 1.48 24-byte form was sent.
type RemoveCommand struct {
	Correlated
	RegistrationID int64
	Flags          int64
}

// RemovePublicationFlagRevoke in a REMOVE_PUBLICATION's flags revokes the
// publication (AERON_COMMAND_REMOVE_PUBLICATION_FLAG_REVOKE).
const RemovePublicationFlagRevoke = 0x1

// AppendRemoveCommand encodes the 24-byte form, or the 32-byte form with
// flags when c has some.
func AppendRemoveCommand(dst []byte, c RemoveCommand) []byte {
	dst = appendI64(appendCorrelated(dst, c.Correlated), c.RegistrationID)
	if c.Flags != 0 {
		dst = appendI64(dst, c.Flags)
	}
	return dst
}

// DecodeRemoveCommand accepts the 24- and 32-byte forms.
func DecodeRemoveCommand(typeID int32, b []byte) (RemoveCommand, error) {
	r := reader{b: b, typeID: typeID}
	c := RemoveCommand{Correlated: Correlated{r.i64(0, "client_id"), r.i64(8, "correlation_id")}, RegistrationID: r.i64(16, "registration_id")}
	if len(b) >= 32 {
		c.Flags = r.i64(24, "flags")
	}
	return c, r.err
}

// SubscriptionCommand is ADD_SUBSCRIPTION.
type SubscriptionCommand struct {
	Correlated
	RegistrationCorrelationID int64
	StreamID                  int32
	Channel                   string
}

// AppendSubscriptionCommand encodes a SubscriptionCommand.
func AppendSubscriptionCommand(dst []byte, c SubscriptionCommand) []byte {
	dst = appendI64(appendCorrelated(dst, c.Correlated), c.RegistrationCorrelationID)
	return appendStr(appendI32(dst, c.StreamID), c.Channel)
}

// DecodeSubscriptionCommand decodes ADD_SUBSCRIPTION.
func DecodeSubscriptionCommand(typeID int32, b []byte) (SubscriptionCommand, error) {
	r := reader{b: b, typeID: typeID}
	c := SubscriptionCommand{Correlated: Correlated{r.i64(0, "client_id"), r.i64(8, "correlation_id")},
		RegistrationCorrelationID: r.i64(16, "registration_correlation_id"), StreamID: r.i32(24, "stream_id")}
	ch, _ := r.bytes(28, "channel")
	c.Channel = string(ch)
	return c, r.err
}

// CounterCommand is ADD_COUNTER, and ADD_STATIC_COUNTER when Static (with
// its RegistrationID).
type CounterCommand struct {
	Correlated
	Static         bool
	RegistrationID int64
	TypeID         int32
	Key            []byte
	Label          string
}

// AppendCounterCommand encodes ADD_COUNTER or ADD_STATIC_COUNTER.
func AppendCounterCommand(dst []byte, c CounterCommand) []byte {
	dst = appendCorrelated(dst, c.Correlated)
	if c.Static {
		dst = appendI64(dst, c.RegistrationID)
	}
	dst = appendI32(dst, c.TypeID)
	dst = appendI32(dst, int32(len(c.Key)))
	dst = pad4(append(dst, c.Key...))
	return appendStr(dst, c.Label)
}

// DecodeCounterCommand decodes ADD_COUNTER or ADD_STATIC_COUNTER; Key
// aliases b.
func DecodeCounterCommand(typeID int32, b []byte) (CounterCommand, error) {
	r := reader{b: b, typeID: typeID}
	c := CounterCommand{Correlated: Correlated{r.i64(0, "client_id"), r.i64(8, "correlation_id")}}
	off := 16
	if typeID == CmdAddStaticCounter {
		c.Static = true
		c.RegistrationID = r.i64(16, "registration_id")
		off = 24
	}
	c.TypeID = r.i32(off, "type_id")
	key, end := r.bytes(off+4, "key")
	c.Key = key
	if r.err == nil {
		label, _ := r.bytes((end+3)&^3, "label")
		c.Label = string(label)
	}
	return c, r.err
}

// TerminateCommand is TERMINATE_DRIVER.
type TerminateCommand struct {
	Correlated
	Token []byte
}

// AppendTerminateCommand encodes TERMINATE_DRIVER.
func AppendTerminateCommand(dst []byte, c TerminateCommand) []byte {
	return appendStr(appendCorrelated(dst, c.Correlated), string(c.Token))
}

// DecodeTerminateCommand decodes TERMINATE_DRIVER; Token aliases b.
func DecodeTerminateCommand(typeID int32, b []byte) (TerminateCommand, error) {
	r := reader{b: b, typeID: typeID}
	c := TerminateCommand{Correlated: Correlated{r.i64(0, "client_id"), r.i64(8, "correlation_id")}}
	c.Token, _ = r.bytes(16, "token")
	return c, r.err
}

// DestinationCommand is ADD/REMOVE_DESTINATION and ADD/REMOVE_RCV_DESTINATION.
type DestinationCommand struct {
	Correlated
	RegistrationID int64
	Channel        string
}

// AppendDestinationCommand encodes a DestinationCommand.
func AppendDestinationCommand(dst []byte, c DestinationCommand) []byte {
	return appendStr(appendI64(appendCorrelated(dst, c.Correlated), c.RegistrationID), c.Channel)
}

// DecodeDestinationCommand decodes a DestinationCommand.
func DecodeDestinationCommand(typeID int32, b []byte) (DestinationCommand, error) {
	r := reader{b: b, typeID: typeID}
	c := DestinationCommand{Correlated: Correlated{r.i64(0, "client_id"), r.i64(8, "correlation_id")}, RegistrationID: r.i64(16, "registration_id")}
	ch, _ := r.bytes(24, "channel")
	c.Channel = string(ch)
	return c, r.err
}

// RejectImageCommand is REJECT_IMAGE.
type RejectImageCommand struct {
	Correlated
	ImageCorrelationID, Position int64
	Reason                       string
}

// AppendRejectImageCommand encodes REJECT_IMAGE: client and correlation
// ids, the image's correlation id at 16, position at 24, the reason's
// length at 32 and its text at 36.
func AppendRejectImageCommand(dst []byte, c RejectImageCommand) []byte {
	dst = appendI64(appendI64(dst, c.ClientID), c.CorrelationID)
	dst = appendI64(appendI64(dst, c.ImageCorrelationID), c.Position)
	return appendStr(dst, c.Reason)
}

// DecodeRejectImageCommand decodes REJECT_IMAGE.
func DecodeRejectImageCommand(typeID int32, b []byte) (RejectImageCommand, error) {
	r := reader{b: b, typeID: typeID}
	c := RejectImageCommand{Correlated: Correlated{r.i64(0, "client_id"), r.i64(8, "correlation_id")},
		ImageCorrelationID: r.i64(16, "image_correlation_id"), Position: r.i64(24, "position")}
	reason, _ := r.bytes(32, "reason")
	c.Reason = string(reason)
	return c, r.err
}

// SessionIDCommand is GET_NEXT_AVAILABLE_SESSION_ID (1.53).
type SessionIDCommand struct {
	Correlated
	StreamID int32
}

// AppendSessionIDCommand encodes GET_NEXT_AVAILABLE_SESSION_ID.
func AppendSessionIDCommand(dst []byte, c SessionIDCommand) []byte {
	return appendI32(appendCorrelated(dst, c.Correlated), c.StreamID)
}

// DecodeSessionIDCommand decodes GET_NEXT_AVAILABLE_SESSION_ID.
func DecodeSessionIDCommand(typeID int32, b []byte) (SessionIDCommand, error) {
	r := reader{b: b, typeID: typeID}
	c := SessionIDCommand{Correlated: Correlated{r.i64(0, "client_id"), r.i64(8, "correlation_id")}, StreamID: r.i32(16, "stream_id")}
	return c, r.err
}

// Responses.

// ErrorResponse is ON_ERROR.
type ErrorResponse struct {
	OffendingCorrelationID int64
	Code                   int32
	Message                string
}

// AppendErrorResponse encodes ON_ERROR.
func AppendErrorResponse(dst []byte, e ErrorResponse) []byte {
	return appendStr(appendI32(appendI64(dst, e.OffendingCorrelationID), e.Code), e.Message)
}

// DecodeErrorResponse decodes ON_ERROR.
func DecodeErrorResponse(b []byte) (ErrorResponse, error) {
	r := reader{b: b, typeID: RspOnError}
	e := ErrorResponse{OffendingCorrelationID: r.i64(0, "offending_correlation_id"), Code: r.i32(8, "error_code")}
	m, _ := r.bytes(12, "message")
	e.Message = string(m)
	return e, r.err
}

// PublicationError is ON_PUBLICATION_ERROR (aeron_publication_error_t):
// a receiver sent an ERR frame to a network publication.
type PublicationError struct {
	RegistrationID, DestinationRegistrationID int64
	SessionID, StreamID                       int32
	ReceiverID, GroupTag                      int64
	Source                                    netip.AddrPort // the receiver's address (invalid: none)
	ErrorCode                                 int32
	Message                                   string
}

// Address types of ON_PUBLICATION_ERROR (AERON_RESPONSE_ADDRESS_TYPE_*).
const (
	AddressTypeIPv4 = 1
	AddressTypeIPv6 = 2
)

// AppendPublicationError encodes ON_PUBLICATION_ERROR: ids at 0 and 8,
// session 16, stream 20, receiver id 24, group tag 32, address type 40
// (int16), port 42 (uint16, host order), address 44 (16 bytes), error code
// 60, message length 64, message 68.
func AppendPublicationError(dst []byte, e PublicationError) []byte {
	dst = appendI64(appendI64(dst, e.RegistrationID), e.DestinationRegistrationID)
	dst = appendI32(appendI32(dst, e.SessionID), e.StreamID)
	dst = appendI64(appendI64(dst, e.ReceiverID), e.GroupTag)
	var addr [16]byte
	typ := int16(0)
	a := e.Source.Addr()
	switch {
	case a.Is4() || a.Is4In6():
		typ = AddressTypeIPv4
		v4 := a.Unmap().As4()
		copy(addr[:], v4[:])
	case a.Is6():
		typ = AddressTypeIPv6
		addr = a.As16()
	}
	port := uint16(0)
	if typ != 0 {
		port = e.Source.Port()
	}
	dst = le.AppendUint16(dst, uint16(typ))
	dst = le.AppendUint16(dst, port)
	dst = append(dst, addr[:]...)
	dst = appendI32(dst, e.ErrorCode)
	return appendStr(dst, e.Message)
}

// DecodePublicationError decodes ON_PUBLICATION_ERROR.
func DecodePublicationError(b []byte) (PublicationError, error) {
	r := reader{b: b, typeID: RspOnPublicationError}
	e := PublicationError{RegistrationID: r.i64(0, "registration_id"), DestinationRegistrationID: r.i64(8, "destination_registration_id"),
		SessionID: r.i32(16, "session_id"), StreamID: r.i32(20, "stream_id"), ReceiverID: r.i64(24, "receiver_id"),
		GroupTag: r.i64(32, "group_tag"), ErrorCode: r.i32(60, "error_code")}
	if r.err == nil {
		typ := int16(le.Uint16(b[40:]))
		port := le.Uint16(b[42:])
		switch typ {
		case AddressTypeIPv4:
			e.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[44:48])), port)
		case AddressTypeIPv6:
			e.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[44:60])), port)
		}
	}
	m, _ := r.bytes(64, "error_message")
	e.Message = string(m)
	return e, r.err
}

// PublicationReady is ON_PUBLICATION_READY / ON_EXCLUSIVE_PUBLICATION_READY.
type PublicationReady struct {
	CorrelationID, RegistrationID int64
	SessionID, StreamID           int32
	PublicationLimitCounterID     int32
	ChannelStatusIndicatorID      int32
	LogFile                       string
}

// AppendPublicationReady encodes a PublicationReady.
func AppendPublicationReady(dst []byte, p PublicationReady) []byte {
	dst = appendI64(appendI64(dst, p.CorrelationID), p.RegistrationID)
	dst = appendI32(appendI32(dst, p.SessionID), p.StreamID)
	dst = appendI32(appendI32(dst, p.PublicationLimitCounterID), p.ChannelStatusIndicatorID)
	return appendStr(dst, p.LogFile)
}

// DecodePublicationReady decodes a PublicationReady.
func DecodePublicationReady(typeID int32, b []byte) (PublicationReady, error) {
	r := reader{b: b, typeID: typeID}
	p := PublicationReady{CorrelationID: r.i64(0, "correlation_id"), RegistrationID: r.i64(8, "registration_id"),
		SessionID: r.i32(16, "session_id"), StreamID: r.i32(20, "stream_id"),
		PublicationLimitCounterID: r.i32(24, "publication_limit_counter_id"), ChannelStatusIndicatorID: r.i32(28, "channel_status_indicator_id")}
	f, _ := r.bytes(32, "log_file")
	p.LogFile = string(f)
	return p, r.err
}

// ImageReady is ON_AVAILABLE_IMAGE.
type ImageReady struct {
	CorrelationID              int64
	SessionID, StreamID        int32
	SubscriptionRegistrationID int64
	SubscriberPositionID       int32
	LogFile                    string
	SourceIdentity             string
}

// AppendImageReady encodes ON_AVAILABLE_IMAGE; the source identity starts
// at a 4-aligned offset.
func AppendImageReady(dst []byte, m ImageReady) []byte {
	start := len(dst)
	dst = appendI32(appendI32(appendI64(dst, m.CorrelationID), m.SessionID), m.StreamID)
	dst = appendI32(appendI64(dst, m.SubscriptionRegistrationID), m.SubscriberPositionID)
	dst = appendStr(dst, m.LogFile)
	for (len(dst)-start)%4 != 0 {
		dst = append(dst, 0)
	}
	return appendStr(dst, m.SourceIdentity)
}

// DecodeImageReady decodes ON_AVAILABLE_IMAGE.
func DecodeImageReady(b []byte) (ImageReady, error) {
	r := reader{b: b, typeID: RspOnAvailableImage}
	m := ImageReady{CorrelationID: r.i64(0, "correlation_id"), SessionID: r.i32(8, "session_id"), StreamID: r.i32(12, "stream_id"),
		SubscriptionRegistrationID: r.i64(16, "subscription_registration_id"), SubscriberPositionID: r.i32(24, "subscriber_position_id")}
	f, end := r.bytes(28, "log_file")
	m.LogFile = string(f)
	if r.err == nil {
		s, _ := r.bytes((end+3)&^3, "source_identity")
		m.SourceIdentity = string(s)
	}
	return m, r.err
}

// ImageUnavailable is ON_UNAVAILABLE_IMAGE.
type ImageUnavailable struct {
	CorrelationID, SubscriptionRegistrationID int64
	StreamID                                  int32
	Channel                                   string
}

// AppendImageUnavailable encodes ON_UNAVAILABLE_IMAGE.
func AppendImageUnavailable(dst []byte, m ImageUnavailable) []byte {
	dst = appendI64(appendI64(dst, m.CorrelationID), m.SubscriptionRegistrationID)
	return appendStr(appendI32(dst, m.StreamID), m.Channel)
}

// DecodeImageUnavailable decodes ON_UNAVAILABLE_IMAGE.
func DecodeImageUnavailable(b []byte) (ImageUnavailable, error) {
	r := reader{b: b, typeID: RspOnUnavailableImage}
	m := ImageUnavailable{CorrelationID: r.i64(0, "correlation_id"), SubscriptionRegistrationID: r.i64(8, "subscription_registration_id"), StreamID: r.i32(16, "stream_id")}
	ch, _ := r.bytes(20, "channel")
	m.Channel = string(ch)
	return m, r.err
}

// AppendIDAndCounter encodes the {int64, int32} responses:
// ON_SUBSCRIPTION_READY, ON_COUNTER_READY, ON_STATIC_COUNTER,
// ON_UNAVAILABLE_COUNTER and ON_NEXT_AVAILABLE_SESSION_ID.
func AppendIDAndCounter(dst []byte, id int64, v int32) []byte {
	return appendI32(appendI64(dst, id), v)
}

// DecodeIDAndCounter decodes the {int64, int32} responses.
func DecodeIDAndCounter(typeID int32, b []byte) (int64, int32, error) {
	r := reader{b: b, typeID: typeID}
	id, v := r.i64(0, "correlation_id"), r.i32(8, "value")
	return id, v, r.err
}

// AppendID encodes ON_OPERATION_SUCCESS and ON_CLIENT_TIMEOUT.
func AppendID(dst []byte, id int64) []byte { return appendI64(dst, id) }

// DecodeID decodes ON_OPERATION_SUCCESS and ON_CLIENT_TIMEOUT.
func DecodeID(typeID int32, b []byte) (int64, error) {
	r := reader{b: b, typeID: typeID}
	id := r.i64(0, "id")
	return id, r.err
}
