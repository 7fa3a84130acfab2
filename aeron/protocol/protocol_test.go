package protocol

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFrameTypeAndFlags(t *testing.T) {
	require.Equal(t, "SM", TypeStatusMessage.String())
	require.Equal(t, "RSP_SETUP", TypeResponseSetup.String())
	require.Equal(t, "EXT", TypeExt.String())
	require.Equal(t, "0x7f", FrameType(0x7f).String())
	require.True(t, TypeATSSM.Known())
	require.False(t, FrameType(0x0c).Known())

	require.Equal(t, "B|E", FlagNames(TypeData, 0xc0))
	require.Equal(t, "B|E|EOS", FlagNames(TypeData, 0xe0))
	require.Equal(t, "E|REVOKED", FlagNames(TypePad, 0x50))
	require.Equal(t, "", FlagNames(TypeData, 0))
	require.Equal(t, "SETUP", FlagNames(TypeStatusMessage, 0x80))
	require.Equal(t, "EOS|0x1", FlagNames(TypeStatusMessage, 0x41))
	require.Equal(t, "SEND_RESPONSE|GROUP", FlagNames(TypeSetup, 0xc0))
	require.Equal(t, "REPLY", FlagNames(TypeRTTM, 0x80))
	require.Equal(t, "GROUP_TAG", FlagNames(TypeError, 0x08))
	require.Equal(t, "0x80", FlagNames(TypeNak, 0x80))
}

func TestAlignment(t *testing.T) {
	require.Equal(t, 0, Align(0, 32))
	require.Equal(t, 32, Align(1, 32))
	require.Equal(t, 288, Align(288, 32))
	require.Equal(t, int32(320), AlignedFrameLength(289))
	require.True(t, IsAligned(65376, FrameAlignment))
	require.False(t, IsAligned(36, FrameAlignment))
	require.True(t, IsPowerOfTwo(65536))
	require.False(t, IsPowerOfTwo(0))
	require.False(t, IsPowerOfTwo(96))
	require.Equal(t, 8192, ComputeMaxMessageLength(64<<10))
	require.Equal(t, MaxMessageLength, ComputeMaxMessageLength(1<<30))
	require.Equal(t, 1376, MaxPayloadLength(1408))
}

func TestRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	i32 := func() int32 { return int32(rng.Uint32()) }
	i64 := func() int64 { return int64(rng.Uint64()) }
	buf := make([]byte, 2048)
	for iter := 0; iter < 200; iter++ {
		flags := uint8(rng.Uint32())

		s := Setup{FrameHeader: FrameHeader{Flags: flags}, TermOffset: i32(), SessionID: i32(), StreamID: i32(),
			InitialTermID: i32(), ActiveTermID: i32(), TermLength: i32(), MTU: i32(), TTL: i32()}
		n, err := s.Encode(buf)
		require.NoError(t, err)
		require.Equal(t, SetupHeaderLength, n)
		var s2 Setup
		require.NoError(t, s2.Decode(buf[:n]))
		s.FrameLength, s.Type = SetupHeaderLength, TypeSetup
		require.Equal(t, s, s2)

		m := StatusMessage{FrameHeader: FrameHeader{Flags: flags}, SessionID: i32(), StreamID: i32(), ConsumptionTermID: i32(),
			ConsumptionTermOffset: i32(), ReceiverWindow: i32(), ReceiverID: i64(), HasGroupTag: iter%2 == 0}
		if m.HasGroupTag {
			m.GroupTag = i64()
		}
		n, err = m.Encode(buf)
		require.NoError(t, err)
		var m2 StatusMessage
		require.NoError(t, m2.Decode(buf[:n]))
		m.FrameLength, m.Type = int32(n), TypeStatusMessage
		require.Equal(t, m, m2)

		k := Nak{FrameHeader: FrameHeader{Flags: flags}, SessionID: i32(), StreamID: i32(), TermID: i32(), TermOffset: i32(), Length: i32()}
		n, err = k.Encode(buf)
		require.NoError(t, err)
		var k2 Nak
		require.NoError(t, k2.Decode(buf[:n]))
		k.FrameLength, k.Type = NakHeaderLength, TypeNak
		require.Equal(t, k, k2)

		r := RTTMeasurement{FrameHeader: FrameHeader{Flags: flags}, SessionID: i32(), StreamID: i32(), EchoTimestamp: i64(), ReceptionDelta: i64(), ReceiverID: i64()}
		n, err = r.Encode(buf)
		require.NoError(t, err)
		var r2 RTTMeasurement
		require.NoError(t, r2.Decode(buf[:n]))
		r.FrameLength, r.Type = RTTMHeaderLength, TypeRTTM
		require.Equal(t, r, r2)

		rs := ResponseSetup{FrameHeader: FrameHeader{Flags: flags}, SessionID: i32(), StreamID: i32(), ResponseSessionID: i32()}
		n, err = rs.Encode(buf)
		require.NoError(t, err)
		var rs2 ResponseSetup
		require.NoError(t, rs2.Decode(buf[:n]))
		rs.FrameLength, rs.Type = ResponseSetupHeaderLength, TypeResponseSetup
		require.Equal(t, rs, rs2)

		msg := make([]byte, rng.IntN(ErrorMaxTextLength+1))
		for j := range msg {
			msg[j] = byte('a' + rng.IntN(26))
		}
		e := ErrorFrame{FrameHeader: FrameHeader{Flags: flags}, SessionID: i32(), StreamID: i32(), ReceiverID: i64(), GroupTag: i64(), ErrorCode: i32(), Message: msg}
		n, err = e.Encode(buf)
		require.NoError(t, err)
		require.Equal(t, ErrorHeaderLength+len(msg), n)
		var e2 ErrorFrame
		require.NoError(t, e2.Decode(buf[:n]))
		e.FrameLength, e.Type = int32(n), TypeError
		if len(msg) == 0 {
			e.Message = buf[40:40]
		}
		require.Equal(t, e, e2)

		payload := make([]byte, rng.IntN(1400))
		d := DataHeader{FrameHeader: FrameHeader{Flags: flags}, TermOffset: int32(rng.IntN(1<<20)) &^ 31, SessionID: i32(), StreamID: i32(), TermID: i32(), ReservedValue: i64()}
		n, err = d.EncodeFrame(buf, payload)
		require.NoError(t, err)
		var d2 DataHeader
		p2, err := d2.DecodeFrame(buf[:n])
		require.NoError(t, err)
		require.Equal(t, d, d2)
		require.Equal(t, payload, p2)
	}
}

func TestResolutionEntries(t *testing.T) {
	frame := make([]byte, 256)
	off := FrameHeaderLength
	entries := []ResolutionEntry{
		{ResType: ResolutionTypeNameToIPv4, Flags: ResolutionFlagSelf, UDPPort: 8050, AgeInMs: 12, Address: []byte{10, 0, 0, 1}, Name: []byte("node-a")},
		{ResType: ResolutionTypeNameToIPv6, UDPPort: 9000, AgeInMs: -1, Address: make([]byte, 16), Name: []byte("a-much-longer-name")},
		{ResType: ResolutionTypeNameToIPv4, Address: []byte{1, 2, 3, 4}, Name: []byte{}},
	}
	for i := range entries {
		n, err := entries[i].Encode(frame[off:])
		require.NoError(t, err)
		require.Zero(t, n%ResolutionEntryAlignment)
		off += n
	}
	h := FrameHeader{FrameLength: int32(off), Type: TypeResolution}
	_, err := h.Encode(frame)
	require.NoError(t, err)
	frame = frame[:off]
	var res Resolution
	require.NoError(t, res.Decode(frame))
	i := 0
	for next := FrameHeaderLength; next < len(frame); i++ {
		var e ResolutionEntry
		e, next, err = NextResolutionEntry(frame, next)
		require.NoError(t, err)
		require.Equal(t, entries[i], e)
	}
	require.Equal(t, 3, i)
	// An entry whose name runs past the frame.
	bad := append([]byte(nil), frame...)
	le.PutUint16(bad[FrameHeaderLength+12:], 500)
	_, _, err = NextResolutionEntry(bad, FrameHeaderLength)
	require.ErrorContains(t, err, "RES frame at offset 8: name_length 500 exceeds")
	bad[FrameHeaderLength] = 3
	_, _, err = NextResolutionEntry(bad, FrameHeaderLength)
	require.ErrorContains(t, err, "res_type 3 is neither IPv4 (1) nor IPv6 (2)")
	_, err = (&ResolutionEntry{ResType: ResolutionTypeNameToIPv4, Address: []byte{1}}).Encode(frame)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestDecodeErrors(t *testing.T) {
	sm := make([]byte, 44)
	m := StatusMessage{SessionID: 1, HasGroupTag: true, GroupTag: 77}
	_, err := m.Encode(sm)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		mutate func(b []byte) []byte
		want   string
		cause  error
	}{
		{"truncated", func(b []byte) []byte { return b[:20] }, "decode SM frame: needs 36 bytes, have 20", ErrTruncated},
		{"header-only", func(b []byte) []byte { return b[:5] }, "header needs 8 bytes, have 5", ErrTruncated},
		{"version", func(b []byte) []byte { b[4] = 1; return b }, "version 1, want 0", ErrVersion},
		{"type", func(b []byte) []byte { b[6] = 2; return b }, "type is NAK (2)", ErrInvalid},
		{"short-length", func(b []byte) []byte { le.PutUint32(b, 30); return b }, "frame_length 30 is less than the 36-byte SM header", ErrInvalid},
		{"long-length", func(b []byte) []byte { le.PutUint32(b, 100); return b }, "frame_length 100 exceeds the 44 bytes present", ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(append([]byte(nil), sm...))
			var got StatusMessage
			err := got.Decode(b)
			require.ErrorContains(t, err, tc.want)
			require.ErrorIs(t, err, tc.cause)
			var pe *Error
			require.True(t, errors.As(err, &pe))
		})
	}
	// A 40-byte SM has no group tag (aeron_udp_protocol_group_tag wants exactly 44).
	b := append([]byte(nil), sm...)
	le.PutUint32(b, 40)
	var got StatusMessage
	require.NoError(t, got.Decode(b))
	require.False(t, got.HasGroupTag)
	le.PutUint32(b, 44)
	require.NoError(t, got.Decode(b))
	require.True(t, got.HasGroupTag)
	require.Equal(t, int64(77), got.GroupTag)

	var d DataHeader
	hdr := make([]byte, 32)
	_, _ = (&DataHeader{FrameHeader: FrameHeader{FrameLength: 64, Type: TypeData}, TermOffset: 33}).Encode(hdr)
	require.ErrorContains(t, d.Decode(hdr), "term_offset 33 is not a non-negative multiple of 32")
	_, _ = (&DataHeader{FrameHeader: FrameHeader{FrameLength: 20, Type: TypeData}}).Encode(hdr)
	require.ErrorContains(t, d.Decode(hdr), "DATA frame: frame_length 20 is less than the 32-byte header")
	_, _ = (&DataHeader{FrameHeader: FrameHeader{FrameLength: 0, Type: TypePad}}).Encode(hdr)
	require.ErrorContains(t, d.Decode(hdr), "PAD frame: frame_length 0 is less than")
	_, _ = (&DataHeader{FrameHeader: FrameHeader{FrameLength: 64, Type: TypeSetup}}).Encode(hdr)
	require.ErrorContains(t, d.Decode(hdr), "type is SETUP (5), want DATA or PAD")
	_, _ = (&DataHeader{FrameHeader: FrameHeader{FrameLength: 64, Type: TypeData}}).Encode(hdr)
	_, err = d.DecodeFrame(hdr)
	require.ErrorContains(t, err, "frame_length 64 exceeds the 32 bytes present")
	require.NoError(t, d.Decode(hdr), "the header alone is fine: the payload may still be arriving")

	e := make([]byte, 48)
	_, _ = (&ErrorFrame{Message: []byte("12345678")}).Encode(e)
	le.PutUint32(e[36:], 9)
	require.ErrorContains(t, (&ErrorFrame{}).Decode(e), "error_length 9 is not within")
	_, err = (&ErrorFrame{Message: make([]byte, 1024)}).Encode(make([]byte, 2000))
	require.ErrorIs(t, err, ErrInvalid)
}

func TestEncodeShortBuffer(t *testing.T) {
	small := make([]byte, 10)
	for _, enc := range []func([]byte) (int, error){
		(&Setup{}).Encode, (&StatusMessage{}).Encode, (&Nak{}).Encode, (&RTTMeasurement{}).Encode,
		(&ErrorFrame{}).Encode, (&ResponseSetup{}).Encode, (&DataHeader{}).Encode,
		(&ResolutionEntry{ResType: 1, Address: []byte{1, 2, 3, 4}, Name: []byte("x")}).Encode,
	} {
		n, err := enc(small)
		require.Zero(t, n)
		require.ErrorIs(t, err, ErrShortBuffer)
		require.ErrorContains(t, err, "destination has 10")
	}
	_, err := (&FrameHeader{}).Encode(small[:4])
	require.ErrorIs(t, err, ErrShortBuffer)
	_, err = (&DataHeader{}).EncodeFrame(make([]byte, 40), make([]byte, 9))
	require.ErrorContains(t, err, "needs 41 bytes, destination has 40")
}

func TestNextFrameErrors(t *testing.T) {
	dg := make([]byte, 96)
	d := DataHeader{FrameHeader: FrameHeader{Type: TypeData}}
	_, _ = d.EncodeFrame(dg, make([]byte, 32)) // 64 bytes
	for _, tc := range []struct {
		name   string
		mutate func(b []byte) []byte
		off    int
		want   string
	}{
		{"trailing", func(b []byte) []byte { return b[:68] }, 64, "decode PAD frame at offset 64: only 4 bytes left, less than the 8-byte frame header"},
		{"data-too-long", func(b []byte) []byte { le.PutUint32(b, 200); return b }, 0, "decode DATA frame at offset 0: frame_length 200 exceeds the 96 bytes left in the datagram"},
		{"data-too-short", func(b []byte) []byte { le.PutUint32(b, 8); return b }, 0, "frame_length 8 is less than the 32-byte header"},
		{"version", func(b []byte) []byte { b[4] = 9; return b }, 0, "version 9, want 0"},
		{"sm-short", func(b []byte) []byte { le.PutUint32(b, 24); le.PutUint16(b[6:], 3); return b }, 0, "SM frame at offset 0: frame_length 24 is less than the 36-byte SM header"},
		{"nak-long", func(b []byte) []byte { le.PutUint32(b, 100); le.PutUint16(b[6:], 2); return b }, 0, "frame_length 100 exceeds the 96 bytes left"},
		{"data-header-cut", func(b []byte) []byte { return b[:80] }, 64, "header needs 32 bytes, 16 left in the datagram"},
		{"unknown-zero", func(b []byte) []byte { le.PutUint32(b, 0); le.PutUint16(b[6:], 0x30); return b }, 0, "0x30 frame at offset 0: frame_length 0 is less than the 8-byte 0x30 header"},
		{"outside", func(b []byte) []byte { return b }, 97, "offset outside the datagram"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(append([]byte(nil), dg...))
			_, err := NextFrame(b, tc.off)
			require.ErrorContains(t, err, tc.want)
		})
	}
	// Unknown types are delimited by frame_length and returned undecoded.
	b := append([]byte(nil), dg...)
	le.PutUint32(b, 12)
	le.PutUint16(b[6:], uint16(TypeATSData))
	f, err := NextFrame(b, 0)
	require.NoError(t, err)
	require.Equal(t, 12, f.Next)
}

func TestZeroAllocs(t *testing.T) {
	buf := make([]byte, 512)
	payload := make([]byte, 256)
	d := DataHeader{FrameHeader: FrameHeader{Flags: FlagsUnfragmented}, TermOffset: 1024, SessionID: 7, StreamID: 1001, TermID: 3}
	var d2 DataHeader
	var m StatusMessage
	sm := StatusMessage{SessionID: 1, ReceiverWindow: 1 << 17, ReceiverID: 99}
	var k Nak
	var s Setup
	allocs := testing.AllocsPerRun(1000, func() {
		n, _ := d.EncodeFrame(buf, payload)
		if _, err := d2.DecodeFrame(buf[:n]); err != nil {
			panic(err)
		}
		if _, err := NextFrame(buf[:n], 0); err != nil {
			panic(err)
		}
		n, _ = sm.Encode(buf)
		if err := m.Decode(buf[:n]); err != nil {
			panic(err)
		}
		n, _ = (&Nak{Length: 3}).Encode(buf)
		if err := k.Decode(buf[:n]); err != nil {
			panic(err)
		}
		n, _ = (&Setup{MTU: 1408}).Encode(buf)
		if err := s.Decode(buf[:n]); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
}

func BenchmarkDataFrameEncode256(b *testing.B) {
	buf := make([]byte, 512)
	payload := make([]byte, 256)
	d := DataHeader{FrameHeader: FrameHeader{Flags: FlagsUnfragmented}, TermOffset: 1024, SessionID: 7, StreamID: 1001, TermID: 3}
	b.SetBytes(256)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.EncodeFrame(buf, payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDataFrameDecode256(b *testing.B) {
	buf := make([]byte, 512)
	d := DataHeader{FrameHeader: FrameHeader{Flags: FlagsUnfragmented}, TermOffset: 1024, SessionID: 7, StreamID: 1001, TermID: 3}
	n, _ := d.EncodeFrame(buf, make([]byte, 256))
	var h DataHeader
	b.SetBytes(256)
	b.ReportAllocs()
	for b.Loop() {
		p, err := h.DecodeFrame(buf[:n])
		if err != nil || len(p) != 256 {
			b.Fatal(err)
		}
	}
}

func BenchmarkStatusMessageEncodeDecode(b *testing.B) {
	buf := make([]byte, 64)
	sm := StatusMessage{SessionID: 1, ReceiverWindow: 1 << 17, ReceiverID: 99}
	var m StatusMessage
	b.ReportAllocs()
	for b.Loop() {
		n, _ := sm.Encode(buf)
		if err := m.Decode(buf[:n]); err != nil {
			b.Fatal(err)
		}
	}
}
