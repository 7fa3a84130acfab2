package driver

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
)

// media-rcv-ts-offset puts the medium's receive timestamp into the
// reserved value or at a payload offset with room for it, and nowhere
// without the parameter.
func TestMediaTimestampOffset(t *testing.T) {
	for ch, want := range map[string]int32{
		"aeron:udp?endpoint=10.0.0.1:4000":                              tsNone,
		"aeron:udp?endpoint=10.0.0.1:4000|media-rcv-ts-offset=reserved": tsReserved,
		"aeron:ib?endpoint=10.0.0.1:4000|media-rcv-ts-offset=8":         8,
	} {
		u, err := uri.Parse(ch)
		require.NoError(t, err)
		ts, err := parseTimestampOffsets(u)
		require.NoError(t, err)
		require.Equal(t, want, ts.mediaRcv, ch)
		c := &conductor{cfg: DefaultConfig()}
		require.Equal(t, want != tsNone, c.transportParams(u, 1408).MediaTimestamps, ch)
	}
	// C's refusal of overlapping offsets, in C's words (the URI layer,
	// which the client shares, says it first)
	for ch, want := range map[string]string{
		"aeron:udp?endpoint=10.0.0.1:4000|media-rcv-ts-offset=reserved|channel-rcv-ts-offset=reserved": "media-rcv-ts-offset and channel-rcv-ts-offset overlap",
		"aeron:udp?endpoint=10.0.0.1:4000|media-rcv-ts-offset=0|channel-snd-ts-offset=7":               "media-rcv-ts-offset and channel-snd-ts-offset overlap",
		"aeron:udp?endpoint=10.0.0.1:4000|channel-rcv-ts-offset=16|channel-snd-ts-offset=9":            "channel-rcv-ts-offset and channel-snd-ts-offset overlap",
	} {
		_, err := uri.Parse(ch)
		require.ErrorContains(t, err, want, ch)
	}
	u, err := uri.Parse("aeron:udp?endpoint=10.0.0.1:4000|channel-rcv-ts-offset=0|channel-snd-ts-offset=8")
	require.NoError(t, err)
	_, err = parseTimestampOffsets(u)
	require.NoError(t, err, "8 bytes apart do not overlap")

	// a medium that does not declare media-rcv-ts-offset refuses it
	u, err = uri.Parse("aeron:udp?endpoint=10.0.0.1:4000|media-rcv-ts-offset=reserved")
	require.NoError(t, err)
	require.ErrorContains(t, checkNetworkChannel(u, "udp", &fakeMedia{}), "'media-rcv-ts-offset' is not supported on aeron:udp")
	u, err = uri.Parse("aeron:ib?endpoint=10.0.0.1:4000|media-rcv-ts-offset=reserved")
	require.NoError(t, err)
	require.NoError(t, checkNetworkChannel(u, "ib", &declaringMedia{keys: []string{uri.KeyIBQueuePair, uri.KeyMediaRcvTimestampOffset}}))
	require.ErrorContains(t, checkNetworkChannel(u, "ib", &fakeMedia{}), "'media-rcv-ts-offset' is not supported",
		"a medium that does not declare the key does not get it")

	frame := make([]byte, protocol.DataHeaderLength+24)
	h := protocol.DataHeader{FrameHeader: protocol.FrameHeader{FrameLength: int32(len(frame)), Type: protocol.TypeData, Flags: protocol.FlagsUnfragmented}}
	_, err = h.Encode(frame)
	require.NoError(t, err)
	setTimestamp(frame, tsReserved, 1234)
	require.Equal(t, uint64(1234), binary.LittleEndian.Uint64(frame[24:]))
	setTimestamp(frame, 16, 5678)
	require.Equal(t, uint64(5678), binary.LittleEndian.Uint64(frame[protocol.DataHeaderLength+16:]))
	before := append([]byte(nil), frame...)
	setTimestamp(frame, 17, 9) // 17+8 > 24 bytes of payload: no room
	require.Equal(t, before, frame)
	frame[5] = protocol.FlagEnd // a message's last fragment: not stamped
	setTimestamp(frame, tsReserved, 42)
	require.Equal(t, uint64(1234), binary.LittleEndian.Uint64(frame[24:]))
	hb := make([]byte, protocol.DataHeaderLength) // a heartbeat (frame length 0): not stamped
	h.FrameLength = 0
	_, _ = h.Encode(hb)
	setTimestamp(hb, tsReserved, 42)
	require.Zero(t, binary.LittleEndian.Uint64(hb[24:]))
}

// declaringMedia is a medium that declares channel keys of its own.
type declaringMedia struct {
	fakeMedia
	keys []string
}

func (m *declaringMedia) ChannelKeys() []string { return m.keys }
