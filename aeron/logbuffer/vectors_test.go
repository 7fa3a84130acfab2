package logbuffer

import (
	"bytes"
	"io"
	"math"
	"testing"

	"github.com/ibgo/ibgo/aeron/internal/testvec"
	"github.com/ibgo/ibgo/aeron/pcap"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
	"github.com/stretchr/testify/require"
)

const (
	vecSession     = 0x3b4c884a
	vecStream      = 1001
	vecInitialTerm = -848725899
)

func wrapVector(t *testing.T, name string) *LogBuffer {
	t.Helper()
	l, err := Wrap(testvec.Copy(name, shm.Alloc))
	require.NoError(t, err)
	return l
}

func TestPublicationVector(t *testing.T) {
	l := wrapVector(t, testvec.PublicationLogBuffer)
	m := l.Metadata()
	require.Equal(t, int32(65536), l.TermLength())
	require.Len(t, l.Bytes(), 200704)

	// Values as decoded in the Aeron brief, section 4.2.
	wantTails := [3][2]int32{{-848725854, 65664}, {-848725853, 65664}, {-848725852, 58464}}
	for i, w := range wantTails {
		raw := m.RawTailVolatile(i)
		require.Equal(t, w[0], TermID(raw), "partition %d", i)
		require.Equal(t, int64(w[1]), raw&0xffffffff, "partition %d", i)
	}
	require.Equal(t, int32(65536), TermOffset(m.RawTailVolatile(0), l.TermLength()), "a tail past the term is clamped")
	require.Equal(t, int32(47), m.ActiveTermCount())
	require.Equal(t, 2, m.ActivePartitionIndex())
	require.Equal(t, int64(math.MaxInt64), m.EndOfStreamPosition())
	require.True(t, m.IsConnected())
	require.Equal(t, int64(2), m.CorrelationID())
	require.Equal(t, int32(vecInitialTerm), m.InitialTermID())
	require.Equal(t, int32(32), m.DefaultFrameHeaderLength())
	require.Equal(t, int32(1408), m.MTULength())
	require.Equal(t, int32(65536), m.TermLength())
	require.Equal(t, int32(4096), m.PageSize())
	require.Equal(t, int32(32768), m.PublicationWindowLength())
	require.Equal(t, int32(0), m.ReceiverWindowLength())
	require.Equal(t, int32(212992), m.OSDefaultSocketSndbufLength())
	require.Equal(t, int32(212992), m.OSDefaultSocketRcvbufLength())
	require.Equal(t, int64(5e9), m.LingerTimeoutNs())
	require.Equal(t, int64(5e9), m.UntetheredWindowLimitTimeoutNs())
	require.Equal(t, int64(10e9), m.UntetheredRestingTimeoutNs())
	require.Equal(t, int64(-1), m.EntityTag())
	require.Equal(t, int64(-1), m.ResponseCorrelationID())
	require.True(t, m.SignalEOS())
	require.False(t, m.Group())
	require.False(t, m.Tether())
	require.False(t, m.IsPublicationRevoked(), "1.48 logs have no 1.53 fields")

	var dh protocol.DataHeader
	require.NoError(t, dh.Decode(m.DefaultFrameHeader()))
	require.Equal(t, protocol.DataHeader{
		FrameHeader: protocol.FrameHeader{Flags: protocol.FlagsUnfragmented, Type: protocol.TypeData},
		SessionID:   vecSession, StreamID: vecStream, TermID: vecInitialTerm,
	}, dh)

	// The active term holds 203 committed 256-byte messages up to the tail.
	h := NewHeader(m.InitialTermID(), l.TermLength())
	var last int64
	count := 0
	var seq int64
	n, off, err := Read(l.Term(2), 0, func(p []byte, hd *Header) {
		count++
		require.Len(t, p, 256)
		// The sample publisher numbers its messages in the first 8 bytes
		// and leaves the rest zero.
		if count > 1 {
			require.Equal(t, seq+1, int64(le.Uint64(p)))
		}
		seq = int64(le.Uint64(p))
		require.Equal(t, make([]byte, 248), p[8:])
		require.Equal(t, int32(vecSession), hd.SessionID())
		require.Equal(t, int32(vecStream), hd.StreamID())
		require.Equal(t, int32(-848725852), hd.TermID())
		require.Equal(t, hd.Offset(), hd.TermOffset())
		require.Equal(t, protocol.FlagsUnfragmented, hd.Flags())
		last = hd.Position()
	}, math.MaxInt, &h)
	require.NoError(t, err)
	require.Equal(t, 203, n)
	require.Equal(t, count, n)
	require.Equal(t, int32(58464), off, "the read stops at the tail")
	require.Equal(t, ComputePosition(-848725852, 58464, 16, vecInitialTerm), last)
	require.Equal(t, int64(47*65536+58464), last)

	// Partition 1 was cleaned behind the consumers up to 25632; from there
	// 138 messages and the PAD that ends the term.
	n, off, err = Read(l.Term(1), 25632, func([]byte, *Header) {}, math.MaxInt, &h)
	require.NoError(t, err)
	require.Equal(t, 138, n)
	require.Equal(t, int32(65536), off)
	require.True(t, IsPaddingFrame(l.Term(1), 65376))
	require.Equal(t, int32(160), FrameLengthVolatile(l.Term(1), 65376))

	// The sender's scan: an MTU of 1408 takes four 288-byte frames, and the
	// term's last frame is a PAD of which only the header is sent.
	avail, pad := ScanForAvailability(l.Term(1), 25632, 1408)
	require.Equal(t, int32(1152), avail)
	require.Zero(t, pad)
	avail, pad = ScanForAvailability(l.Term(1), 65376-288, 1408)
	require.Equal(t, int32(288+32), avail)
	require.Equal(t, int32(128), pad)
	avail, _ = ScanForAvailability(l.Term(2), 58464, 1408)
	require.Zero(t, avail, "nothing committed beyond the tail")
}

func TestImageVector(t *testing.T) {
	l := wrapVector(t, testvec.ImageLogBuffer)
	m := l.Metadata()
	for i := 0; i < 3; i++ {
		require.Zero(t, m.RawTailVolatile(i), "images do not use tail counters")
	}
	require.Equal(t, int64(5), m.CorrelationID())
	require.Equal(t, int32(vecInitialTerm), m.InitialTermID())
	require.Equal(t, int32(1408), m.MTULength())
	require.Equal(t, int32(131072), m.ReceiverWindowLength())
	require.Equal(t, int32(1), m.ActiveTransportCount())
	require.False(t, m.IsConnected())
	require.True(t, m.Rejoin())
	require.True(t, m.Reliable())
	require.True(t, m.Tether())
	require.False(t, m.SignalEOS())
	require.Equal(t, int64(math.MaxInt64), m.EndOfStreamPosition())
	require.Equal(t, testvec.MustBytes(testvec.PublicationLogBuffer)[3*65536+320:3*65536+352], m.DefaultFrameHeader(),
		"the image carries the publication's default header")

	h := NewHeader(m.InitialTermID(), l.TermLength())
	n, off, err := Read(l.Term(2), 0, func([]byte, *Header) {}, math.MaxInt, &h)
	require.NoError(t, err)
	require.Equal(t, 137, n)
	require.Equal(t, int32(39456), off)
	// The rebuilt image is contiguous up to the same point.
	gaps := 0
	require.Equal(t, int32(39456), ScanForGap(l.Term(2), -848725852, 0, 39456, func(int32, int32, int32) { gaps++ }))
	require.Zero(t, gaps)
	// Beyond the highest position received there is a gap to report.
	var gapOff, gapLen int32
	require.Equal(t, int32(39456), ScanForGap(l.Term(2), -848725852, 0, 40000, func(_, o, n int32) { gapOff, gapLen = o, n }))
	require.Equal(t, int32(39456), gapOff)
	require.Equal(t, int32(40000+31-39456)&^31, gapLen)
}

// TestRebuildFromCapture inserts every DATA and PAD frame of the lossy
// capture into fresh terms, as a receiver does, and checks that each
// complete term is gap free, ends in padding, and reads back the messages.
func TestRebuildFromCapture(t *testing.T) {
	r, err := pcap.NewReader(bytes.NewReader(testvec.MustBytes(testvec.LossCubicPcap)))
	require.NoError(t, err)
	var dec pcap.Decoder
	terms := map[int32][]byte{}
	hwm := map[int32]int32{}
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		dg, _, err := dec.Datagram(&p)
		require.NoError(t, err)
		var h protocol.DataHeader
		if h.Decode(dg.Payload) != nil || h.IsHeartbeat() || h.StreamID != vecStream {
			continue
		}
		term := terms[h.TermID]
		if term == nil {
			term = shm.Alloc(65536)
			terms[h.TermID] = term
		}
		require.NoError(t, Insert(term, h.TermOffset, dg.Payload))
		require.NoError(t, Insert(term, h.TermOffset, dg.Payload), "a duplicate is ignored")
		// The highest position this packet proves: a PAD counts in full.
		for off := 0; off < len(dg.Payload); {
			f, err := protocol.NextFrame(dg.Payload, off)
			require.NoError(t, err)
			var fh protocol.DataHeader
			require.NoError(t, fh.Decode(f.Bytes))
			hwm[h.TermID] = max(hwm[h.TermID], fh.TermOffset+protocol.AlignedFrameLength(fh.FrameLength))
			off = f.Next
		}
	}
	require.Len(t, terms, 17)
	hd := NewHeader(vecInitialTerm, 65536)
	total := 0
	for id, term := range terms {
		limit := hwm[id]
		require.Equal(t, limit, ScanForGap(term, id, 0, limit, func(_, o, n int32) {
			t.Errorf("term %d: gap at %d length %d", id, o, n)
		}))
		n, off, err := Read(term, 0, func(p []byte, h *Header) {
			if h.TermID() != id || len(p) != 256 {
				t.Fatalf("term %d: bad frame at %d", id, h.Offset())
			}
		}, math.MaxInt, &hd)
		require.NoError(t, err)
		total += n
		if id-vecInitialTerm < 16 { // complete terms end in a PAD
			require.Equal(t, int32(65536), off, "term %d", id)
			require.Equal(t, int32(65536), limit, "term %d", id)
		}
	}
	require.Greater(t, total, 16*227)
}
