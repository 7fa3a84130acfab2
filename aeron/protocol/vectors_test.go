package protocol

import (
	"bytes"
	"encoding/hex"
	"io"
	"strings"
	"testing"

	"github.com/ibgo/ibgo/aeron/internal/testvec"
	"github.com/ibgo/ibgo/aeron/pcap"
	"github.com/stretchr/testify/require"
)

// datagrams returns the UDP payloads of a vector capture.
func datagrams(tb testing.TB, name string) [][]byte {
	tb.Helper()
	r, err := pcap.NewReader(bytes.NewReader(testvec.MustBytes(name)))
	require.NoError(tb, err)
	var d pcap.Decoder
	var out [][]byte
	for {
		p, err := r.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(tb, err)
		dg, kind, err := d.Datagram(&p)
		require.NoError(tb, err)
		require.Equal(tb, pcap.KindUDP, kind)
		out = append(out, append([]byte(nil), dg.Payload...))
	}
}

// reencode decodes the frame with its typed decoder and encodes it again
// into a fresh buffer, returning the encoded bytes.
func reencode(tb testing.TB, f Frame) []byte {
	tb.Helper()
	out := make([]byte, len(f.Bytes)+64)
	var n int
	var err error
	switch f.Header.Type {
	case TypeData, TypePad:
		var h DataHeader
		payload, derr := h.DecodeFrame(f.Bytes)
		require.NoError(tb, derr)
		if h.Type == TypeData && !h.IsHeartbeat() {
			save := h.FrameLength
			n, err = h.EncodeFrame(out, payload)
			require.Equal(tb, save, h.FrameLength)
		} else {
			n, err = h.Encode(out)
		}
	case TypeSetup:
		var s Setup
		require.NoError(tb, s.Decode(f.Bytes))
		n, err = s.Encode(out)
	case TypeStatusMessage:
		var m StatusMessage
		require.NoError(tb, m.Decode(f.Bytes))
		n, err = m.Encode(out)
	case TypeNak:
		var k Nak
		require.NoError(tb, k.Decode(f.Bytes))
		n, err = k.Encode(out)
	case TypeRTTM:
		var r RTTMeasurement
		require.NoError(tb, r.Decode(f.Bytes))
		n, err = r.Encode(out)
	case TypeResponseSetup:
		var r ResponseSetup
		require.NoError(tb, r.Decode(f.Bytes))
		n, err = r.Encode(out)
	case TypeError:
		var e ErrorFrame
		require.NoError(tb, e.Decode(f.Bytes))
		n, err = e.Encode(out)
	default:
		tb.Fatalf("unexpected frame type %s", f.Header.Type)
	}
	require.NoError(tb, err)
	return out[:n]
}

type kindCount map[string]int

func kindOf(f Frame) string {
	h := f.Header
	if h.Type == TypeData && h.FrameLength == 0 {
		return "HB/" + hex.EncodeToString([]byte{h.Flags})
	}
	return h.Type.String() + "/" + hex.EncodeToString([]byte{h.Flags})
}

func TestCapturesDecodeAndReencode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		datagrams int
		want      kindCount
	}{
		{testvec.LossCubicPcap, 1843, kindCount{
			"DATA/c0": 3850, "HB/c0": 1, "HB/e0": 1, "PAD/c0": 17, "NAK/00": 27,
			"SM/00": 191, "SM/40": 1, "SETUP/00": 7, "RTTM/00": 319, "RTTM/80": 319,
		}},
		{testvec.ResponseChannelPcap, 297, kindCount{
			"DATA/c0": 13, "HB/c0": 157, "HB/e0": 23, "RSP_SETUP/00": 1,
			"SM/00": 82, "SM/80": 6, "SM/40": 10, "SETUP/00": 4, "SETUP/80": 1,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dgs := datagrams(t, tc.name)
			require.Len(t, dgs, tc.datagrams)
			got := kindCount{}
			for i, dg := range dgs {
				rebuilt := make([]byte, 0, len(dg))
				for off := 0; off < len(dg); {
					f, err := NextFrame(dg, off)
					require.NoError(t, err, "datagram %d offset %d", i+1, off)
					got[kindOf(f)]++
					enc := reencode(t, f)
					require.Equal(t, f.Bytes, enc, "datagram %d offset %d (%s): re-encoding differs", i+1, off, f.Header.Type)
					// The datagram is the frames laid end to end, each padded
					// to its aligned length with zeros.
					rebuilt = append(rebuilt, enc...)
					rebuilt = append(rebuilt, make([]byte, f.Next-off-len(enc))...)
					off = f.Next
				}
				require.Equal(t, dg, rebuilt, "datagram %d", i+1)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "").Replace(s))
	if err != nil {
		panic(err)
	}
	return b
}

// The decoded examples of the Aeron brief (section 3), taken from the captures.
func TestBriefExamples(t *testing.T) {
	var s Setup
	require.NoError(t, s.Decode(mustHex("28000000 00 00 0500 | 00000000 4a884c3b e9030000 757869cd 757869cd 00000100 80050000 00000000")))
	require.Equal(t, Setup{
		FrameHeader: FrameHeader{FrameLength: 40, Type: TypeSetup},
		SessionID:   0x3b4c884a, StreamID: 1001, InitialTermID: int32(-848725899), ActiveTermID: int32(-848725899),
		TermLength: 65536, MTU: 1408,
	}, s)

	var m StatusMessage
	require.NoError(t, m.Decode(mustHex("24000000 00 00 0300 | 4a884c3b e9030000 757869cd 00000000 00370000 fca60b4d7c3f582b")))
	require.Equal(t, int32(14080), m.ReceiverWindow)
	require.Equal(t, int32(-848725899), m.ConsumptionTermID)
	require.Equal(t, int64(0x2b583f7c4d0ba6fc), m.ReceiverID)
	require.False(t, m.HasGroupTag)

	var k Nak
	require.NoError(t, k.Decode(mustHex("1c000000 00 00 0200 | 4a884c3b e9030000 757869cd 006c0000 80040000")))
	require.Equal(t, Nak{FrameHeader: FrameHeader{FrameLength: 28, Type: TypeNak}, SessionID: 994871370, StreamID: 1001,
		TermID: -848725899, TermOffset: 27648, Length: 1152}, k)

	var p DataHeader
	require.NoError(t, p.Decode(mustHex("a0000000 00 c0 0000 | 60ff0000 4a884c3b e9030000 757869cd 0000000000000000")))
	require.Equal(t, TypePad, p.Type)
	require.Equal(t, int32(160), p.FrameLength)
	require.Equal(t, int32(65376), p.TermOffset)
	require.Equal(t, int32(65536), p.TermOffset+p.FrameLength)

	var r ResponseSetup
	require.NoError(t, r.Decode(mustHex("14000000 00 00 0b00 | 674d89ec 10270000 5b95d14a")))
	require.Equal(t, int32(10000), r.StreamID)
	require.Equal(t, int32(0x4ad1955b), r.ResponseSessionID)
	require.Equal(t, int32(-326546073), r.SessionID)
}

func TestNextFramePadWithoutBody(t *testing.T) {
	// A datagram ending in a PAD: only its header travels.
	dg := make([]byte, 96)
	d := DataHeader{FrameHeader: FrameHeader{Flags: FlagsUnfragmented, Type: TypeData}, TermOffset: 65376, SessionID: 1, StreamID: 2, TermID: 3}
	_, err := d.EncodeFrame(dg, []byte{1, 2})
	require.NoError(t, err)
	pad := DataHeader{FrameHeader: FrameHeader{FrameLength: 96, Flags: FlagsUnfragmented, Type: TypePad}, TermOffset: 65440}
	_, err = pad.Encode(dg[64:])
	require.NoError(t, err)
	f, err := NextFrame(dg, 0)
	require.NoError(t, err)
	require.Equal(t, 34, len(f.Bytes))
	require.Equal(t, 64, f.Next, "a 34-byte frame takes 64 bytes")
	f, err = NextFrame(dg, 64)
	require.NoError(t, err)
	require.Equal(t, TypePad, f.Header.Type)
	require.Len(t, f.Bytes, 32)
	require.Equal(t, 96, f.Next, "the PAD's 96 bytes are cut to what the datagram holds")
}
