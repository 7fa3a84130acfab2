package mlx5

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// TestSRQScatterReadBeforeFree (issue 30, item 7): a receive completion
// whose data came inline in the CQE (scatter-to-CQE) is copied into the
// WQE's buffers before the WQE goes back to the SRQ's free list: a post that runs meanwhile (another goroutine, here the
// copy's own memory lookup, after another poller freed a second WQE) must
// not be able to reuse the WQE and redirect the rest of the copy. Before
// the fix the WQE was freed first, the post's two WQEs took the sentinel
// and then it, and the second half of the message went to the new post's
// buffer.
func TestSRQScatterReadBeforeFree(t *testing.T) {
	const max, shift = 4, 6 // 64-byte WQEs: next segment and 3 data segments
	mem := make([]byte, max<<shift)
	s := &srqQueue{buf: unsafe.Pointer(&mem[0]), wrid: make([]uint64, max), max: max, maxGS: 3, shift: shift, dbrec: new(uint32)}
	s.init()
	const lkeyA, lkeyB = 1, 2
	bufA, bufB := make([]byte, 16), make([]byte, 64)
	// WQE 0: the message's buffer, two 8-byte segments
	n, err := s.post([]uverbs.RecvWR{{WRID: 100, SGL: []uverbs.SGE{{Addr: 0x1000, Length: 8, LKey: lkeyA}, {Addr: 0x1008, Length: 8, LKey: lkeyA}}}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// fill the rest, so that head meets tail
	for i := 0; i < 2; i++ {
		_, err := s.post([]uverbs.RecvWR{{WRID: uint64(200 + i), SGL: []uverbs.SGE{{Addr: 0x2000, Length: 8, LKey: lkeyB}}}})
		require.NoError(t, err)
	}
	posted := false
	s.local = func(lkey uint32, addr uint64, n int) (uint64, []byte) {
		if !posted {
			// while the completion is being copied, another poller of
			// the SRQ (a second CQ) frees WQE 1 and a post lands
			posted = true
			s.free(1)
			_, _ = s.post([]uverbs.RecvWR{
				{WRID: 300, SGL: []uverbs.SGE{{Addr: 0x2000, Length: 32, LKey: lkeyB}}},
				{WRID: 301, SGL: []uverbs.SGE{{Addr: 0x2000, Length: 32, LKey: lkeyB}}},
			})
		}
		switch lkey {
		case lkeyA:
			return 0x1000, bufA
		case lkeyB:
			return 0x2000, bufB
		}
		return 0, nil
	}
	// a 64-byte CQE of a send received, 16 bytes inline, WQE counter 0
	cqe := make([]byte, 64)
	binary.BigEndian.PutUint32(cqe[offByteCnt:], 16)
	binary.BigEndian.PutUint16(cqe[offWQECtr:], 0)
	for i := 0; i < 16; i++ {
		cqe[i] = byte('a' + i)
	}
	var c cqRing
	var wc uverbs.WC
	status := c.responder(unsafe.Pointer(&cqe[0]), cqeRespSend<<4|cqeInlineScatter32, &resource{srq: s}, &wc)
	require.Equal(t, uverbs.WCSuccess, status)
	require.EqualValues(t, 100, wc.WRID)
	require.True(t, posted)
	require.Equal(t, "abcdefghijklmnop", string(bufA), "the whole message in the WQE's own buffers")
	require.Equal(t, make([]byte, 64), bufB, "nothing went to the later post's buffer")
}
