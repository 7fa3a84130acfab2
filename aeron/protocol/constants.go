package protocol

import "strconv"

// FrameType is the type field of the common frame header.
type FrameType int16

// Frame type ids, mirroring AERON_HDR_TYPE_* in aeron_udp_protocol.h.
const (
	TypePad           FrameType = 0x00
	TypeData          FrameType = 0x01
	TypeNak           FrameType = 0x02
	TypeStatusMessage FrameType = 0x03
	TypeError         FrameType = 0x04
	TypeSetup         FrameType = 0x05
	TypeRTTM          FrameType = 0x06
	TypeResolution    FrameType = 0x07
	// ATS (Aeron Transport Security) types, premium only; the ids follow the
	// C header (Java swaps the names of 0x09 and 0x0A).
	TypeATSData       FrameType = 0x08
	TypeATSSetup      FrameType = 0x09
	TypeATSSM         FrameType = 0x0A
	TypeResponseSetup FrameType = 0x0B
	TypeExt           FrameType = -1
)

var typeNames = map[FrameType]string{
	TypePad:           "PAD",
	TypeData:          "DATA",
	TypeNak:           "NAK",
	TypeStatusMessage: "SM",
	TypeError:         "ERR",
	TypeSetup:         "SETUP",
	TypeRTTM:          "RTTM",
	TypeResolution:    "RES",
	TypeATSData:       "ATS_DATA",
	TypeATSSetup:      "ATS_SETUP",
	TypeATSSM:         "ATS_SM",
	TypeResponseSetup: "RSP_SETUP",
	TypeExt:           "EXT",
}

// String returns the short name Aeron uses for the type (DATA, SM, NAK …) or
// the number in hex for an unknown type.
func (t FrameType) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return "0x" + strconv.FormatUint(uint64(uint16(t)), 16)
}

// Known reports whether t is one of the type ids Aeron defines.
func (t FrameType) Known() bool { _, ok := typeNames[t]; return ok }

// CurrentVersion is AERON_FRAME_HEADER_VERSION; receivers drop other versions.
const CurrentVersion = 0

// Frame lengths (header sizes) of each frame type, as sizeof() the C structs.
const (
	FrameHeaderLength            = 8
	DataHeaderLength             = 32
	SetupHeaderLength            = 40
	StatusMessageHeaderLength    = 36
	StatusMessageGroupTagLength  = 44 // status message followed by the optional int64 group tag
	NakHeaderLength              = 28
	RTTMHeaderLength             = 40
	ErrorHeaderLength            = 40
	ErrorMaxTextLength           = 1023
	ErrorMaxFrameLength          = ErrorHeaderLength + ErrorMaxTextLength
	ResponseSetupHeaderLength    = 20
	ResolutionEntryIPv4Length    = 14 // type, flags, port, age, 4-byte address, name length
	ResolutionEntryIPv6Length    = 26 // as IPv4 with a 16-byte address
	ResolutionEntryAlignment     = 8
	FrameAlignment               = 32       // AERON_LOGBUFFER_FRAME_ALIGNMENT
	MaxUDPPayloadLength          = 65504    // AERON_MAX_UDP_PAYLOAD_LENGTH
	MaxMessageLength             = 16 << 20 // AERON_FRAME_MAX_MESSAGE_LENGTH
	DefaultReservedValue         = 0
	OptionHeaderAlignment        = 4
	OptionHeaderIgnoreFlag       = 0x8000
	ResolutionTypeNameToIPv4     = 0x01
	ResolutionTypeNameToIPv6     = 0x02
	ResolutionFlagSelf           = 0x80
	ResolutionIPv4AddressLength  = 4
	ResolutionIPv6AddressLength  = 16
	statusMessageGroupTagOffset  = 36
	errorTextOffset              = 40
	resolutionEntryHeaderLength  = 8
	resolutionNameLengthFieldLen = 2
)

// Flags of the common header. Their meaning depends on the frame type.
const (
	// DATA and PAD.
	FlagBegin             uint8 = 0x80
	FlagEnd               uint8 = 0x40
	FlagEOS               uint8 = 0x20
	FlagRevoked           uint8 = 0x10 // Aeron 1.53: publication revoked
	FlagsUnfragmented     uint8 = FlagBegin | FlagEnd
	FlagsHeartbeat        uint8 = FlagsUnfragmented
	FlagsHeartbeatEOS     uint8 = FlagsUnfragmented | FlagEOS
	SMFlagSetup           uint8 = 0x80 // the receiver asks for a SETUP (all other fields 0)
	SMFlagEOS             uint8 = 0x40 // the receiver is going away
	SetupFlagSendResponse uint8 = 0x80 // the publication wants a RSP_SETUP (response channels)
	SetupFlagGroup        uint8 = 0x40 // group (multicast) semantics
	RTTMFlagReply         uint8 = 0x80 // please reply
	ErrorFlagGroupTag     uint8 = 0x08 // the group tag field is valid
)

// FlagNames renders flags of a frame of type t as the letters/words Aeron
// tools use, e.g. "B|E" for an unfragmented DATA frame, "" for none.
func FlagNames(t FrameType, flags uint8) string {
	var names [8]string
	n := 0
	add := func(bit uint8, name string) {
		if flags&bit != 0 {
			names[n] = name
			n++
			flags &^= bit
		}
	}
	switch t {
	case TypeData, TypePad, TypeATSData:
		add(FlagBegin, "B")
		add(FlagEnd, "E")
		add(FlagEOS, "EOS")
		add(FlagRevoked, "REVOKED")
	case TypeStatusMessage, TypeATSSM:
		add(SMFlagSetup, "SETUP")
		add(SMFlagEOS, "EOS")
	case TypeSetup, TypeATSSetup:
		add(SetupFlagSendResponse, "SEND_RESPONSE")
		add(SetupFlagGroup, "GROUP")
	case TypeRTTM:
		add(RTTMFlagReply, "REPLY")
	case TypeError:
		add(ErrorFlagGroupTag, "GROUP_TAG")
	case TypeResolution:
		// RES carries flags per entry, not in the frame header.
	}
	out := ""
	for i := 0; i < n; i++ {
		if i > 0 {
			out += "|"
		}
		out += names[i]
	}
	if flags != 0 {
		if out != "" {
			out += "|"
		}
		out += "0x" + strconv.FormatUint(uint64(flags), 16)
	}
	return out
}
