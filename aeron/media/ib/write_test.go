package ib

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// place writes a frame header into term at off as the publisher's HCA
// leaves it: every field, the length only when withLength.
func place(term []byte, off int, typ protocol.FrameType, length int, session, stream, termID int32, withLength bool) {
	le := binary.LittleEndian
	if withLength {
		le.PutUint32(term[off:], uint32(length))
	}
	term[off+4] = 0
	term[off+5] = 0xc0
	le.PutUint16(term[off+6:], uint16(typ))
	le.PutUint32(term[off+8:], uint32(off))
	le.PutUint32(term[off+12:], uint32(session))
	le.PutUint32(term[off+16:], uint32(stream))
	le.PutUint32(term[off+20:], uint32(termID))
}

func grantedForTest(tl int) (*rcTransport, *rcConn, *wImage) {
	t := &rcTransport{m: New(), mtu: 4096, window: tl / 2}
	w := &wImage{g: driver.ImageGrant{SessionID: 7, StreamID: 1001, InitialTermID: 10, TermLength: int32(tl),
		Terms: make([]byte, 3*tl)}, shift: 16, slot: 3}
	c := &rcConn{wslots: make([]*wImage, wSlots)}
	c.wslots[3], w.conn = w, c
	return t, c, w
}

func imm(slot int, termID int32, first int) uint32 {
	return uint32(slot)<<24 | uint32(uint8(termID))<<16 | uint32(first)
}

// TestPlaced: what the subscription makes of a write immediate: the frames
// of the batch from the image's next position, the first one's length
// stored last; a padding frame to the term's end; and every malformed
// write refused with an error that says what and where, the length word
// left zero (nothing readable), never a panic.
func TestPlaced(t *testing.T) {
	const tl = 64 << 10
	tr, c, w := grantedForTest(tl)
	term := w.g.Terms[:tl]
	place(term, 0, protocol.TypeData, 200, 7, 1001, 10, false)
	place(term, 224, protocol.TypeData, 100, 7, 1001, 10, true)
	buf, err := tr.placed(c, imm(3, 10, 200))
	require.NoError(t, err)
	require.Len(t, buf, 352, "both frames of the batch, to the aligned end")
	require.Equal(t, uint32(200), binary.LittleEndian.Uint32(term), "the first length stored")
	require.Equal(t, int64(352), w.next)
	require.Equal(t, int64(2), tr.m.RC.PlacedFrames.Load())

	// a padding frame to the end of the term, its length not in 16 bits
	w.next = 1 << 15
	place(term, 1<<15, protocol.TypePad, 0, 7, 1001, 10, false)
	buf, err = tr.placed(c, imm(3, 10, 0))
	require.NoError(t, err)
	require.Len(t, buf, protocol.DataHeaderLength)
	require.Equal(t, uint32(tl-(1<<15)), binary.LittleEndian.Uint32(term[1<<15:]))
	require.Equal(t, int64(tl), w.next, "the next write lands at the next term")

	// term 1: a padding frame in 32-byte units, one written whole, and a
	// 32-byte padding frame (an aborted claim) among data frames
	t1 := w.g.Terms[tl : 2*tl]
	place(t1, 0, protocol.TypePad, 0, 7, 1001, 11, false)
	buf, err = tr.placed(c, imm(3, 11, 64/32))
	require.NoError(t, err)
	require.Len(t, buf, protocol.DataHeaderLength)
	require.Equal(t, uint32(64), binary.LittleEndian.Uint32(t1))
	require.Equal(t, int64(tl+64), w.next)
	place(t1, 64, protocol.TypePad, 1024, 7, 1001, 11, true)
	_, err = tr.placed(c, imm(3, 11, padPlaced))
	require.NoError(t, err)
	require.Equal(t, int64(tl+64+1024), w.next)
	place(t1, 1088, protocol.TypeData, 100, 7, 1001, 11, false)
	place(t1, 1216, protocol.TypePad, 32, 7, 1001, 11, true)
	place(t1, 1248, protocol.TypeData, 40, 7, 1001, 11, true)
	buf, err = tr.placed(c, imm(3, 11, 100))
	require.NoError(t, err)
	require.Len(t, buf, 1248+64-1088, "the frames after the 32-byte padding frame are the write's too")
	require.Equal(t, int64(tl+1248+64), w.next)

	// malformed writes into term 2
	w.next = 2 * tl
	next := w.next
	t1 = w.g.Terms[2*tl : 3*tl]
	for name, tc := range map[string]struct {
		slot  int
		id    int32
		first int
		setup func()
		want  string
	}{
		"slot not granted":  {slot: 9, id: 12, first: 64, want: "image slot 9"},
		"wrong term id imm": {slot: 3, id: 13, first: 64, want: "immediate names term id"},
		"wrong session":     {slot: 3, id: 12, first: 64, setup: func() { place(t1, 0, protocol.TypeData, 64, 8, 1001, 12, false) }, want: "session 8 stream 1001"},
		"wrong offset": {slot: 3, id: 12, first: 64, setup: func() {
			place(t1, 0, protocol.TypeData, 64, 7, 1001, 12, false)
			binary.LittleEndian.PutUint32(t1[8:], 4096)
		}, want: "term offset 4096"},
		"wrong type":      {slot: 3, id: 12, first: 64, setup: func() { place(t1, 0, protocol.TypeSetup, 64, 7, 1001, 12, false) }, want: "frame type 5"},
		"frame too short": {slot: 3, id: 12, first: 16, setup: func() { place(t1, 0, protocol.TypeData, 16, 7, 1001, 12, false) }, want: "a frame of 16 bytes"},
		"second frame bad": {slot: 3, id: 12, first: 64, setup: func() {
			place(t1, 0, protocol.TypeData, 64, 7, 1001, 12, false)
			place(t1, 64, protocol.TypeData, 1<<20, 7, 1001, 12, true)
		}, want: "at offset 64"},
	} {
		t.Run(name, func(t *testing.T) {
			clear(t1)
			w.next = next
			if tc.setup != nil {
				tc.setup()
			}
			_, err := tr.placed(c, imm(tc.slot, tc.id, tc.first))
			require.ErrorContains(t, err, tc.want)
			require.Zero(t, binary.LittleEndian.Uint32(t1), "nothing made readable")
			require.Equal(t, next, w.next)
		})
	}
}

// TestWriteFrontierAndZero: a grant starts at the first zero length word
// (or stale frame) from the image's position, and clearing the window ahead of it crosses
// the term's end.
func TestWriteFrontierAndZero(t *testing.T) {
	const tl = 64 << 10
	_, _, w := grantedForTest(tl)
	term := w.g.Terms[:tl]
	place(term, 0, protocol.TypeData, 64, 7, 1001, 10, true)
	place(term, 64, protocol.TypeData, 40, 7, 1001, 10, true)
	place(term, 128, protocol.TypeData, 64, 7, 1001, 7, true) // a frame of the term used three terms ago
	require.Equal(t, int64(128), w.frontier(0, tl/2), "the frontier stops at a zero length or an older term's frame")
	for i := range w.g.Terms {
		w.g.Terms[i] = 0xff
	}
	w.zeroAhead(tl-256, 1024)
	require.Equal(t, byte(0xff), w.g.Terms[tl-257])
	for i := tl - 256; i < tl+768; i++ {
		require.Zero(t, w.g.Terms[i], "offset %d", i)
	}
	require.Equal(t, byte(0xff), w.g.Terms[tl+768])
	w.zeroAhead(2*tl-32, 35) // a window that ends 3 bytes into the next term
	require.Zero(t, binary.LittleEndian.Uint32(w.g.Terms[2*tl:]))
	require.Equal(t, byte(0xff), w.g.Terms[2*tl+4])
}

// TestSpan: how far a datagram reaches: its frames aligned, and to the end
// of a padding frame sent alone or after data frames.
func TestSpan(t *testing.T) {
	d := make([]byte, 352)
	place(d, 0, protocol.TypeData, 200, 7, 1, 10, true)
	place(d, 224, protocol.TypeData, 100, 7, 1, 10, true)
	require.Equal(t, int64(352), span(d))
	p := make([]byte, 256)
	place(p, 0, protocol.TypeData, 200, 7, 1, 10, true)
	place(p, 224, protocol.TypePad, 4000, 7, 1, 10, true)
	require.Equal(t, int64(224+4000), span(p))
	require.Equal(t, int64(4000), span(p[224:]))
	q := make([]byte, 320) // a data frame, a 32-byte padding frame, a data frame
	place(q, 0, protocol.TypeData, 200, 7, 1, 10, true)
	place(q, 224, protocol.TypePad, 32, 7, 1, 10, true)
	place(q, 256, protocol.TypeData, 60, 7, 1, 10, true)
	require.Equal(t, int64(320), span(q))
}
