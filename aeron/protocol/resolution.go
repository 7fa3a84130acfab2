package protocol

// ResolutionEntry is one entry of a RES frame, the driver name resolution
// protocol between UDP neighbours (aeron_resolution_header_ipv4/6_t, packed
// to 1 byte; each entry is padded to 8 bytes).
type ResolutionEntry struct {
	ResType int8  // ResolutionTypeNameToIPv4 or ResolutionTypeNameToIPv6
	Flags   uint8 // ResolutionFlagSelf
	UDPPort uint16
	AgeInMs int32
	Address []byte // 4 or 16 bytes; aliases the decoded bytes
	Name    []byte // aliases the decoded bytes
}

func resolutionAddressLength(t int8) int {
	switch t {
	case ResolutionTypeNameToIPv4:
		return ResolutionIPv4AddressLength
	case ResolutionTypeNameToIPv6:
		return ResolutionIPv6AddressLength
	}
	return -1
}

// Decode reads an entry at the start of b and returns the space it takes
// (aligned to 8, mirrors aeron_res_header_entry_length).
func (e *ResolutionEntry) Decode(b []byte) (int, error) {
	if len(b) < resolutionEntryHeaderLength {
		return 0, decodeErr(TypeResolution, "", ErrTruncated, "entry needs %d bytes, have %d", resolutionEntryHeaderLength, len(b))
	}
	e.ResType = int8(b[0])
	e.Flags = b[1]
	e.UDPPort = le.Uint16(b[2:])
	e.AgeInMs = int32(le.Uint32(b[4:]))
	al := resolutionAddressLength(e.ResType)
	if al < 0 {
		return 0, decodeErr(TypeResolution, "res_type", ErrInvalid, "%d is neither IPv4 (1) nor IPv6 (2)", e.ResType)
	}
	fixed := resolutionEntryHeaderLength + al + resolutionNameLengthFieldLen
	if len(b) < fixed {
		return 0, decodeErr(TypeResolution, "", ErrTruncated, "entry needs %d bytes, have %d", fixed, len(b))
	}
	nameLen := int(int16(le.Uint16(b[fixed-2:])))
	if nameLen < 0 {
		return 0, decodeErr(TypeResolution, "name_length", ErrInvalid, "%d is negative", nameLen)
	}
	n := Align(fixed+nameLen, ResolutionEntryAlignment)
	if len(b) < fixed+nameLen {
		return 0, decodeErr(TypeResolution, "name_length", ErrTruncated, "%d exceeds the %d bytes left", nameLen, len(b)-fixed)
	}
	e.Address = b[resolutionEntryHeaderLength : resolutionEntryHeaderLength+al]
	e.Name = b[fixed : fixed+nameLen]
	return min(n, len(b)), nil
}

// EncodedLength is the aligned length of the entry.
func (e *ResolutionEntry) EncodedLength() int {
	al := resolutionAddressLength(e.ResType)
	if al < 0 {
		al = 0
	}
	return Align(resolutionEntryHeaderLength+al+resolutionNameLengthFieldLen+len(e.Name), ResolutionEntryAlignment)
}

// Encode writes the entry, zero padded to 8 bytes, and returns its length.
func (e *ResolutionEntry) Encode(b []byte) (int, error) {
	al := resolutionAddressLength(e.ResType)
	if al < 0 || len(e.Address) != al {
		return 0, &Error{Op: "encode", Type: TypeResolution, Offset: -1, Field: "address", Reason: "length does not match res_type", Err: ErrInvalid}
	}
	if len(e.Name) > 0x7fff {
		return 0, &Error{Op: "encode", Type: TypeResolution, Offset: -1, Field: "name_length", Reason: "exceeds 32767", Err: ErrInvalid}
	}
	n := e.EncodedLength()
	if len(b) < n {
		return 0, encodeErr(TypeResolution, n, len(b))
	}
	b[0] = byte(e.ResType)
	b[1] = e.Flags
	le.PutUint16(b[2:], e.UDPPort)
	le.PutUint32(b[4:], uint32(e.AgeInMs))
	copy(b[resolutionEntryHeaderLength:], e.Address)
	fixed := resolutionEntryHeaderLength + al + resolutionNameLengthFieldLen
	le.PutUint16(b[fixed-2:], uint16(len(e.Name)))
	copy(b[fixed:], e.Name)
	clear(b[fixed+len(e.Name) : n])
	return n, nil
}

// Resolution is the RES frame header; its entries follow up to frame_length.
type Resolution struct {
	FrameHeader
}

// Decode reads the RES header at the start of b and checks frame_length
// against the bytes present.
func (r *Resolution) Decode(b []byte) error {
	if err := r.FrameHeader.Decode(b); err != nil {
		return withType(err, TypeResolution)
	}
	return r.check(b, TypeResolution, FrameHeaderLength, true)
}

// NextResolutionEntry decodes the entry of the RES frame at offset off
// (starting at FrameHeaderLength) and returns it with the offset of the next
// one; it is done when the returned offset reaches len(frame).
func NextResolutionEntry(frame []byte, off int) (ResolutionEntry, int, error) {
	var e ResolutionEntry
	if off < FrameHeaderLength || off > len(frame) {
		return e, off, decodeErr(TypeResolution, "", ErrInvalid, "entry offset %d outside %d..%d", off, FrameHeaderLength, len(frame))
	}
	n, err := e.Decode(frame[off:])
	if err != nil {
		return e, off, withOffset(err, off)
	}
	return e, off + n, nil
}
