//go:build linux

package uverbs_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// The paths of issue 30 that soft-RoCE runs as well as a ConnectX; on
// rxe they prove the tests, on hardware the provider (docs/hardware.md,
// "First contact").

// TestPostListWithBadWR: a post list whose second WR cannot be built
// (inline data longer than the QP's max_inline_data) posts the first,
// reports the second as the bad one, and the first completes: the
// doorbell names the last good WQE (issue 30, item 1).
func TestPostListWithBadWR(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	m, mr := b.mem(4096, uverbs.AccessLocalWrite)
	_, err := p.z.PostRecv([]uverbs.RecvWR{{WRID: 9, SGL: []uverbs.SGE{mr.SGE(0, 4096)}}})
	require.NoError(t, err)
	inline := int(p.a.Cap().MaxInlineData)
	copy(m.Bytes(), "first")
	n, err := p.a.PostSend([]uverbs.SendWR{
		{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{mr.SGE(0, 5)}},
		{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, InlineData: make([]byte, inline+64)},
	})
	require.Error(t, err, "inline data above max_inline_data %d", inline)
	require.Equal(t, 1, n, "the first WR was posted")
	wc := wait(t, p.acq, 1)
	require.Equal(t, uint64(1), wc[0].WRID)
	require.Equal(t, uverbs.WCSuccess, wc[0].Status)
	wc = wait(t, p.zcq, 1)
	require.Equal(t, uverbs.WCSuccess, wc[0].Status)
	require.Equal(t, uint32(5), wc[0].ByteLen)
}

// TestSRQAtDeviceLimit: an SRQ of max_wr at the device's max_srq_wr - 1
// is made (libmlx5 goes on without its wait queue there; issue 30, item
// 6), and takes receives.
func TestSRQAtDeviceLimit(t *testing.T) {
	b := newBed(t)
	attr, err := b.ctx.QueryDevice()
	require.NoError(t, err)
	want := attr.MaxSRQWR - 1
	if v := os.Getenv("IBGO_SRQ_MAX_WR"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		want = uint32(n)
	}
	srq, err := b.pd.CreateSRQ(uverbs.SRQInitAttr{MaxWR: want, MaxSGE: 1})
	require.NoError(t, err, "max_wr %d of the device's %d", want, attr.MaxSRQWR)
	defer srq.Close()
	require.GreaterOrEqual(t, srq.MaxWR(), want)
	_, mr := b.mem(4096, uverbs.AccessLocalWrite)
	wrs := make([]uverbs.RecvWR, 64)
	for i := range wrs {
		wrs[i] = uverbs.RecvWR{WRID: uint64(i), SGL: []uverbs.SGE{mr.SGE(0, 64)}}
	}
	n, err := srq.PostRecv(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
}
