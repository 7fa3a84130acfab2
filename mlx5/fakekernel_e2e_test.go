package mlx5

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// fkPair is two RC QPs of one fake device, created and connected through
// the public uverbs API over the fake kernel.
type fkPair struct {
	k          *fakeKernel
	ctx        *uverbs.Context
	pd         *uverbs.PD
	memA, memB []byte
	mrA, mrB   *uverbs.MR
	cqA, cqB   *uverbs.CQ // each QP's send and receive CQ
	a, b       *uverbs.QP
	srq        *uverbs.SRQ // b's, when asked for
	da, db     *devQP
}

// With srqWR, b receives from an SRQ of that many WRs (p.srq).
func newFKPair(t *testing.T, ioctl bool, sendWR, recvWR uint32, ncqe int, stamps bool, srqWR ...uint32) *fkPair {
	return newFKPairOn(t, newFakeKernel(t, ioctl), sendWR, recvWR, uverbs.CQInitAttr{CQE: ncqe, Timestamps: stamps}, srqWR...)
}

// newFKPairOn is newFKPair over a fake kernel the caller set up, with both
// CQs created from cqAttr.
func newFKPairOn(t *testing.T, k *fakeKernel, sendWR, recvWR uint32, cqAttr uverbs.CQInitAttr, srqWR ...uint32) *fkPair {
	p := &fkPair{k: k}
	var err error
	p.ctx, err = p.k.device().Open()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.ctx.Close()) })
	p.pd, err = p.ctx.AllocPD()
	require.NoError(t, err)
	for _, m := range []*[]byte{&p.memA, &p.memB} {
		b, err := sys.MmapAnon(1<<16, 0)
		require.NoError(t, err)
		t.Cleanup(func() { sys.Munmap(b) })
		*m = b
	}
	acc := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	p.mrA, err = p.pd.RegMR(p.memA, acc)
	require.NoError(t, err)
	p.mrB, err = p.pd.RegMR(p.memB, acc)
	require.NoError(t, err)
	p.cqA, err = p.ctx.CreateCQ(cqAttr)
	require.NoError(t, err)
	p.cqB, err = p.ctx.CreateCQ(cqAttr)
	require.NoError(t, err)
	if len(srqWR) > 0 {
		p.srq, err = p.pd.CreateSRQ(uverbs.SRQInitAttr{MaxWR: srqWR[0], MaxSGE: 1})
		require.NoError(t, err)
	}
	mk := func(c *uverbs.CQ, s *uverbs.SRQ) *uverbs.QP {
		a := uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: c, RecvCQ: c, SRQ: s,
			Cap: uverbs.QPCap{MaxSendWR: sendWR, MaxRecvWR: recvWR, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}}
		if s != nil {
			a.Cap.MaxRecvWR, a.Cap.MaxRecvSGE = 0, 0
		}
		q, err := p.pd.CreateQP(a)
		require.NoError(t, err)
		return q
	}
	p.a, p.b = mk(p.cqA, nil), mk(p.cqB, p.srq)
	connect(t, p.a, p.b)
	p.da = p.k.attach(t, p.a, p.cqA, p.cqA)
	p.db = p.k.attach(t, p.b, p.cqB, p.cqB)
	require.Equal(t, p.b.QPN(), p.da.peer, "MODIFY_QP's dest_qp_num reached the fake")
	require.Equal(t, p.a.QPN(), p.db.peer)
	p.k.checkPath(t)
	return p
}

// checkPath checks that the commands so far took the path the fake offered:
// all write(2) without the ioctl framework; with it, no write(2) at all,
// the creates as native methods and the rest through INVOKE_WRITE.
func (k *fakeKernel) checkPath(t testing.TB) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	seen := map[uint32]bool{}
	for _, c := range k.cmds {
		seen[c] = true
	}
	methods := map[[2]uint16]bool{}
	for _, m := range k.methods {
		methods[m] = true
	}
	if !k.ioctl {
		require.Empty(t, k.methods)
		for _, c := range []uint32{abi.IB_USER_VERBS_CMD_GET_CONTEXT, abi.IB_USER_VERBS_CMD_ALLOC_PD, abi.IB_USER_VERBS_CMD_REG_MR,
			abi.IB_USER_VERBS_CMD_CREATE_CQ, abi.IB_USER_VERBS_CMD_CREATE_QP, abi.IB_USER_VERBS_CMD_MODIFY_QP} {
			require.True(t, seen[c], "write command %d reached the fake kernel", c)
		}
		require.Equal(t, len(k.cmds), k.writes, "every command came through write(2)")
		return
	}
	require.Zero(t, k.writes, "no write(2) when the kernel has the ioctl framework")
	require.Equal(t, len(k.cmds), k.invoked, "every write command came through INVOKE_WRITE")
	for _, c := range []uint32{abi.IB_USER_VERBS_CMD_ALLOC_PD, abi.IB_USER_VERBS_CMD_REG_MR, abi.IB_USER_VERBS_CMD_MODIFY_QP} {
		require.True(t, seen[c], "write command %d reached the fake kernel through INVOKE_WRITE", c)
	}
	for _, c := range []uint32{abi.IB_USER_VERBS_CMD_GET_CONTEXT, abi.IB_USER_VERBS_CMD_CREATE_CQ, abi.IB_USER_VERBS_CMD_CREATE_QP} {
		require.False(t, seen[c], "write command %d not used: its ioctl method answered", c)
	}
	for _, m := range [][2]uint16{{abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_GET_CONTEXT},
		{abi.UVERBS_OBJECT_ASYNC_EVENT, abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC},
		{abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE}, {abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE}} {
		require.True(t, methods[m], "ioctl method %v reached the fake kernel", m)
	}
}

func (p *fkPair) sgeA(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: memAddr(p.memA[off:]), Length: uint32(n), LKey: p.mrA.LKey()}
}
func (p *fkPair) sgeB(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: memAddr(p.memB[off:]), Length: uint32(n), LKey: p.mrB.LKey()}
}

// send posts wrs on a through uverbs, checks what the doorbell left (the
// doorbell record, and the first 8 bytes of the first WQE at the register
// half libmlx5 would use in the fake's UAR page), then lets the device
// model run them.
func (p *fkPair) send(t *testing.T, wrs ...uverbs.SendWR) {
	t.Helper()
	q := p.a.Driver().(*qp)
	bf := q.sq.bf
	reg := uintptr(bf.reg) + bf.offset
	first := q.sq.curPost
	n, err := p.a.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
	require.Equal(t, q.sq.curPost&0xffff, binary.BigEndian.Uint32((*[4]byte)(unsafe.Pointer(&q.sq.dbrec[sndDBR]))[:]),
		"SND doorbell record = WQEBBs posted")
	ctrl := p.da.wqeBytes(first)
	if len(wrs) > 1 {
		// A list rings once, with the last WQE's control segment.
		ctrl = nil
	}
	uar := p.k.uar[0]
	off := int(reg - uintptr(unsafe.Pointer(&uar[0])))
	require.True(t, off >= bfOffset && off < len(uar), "the doorbell went to the fake's UAR page 0 (offset %#x)", off)
	if ctrl != nil {
		require.Equal(t, ctrl[:8], uar[off:off+8], "UAR/BlueFlame write = the WQE's control segment")
		if uintptr(len(ctrl)) <= bf.bufSize && bf.uuarn != 0 {
			// post_send_db's BlueFlame copy: the whole WQE (64-byte chunks).
			require.Equal(t, ctrl, uar[off:off+len(ctrl)], "BlueFlame copy = the WQE")
		}
	}
	require.Equal(t, reg^uintptr(bf.bufSize), uintptr(bf.reg)+bf.offset, "the BlueFlame half alternates")
	require.NoError(t, p.k.dev.ring(p.da))
}

func pollN(t *testing.T, c *uverbs.CQ, want int) []uverbs.WC {
	t.Helper()
	wc := make([]uverbs.WC, want+1)
	n, err := c.Poll(wc)
	require.NoError(t, err)
	require.Equal(t, want, n, "completions")
	return wc[:n]
}

// RC send/receive and RDMA write through uverbs.Open → CreateCQ/QP →
// Modify → PostSend/PostRecv → CQ.Poll over the fake kernel, through many
// laps of a 4-entry SQ/RQ and an 8-entry CQ.
func TestFakeKernelRCSendRecvWriteWrap(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 4, 4, 7, false)
		require.NotEmpty(t, p.k.uar, "the UAR pages were mapped through the fake")
		for i := 0; i < 120; i++ {
			binary.BigEndian.PutUint64(p.memA, uint64(i))
			_, err := p.b.PostRecv([]uverbs.RecvWR{{WRID: uint64(1000 + i), SGL: []uverbs.SGE{p.sgeB(0, 16), p.sgeB(100, 64)}}})
			require.NoError(t, err)
			flags := uverbs.SendSignaled
			if i%3 == 0 {
				flags |= uverbs.SendInline
			}
			p.send(t, uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: flags, SGL: []uverbs.SGE{p.sgeA(0, 8), p.sgeA(8, 32)}})
			wc := pollN(t, p.cqA, 1)
			require.Equal(t, uverbs.WC{WRID: uint64(i), Opcode: uverbs.WCSend, QPN: p.a.QPN(), Flags: wc[0].Flags}, wc[0])
			wc = pollN(t, p.cqB, 1)
			require.Equal(t, uint64(1000+i), wc[0].WRID)
			require.Equal(t, uverbs.WCSuccess, wc[0].Status)
			require.Equal(t, uverbs.WCRecv, wc[0].Opcode)
			require.Equal(t, uint32(40), wc[0].ByteLen)
			require.Equal(t, p.a.QPN(), wc[0].SrcQP)
			require.Equal(t, uint64(i), binary.BigEndian.Uint64(p.memB))
			require.Equal(t, p.memA[16:40], p.memB[100:124])

			// RDMA write of 24 bytes at a moving offset of B.
			binary.BigEndian.PutUint64(p.memA[200:], uint64(i)*3)
			dst := 4096 + (i%10)*24
			p.send(t, uverbs.SendWR{WRID: uint64(5000 + i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				RemoteAddr: memAddr(p.memB[dst:]), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(200, 24)}})
			wc = pollN(t, p.cqA, 1)
			require.Equal(t, uverbs.WCSuccess, wc[0].Status)
			require.Equal(t, uverbs.WCRDMAWrite, wc[0].Opcode)
			require.Equal(t, p.memA[200:224], p.memB[dst:dst+24])
		}
		q := p.a.Driver().(*qp)
		c := p.cqA.Driver().(*cq)
		require.Greater(t, q.sq.curPost, 4*q.lay.sqWQECnt, "the SQ wrapped several times")
		require.Greater(t, c.ring.consIndex, 4*c.ring.ncqe, "the CQ wrapped several times")
		require.Equal(t, c.ring.consIndex&0xffffff, binary.BigEndian.Uint32((*[4]byte)(unsafe.Pointer(&c.ring.dbrec[cqSetCI]))[:]),
			"CQ doorbell record = consumer index")
	})
}

// A bad lkey: the requester completes with a local protection error, the QP
// goes to error, the next send and the posted receive are flushed.
func TestFakeKernelBadLKey(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 8, 8, 16, false)
		_, err := p.a.PostRecv([]uverbs.RecvWR{{WRID: 500, SGL: []uverbs.SGE{p.sgeA(0, 8)}}})
		require.NoError(t, err)
		bad := p.sgeA(0, 8)
		bad.LKey = 0xbad
		p.send(t,
			uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteAddr: memAddr(p.memB), RKey: p.mrB.RKey(),
				SGL: []uverbs.SGE{bad}},
			uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{p.sgeA(0, 8)}})
		wc := pollN(t, p.cqA, 3)
		require.Equal(t, uverbs.WC{WRID: 1, Status: uverbs.WCLocProtErr, VendorErr: 0x42, QPN: p.a.QPN()}, wc[0])
		// The model flushes the receive queue as the QP enters the error state,
		// then the send queue's remaining WQE (one CQ for both queues here).
		require.Equal(t, uverbs.WC{WRID: 500, Status: uverbs.WCWRFlushErr, VendorErr: 0x42, QPN: p.a.QPN()}, wc[1])
		require.Equal(t, uverbs.WC{WRID: 2, Status: uverbs.WCWRFlushErr, VendorErr: 0x42, QPN: p.a.QPN()}, wc[2])
		require.True(t, p.da.err, "the QP went to the error state")
	})
}

// PostSend and Poll through uverbs allocate nothing.
func TestFakeKernelPostPollAllocs(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 256, 8, 511, true)
		wr := []uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled | uverbs.SendInline,
			RemoteAddr: memAddr(p.memB), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(0, 8)}}}
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := p.a.PostSend(wr); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs, "PostSend allocations")
		require.NoError(t, p.k.dev.ring(p.da)) // 101 WQEs (AllocsPerRun warms up once) → 101 CQEs
		wc := make([]uverbs.WC, 1)
		allocs = testing.AllocsPerRun(100, func() {
			if n, err := p.cqA.Poll(wc); err != nil || n != 1 {
				t.Fatalf("poll: %d %v", n, err)
			}
		})
		require.Zero(t, allocs, "Poll allocations")
	})
}

// Completion timestamps: a CQ created with CQInitAttr.Timestamps goes out
// as EX_CREATE_CQ with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION, each WC
// carries the CQE's HCA time, and the clock-info page the kernel maps
// converts it to nanoseconds. A CQ without the flag reports 0.
func TestFakeKernelCompletionTimestamps(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 8, 8, 16, true)
		require.Equal(t, []uint32{abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION, abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION}, p.k.cqFlags)
		var prev uint64
		for i := 0; i < 3; i++ {
			p.send(t, uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				RemoteAddr: memAddr(p.memB), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(0, 8)}})
			wc := pollN(t, p.cqA, 1)
			require.Equal(t, p.k.dev.now, wc[0].Timestamp, "WC.Timestamp is the CQE's HCA time")
			require.Greater(t, wc[0].Timestamp, prev)
			prev = wc[0].Timestamp
		}

		// The clock-info page was mapped through the fake; fill it as the
		// kernel would (1 tick = 1 ns: mult 1<<8, shift 8).
		require.NotNil(t, p.k.clock, "clock-info page mapped")
		ci := (*abi.Mlx5ClockInfo)(unsafe.Pointer(&p.k.clock[0]))
		*ci = abi.Mlx5ClockInfo{NSec: 1_700_000_000_000_000_000, Cycles: prev - 500, Mult: 1 << 8, Shift: 8, Mask: 1<<48 - 1}
		c, err := Clock(p.ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(1_700_000_000_000_000_500), c.ToNS(prev))

		plain, err := p.ctx.CreateCQ(uverbs.CQInitAttr{CQE: 4})
		require.NoError(t, err)
		require.Equal(t, uint32(0), p.k.cqFlags[2], "no flag without Timestamps")
		require.False(t, plain.Driver().(*cq).ring.stamps)
		require.NoError(t, plain.Close())
	})
}

// An SRQ through uverbs: created over the fake kernel, shared by b, its
// free list cycled through several rounds, full at max_wr.
func TestFakeKernelSRQ(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 16, 0, 31, false, 7)
		require.NotNil(t, p.db.srq)
		for round := 0; round < 5; round++ {
			for i := 0; i < 7; i++ {
				n, err := p.srq.PostRecv([]uverbs.RecvWR{{WRID: uint64(100*round + i), SGL: []uverbs.SGE{p.sgeB(64*i, 64)}}})
				require.NoError(t, err)
				require.Equal(t, 1, n)
			}
			_, err := p.srq.PostRecv([]uverbs.RecvWR{{WRID: 999}})
			require.ErrorIs(t, err, ErrQueueFull, "an SRQ of max_wr 7 holds 7")
			for i := 0; i < 7; i++ {
				copy(p.memA, []byte{byte(round), byte(i), 2, 3, 4, 5, 6, 7, 8, 9})
				p.send(t, uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.sgeA(0, 10)}})
				require.Equal(t, uverbs.WCSuccess, pollN(t, p.cqA, 1)[0].Status)
			}
			wc := pollN(t, p.cqB, 7)
			for i := range wc {
				require.Equal(t, uint64(100*round+i), wc[i].WRID)
				require.Equal(t, uint32(10), wc[i].ByteLen)
				require.Equal(t, []byte{byte(round), byte(i)}, p.memB[64*i:64*i+2])
			}
		}
	})
}

// RDMA write with immediate, RDMA read and both atomics through uverbs over
// the fake kernel.
func TestFakeKernelReadAtomics(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 8, 8, 16, false)
		copy(p.memA, "remote write payload")
		_, err := p.b.PostRecv([]uverbs.RecvWR{{WRID: 77}})
		require.NoError(t, err)
		p.send(t, uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWriteWithImm, Flags: uverbs.SendSignaled, Imm: 0xdeadbeef,
			RemoteAddr: memAddr(p.memB[512:]), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(0, 20)}})
		require.Equal(t, "remote write payload", string(p.memB[512:532]))
		wc := pollN(t, p.cqB, 1)
		require.Equal(t, uverbs.WCRecvRDMAWithImm, wc[0].Opcode)
		require.Equal(t, uint32(0xdeadbeef), wc[0].Imm)
		require.Equal(t, uverbs.WCRDMAWrite, pollN(t, p.cqA, 1)[0].Opcode)

		copy(p.memB[1024:], "read me back")
		p.send(t, uverbs.SendWR{WRID: 2, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
			RemoteAddr: memAddr(p.memB[1024:]), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(2048, 12)}})
		require.Equal(t, uverbs.WC{WRID: 2, Opcode: uverbs.WCRDMARead, ByteLen: 12, QPN: p.a.QPN()}, pollN(t, p.cqA, 1)[0])
		require.Equal(t, "read me back", string(p.memA[2048:2060]))

		target := p.memB[4096:4104]
		binary.BigEndian.PutUint64(target, 100)
		p.send(t, uverbs.SendWR{WRID: 3, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled, CompareAdd: 5,
			RemoteAddr: memAddr(target), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(4096, 8)}})
		require.Equal(t, uverbs.WCFetchAdd, pollN(t, p.cqA, 1)[0].Opcode)
		require.Equal(t, uint64(105), binary.BigEndian.Uint64(target))
		require.Equal(t, uint64(100), binary.BigEndian.Uint64(p.memA[4096:]))
		p.send(t, uverbs.SendWR{WRID: 4, Opcode: uverbs.WRAtomicCmpAndSwp, Flags: uverbs.SendSignaled, CompareAdd: 105, Swap: 7,
			RemoteAddr: memAddr(target), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(4096, 8)}})
		require.Equal(t, uverbs.WCCompSwap, pollN(t, p.cqA, 1)[0].Opcode)
		require.Equal(t, uint64(7), binary.BigEndian.Uint64(target))

		// A bad rkey: remote access error.
		p.send(t, uverbs.SendWR{WRID: 5, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
			RemoteAddr: memAddr(p.memB), RKey: 0xbad, SGL: []uverbs.SGE{p.sgeA(0, 8)}})
		require.Equal(t, uverbs.WCRemAccessErr, pollN(t, p.cqA, 1)[0].Status)
	})
}

// CQ overrun: a 4-entry CQ (CQE: 3) that nobody polls keeps its 4 CQEs,
// the model drops the rest as the HCA would (it raises a CQ error), and
// polling returns exactly the 4 in order.
func TestFakeKernelCQOverrun(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 16, 16, 3, false)
		c := p.cqA.Driver().(*cq)
		require.Equal(t, uint32(4), c.ring.ncqe)
		for i := 0; i < 6; i++ {
			p.send(t, uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				RemoteAddr: memAddr(p.memB), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(0, 8)}})
		}
		require.True(t, p.k.dev.cqs[&c.ring].overrun)
		wc := pollN(t, p.cqA, 4)
		for i := range wc {
			require.Equal(t, uint64(i), wc[i].WRID)
		}
		pollN(t, p.cqA, 0)
	})
}

// UD over an InfiniBand port of the fake: QUERY_PORT and CREATE_AH answered
// by the fake, the AV built by the provider, datagrams delivered by the
// model to the QPN the WR names.
func TestFakeKernelUD(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		k := newFakeKernel(t, ioctl)
		k.dev.ib = true // the fake's port is InfiniBand (QUERY_PORT link_layer 1)
		ctx, err := k.device().Open()
		require.NoError(t, err)
		defer ctx.Close()
		pd, err := ctx.AllocPD()
		require.NoError(t, err)
		mem, err := sys.MmapAnon(1<<16, 0)
		require.NoError(t, err)
		defer sys.Munmap(mem)
		mr, err := pd.RegMR(mem, uverbs.AccessLocalWrite)
		require.NoError(t, err)
		var cqs [2]*uverbs.CQ
		var qps [2]*uverbs.QP
		for i := range qps {
			cqs[i], err = ctx.CreateCQ(uverbs.CQInitAttr{CQE: 7})
			require.NoError(t, err)
			qps[i], err = pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: cqs[i], RecvCQ: cqs[i],
				Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
			require.NoError(t, err)
			q := qps[i]
			require.NoError(t, q.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, Port: 1, QKey: 0x11111111},
				uverbs.QPAttrState|uverbs.QPAttrPkeyIndex|uverbs.QPAttrPort|uverbs.QPAttrQKey))
			require.NoError(t, q.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState))
			require.NoError(t, q.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState|uverbs.QPAttrSQPSN))
		}
		a, b := k.attach(t, qps[0], cqs[0], cqs[0]), k.attach(t, qps[1], cqs[1], cqs[1])
		ah, err := pd.CreateAH(uverbs.AHAttr{DLID: 1, Port: 1})
		require.NoError(t, err)
		gah, err := pd.CreateAH(uverbs.AHAttr{DLID: 1, Port: 1, IsGlobal: true, GRH: uverbs.GlobalRoute{HopLimit: 64}})
		require.NoError(t, err)
		for i := 0; i < 12; i++ {
			h, flags := ah, uverbs.WCFlags(0)
			if i%2 == 1 { // a global AV: the datagram carries a GRH
				h, flags = gah, uverbs.WCWithGRH
			}
			copy(mem, []byte{byte(i), 1, 2, 3})
			_, err := qps[1].PostRecv([]uverbs.RecvWR{{WRID: uint64(100 + i), SGL: []uverbs.SGE{{Addr: memAddr(mem[4096:]), Length: 256, LKey: mr.LKey()}}}})
			require.NoError(t, err)
			_, err = qps[0].PostSend([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				AH: h, RemoteQPN: qps[1].QPN(), RemoteQKey: 0x11111111, SGL: []uverbs.SGE{{Addr: memAddr(mem), Length: 50, LKey: mr.LKey()}}}})
			require.NoError(t, err)
			require.NoError(t, k.dev.ring(a))
			wc := pollN(t, cqs[0], 1)
			require.Equal(t, uverbs.WC{WRID: uint64(i), Opcode: uverbs.WCSend, QPN: a.qpn}, wc[0])
			wc = pollN(t, cqs[1], 1)
			require.Equal(t, uverbs.WC{WRID: uint64(100 + i), Opcode: uverbs.WCRecv, ByteLen: 50, QPN: b.qpn, SrcQP: a.qpn, Flags: flags}, wc[0])
			require.Equal(t, byte(i), mem[4096], "the datagram landed in the receive buffer")
		}
	})
}

// ibgo's mlx5 provider has no memory windows: allocating one is refused
// with ErrNotSupported before any command reaches the kernel, and a bind or
// invalidate work request is refused at post, nothing rung.
func TestFakeKernelRefusesMemoryWindows(t *testing.T) {
	p := newFKPair(t, true, 8, 8, 16, false)
	for _, typ := range []uverbs.MWType{uverbs.MWType1, uverbs.MWType2} {
		mw, err := p.pd.AllocMW(typ)
		require.ErrorIs(t, err, uverbs.ErrNotSupported, "%s", typ)
		require.Nil(t, mw)
	}
	for _, op := range []uverbs.WROpcode{uverbs.WRBindMW, uverbs.WRLocalInv} {
		n, err := p.a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: op, Flags: uverbs.SendSignaled}})
		require.Zero(t, n, "%s", op)
		require.Error(t, err, "%s", op)
	}
	wc := make([]uverbs.WC, 4)
	n, err := p.cqA.Poll(wc)
	require.NoError(t, err)
	require.Zero(t, n, "nothing was posted")
}
