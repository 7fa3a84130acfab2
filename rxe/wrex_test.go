package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// FLUSH is encoded as rdma-core's rxe.c: wr_flush writes it: wr.flush at
// the offsets of the 6.2+ struct rxe_send_wr (remote_addr 24, length 32,
// rkey 36, type 40, level 41), the length in dma.length/resid, no SGEs.
func TestPostSendFlushWQE(t *testing.T) {
	q := newTestQP(t, uverbs.QPTypeRC, 4)
	q.ops = uverbs.SendOpFlush
	n, err := q.PostSend([]uverbs.SendWR{{WRID: 0x77, Opcode: uverbs.WRFlush, Flags: uverbs.SendSignaled,
		RemoteAddr: 0x123456789000, RKey: 0xaabb, FlushLength: 4096, FlushType: uverbs.FlushGlobal, FlushLevel: uverbs.FlushMR}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	w := q.sq.slot(0)
	require.EqualValues(t, 0x77, le64(w, 0))
	require.EqualValues(t, 14, le32(w, 12), "opcode IB_WR_FLUSH")
	require.EqualValues(t, uverbs.SendSignaled, le32(w, 16))
	require.EqualValues(t, 0x123456789000, le64(w, 24), "wr.flush.remote_addr")
	require.EqualValues(t, 0, le32(w, 32), "wr.flush.length (rdma-core leaves it 0; dma.length carries it)")
	require.EqualValues(t, 0xaabb, le32(w, 36), "wr.flush.rkey")
	require.EqualValues(t, 1, w[40], "wr.flush.type")
	require.EqualValues(t, 1, w[41], "wr.flush.level")
	require.EqualValues(t, 0x123456789000, le64(w, 152), "iova")
	require.EqualValues(t, 4096, le32(w, 184), "dma.length")
	require.EqualValues(t, 4096, le32(w, 188), "dma.resid")
	require.EqualValues(t, 0, le32(w, 196), "dma.num_sge")
}

// ATOMIC_WRITE: wr.rdma carries the target, the 8 bytes sit in
// dma.atomic_wr (where the SGEs would be), from InlineData or from one SGE in
// registered memory (rxe.c: wr_atomic_write).
func TestPostSendAtomicWriteWQE(t *testing.T) {
	q := newTestQP(t, uverbs.QPTypeRC, 4)
	q.ops = uverbs.SendOpAtomicWrite
	base := sys.Addr(q.reg)
	n, err := q.PostSend([]uverbs.SendWR{
		{WRID: 1, Opcode: uverbs.WRAtomicWrite, RemoteAddr: 0x8008, RKey: 0x99, InlineData: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{WRID: 2, Opcode: uverbs.WRAtomicWrite, RemoteAddr: 0x8010, RKey: 0x99, SGL: []uverbs.SGE{{Addr: base + 16, Length: 8, LKey: testLKey}}},
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	w := q.sq.slot(0)
	require.EqualValues(t, 15, le32(w, 12), "opcode IB_WR_ATOMIC_WRITE")
	require.EqualValues(t, 0x8008, le64(w, 24), "wr.rdma.remote_addr")
	require.EqualValues(t, 0x99, le32(w, 32), "wr.rdma.rkey")
	require.EqualValues(t, 0x8008, le64(w, 152), "iova")
	require.EqualValues(t, 8, le32(w, 184), "dma.length")
	require.EqualValues(t, 8, le32(w, 188), "dma.resid")
	require.EqualValues(t, 0, le32(w, 196), "dma.num_sge")
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, w[208:216], "dma.atomic_wr")
	require.Equal(t, q.reg[16:24], q.sq.slot(1)[208:216], "dma.atomic_wr from the SGE")
	require.EqualValues(t, 1, le32(q.sq.slot(1), 176), "ssn")
}

// FLUSH and ATOMIC_WRITE are refused, with nothing written, unless the QP
// was created for them (where uverbs checked the kernel has them), on
// anything but RC, and with malformed operands.
func TestPostSendFlushAtomicWriteRefused(t *testing.T) {
	for name, c := range map[string]struct {
		typ uverbs.QPType
		ops uverbs.SendOps
		wr  uverbs.SendWR
		is  error
	}{
		"flush not in SendOps": {uverbs.QPTypeRC, uverbs.SendOpAtomicWrite, uverbs.SendWR{Opcode: uverbs.WRFlush}, uverbs.ErrNotSupported},
		"atomic write not in SendOps": {uverbs.QPTypeRC, uverbs.SendOpFlush,
			uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, InlineData: make([]byte, 8)}, uverbs.ErrNotSupported},
		"flush on UC": {uverbs.QPTypeUC, uverbs.SendOpFlush, uverbs.SendWR{Opcode: uverbs.WRFlush}, sys.EINVAL},
		"atomic write misaligned": {uverbs.QPTypeRC, uverbs.SendOpAtomicWrite,
			uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, RemoteAddr: 4, InlineData: make([]byte, 8)}, sys.EINVAL},
		"atomic write 7 bytes": {uverbs.QPTypeRC, uverbs.SendOpAtomicWrite,
			uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, InlineData: make([]byte, 7)}, sys.EINVAL},
		"atomic write unregistered SGE": {uverbs.QPTypeRC, uverbs.SendOpAtomicWrite,
			uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, SGL: []uverbs.SGE{{Addr: 0x10, Length: 8, LKey: testLKey}}}, sys.EINVAL},
		"send with inv on UD": {uverbs.QPTypeUD, 0, uverbs.SendWR{Opcode: uverbs.WRSendWithInv}, sys.EINVAL},
	} {
		q := newTestQP(t, c.typ, 4)
		q.ops = c.ops
		n, err := q.PostSend([]uverbs.SendWR{c.wr})
		require.ErrorIs(t, err, c.is, name)
		require.Zero(t, n, name)
		require.Zero(t, q.sq.prod(), name)
	}
}

// InlineData is copied as the inline payload whatever the SGL says, and
// flagged inline; SEND_WITH_INV carries the rkey in host order.
func TestPostSendInlineDataAndSendInv(t *testing.T) {
	q := newTestQP(t, uverbs.QPTypeRC, 4)
	n, err := q.PostSend([]uverbs.SendWR{
		{WRID: 1, Opcode: uverbs.WRSendWithInv, Imm: 0x01020304, InlineData: []byte("not registered"),
			SGL: []uverbs.SGE{{Addr: 0xdead, Length: 99, LKey: 1}}},
	})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	w := q.sq.slot(0)
	require.EqualValues(t, uverbs.WRSendWithInv, le32(w, 12))
	require.EqualValues(t, uverbs.SendInline, le32(w, 16), "send_flags gain INLINE")
	require.EqualValues(t, 0x01020304, le32(w, 20), "ex.invalidate_rkey, host order")
	require.EqualValues(t, 14, le32(w, 184), "dma.length")
	require.EqualValues(t, 0, le32(w, 196), "dma.num_sge: the SGL is ignored")
	require.Equal(t, []byte("not registered"), w[208:222])

	_, err = q.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend, InlineData: make([]byte, 129)}})
	require.ErrorIs(t, err, sys.EINVAL, "longer than max_inline_data")
}

func TestSupportedSendOps(t *testing.T) {
	c := &context{}
	require.NotZero(t, c.SupportedSendOps(uverbs.QPTypeRC)&uverbs.SendOpFlush)
	ops := uverbs.SendOpBindMW | uverbs.SendOpLocalInv | uverbs.SendOpSendWithInv
	require.Equal(t, ops, c.SupportedSendOps(uverbs.QPTypeRC)&ops, "rdma-core rxe.c: RXE_SUP_RC_QP_SEND_OPS_FLAGS")
	require.Equal(t, uverbs.SendOpBindMW|uverbs.SendOpSendWithInv, c.SupportedSendOps(uverbs.QPTypeUC)&ops, "UC: no LOCAL_INV")
	require.Equal(t, uverbs.SendOpSend|uverbs.SendOpSendWithImm, c.SupportedSendOps(uverbs.QPTypeUD))
	require.Zero(t, c.SupportedSendOps(uverbs.QPTypeUC)&uverbs.SendOpRDMARead)
}

// The builder paths the extended API adds allocate nothing either.
func TestPostSendExtendedOpsDoNotAllocate(t *testing.T) {
	q := newTestQP(t, uverbs.QPTypeRC, 6)
	q.ops = uverbs.SendOpFlush | uverbs.SendOpAtomicWrite
	data := make([]byte, 8)
	wrs := []uverbs.SendWR{
		{Opcode: uverbs.WRFlush, FlushLength: 64, FlushType: uverbs.FlushGlobal},
		{Opcode: uverbs.WRAtomicWrite, InlineData: data},
		{Opcode: uverbs.WRSend, InlineData: data},
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := q.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		q.sq.setCons(q.sq.prod()) // the "kernel" consumed them
	})
	require.Zero(t, allocs)
}
