//go:build linux

package uverbs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/uverbs"
)

// rdma-core tests/test_qpex.py, test_cqex.py: traffic posted through the
// extended work-request API (QPEx) and polled through the extended CQ API
// (StartPoll and the Read* getters), checked against what was sent.

// exCQ creates a CQ for the extended poll with the standard WC fields, as
// test_cqex.py's create_ex_cq does.
func (b *bed) exCQ(n int) *uverbs.CQ {
	b.t.Helper()
	cq, err := b.ctx.CreateCQ(uverbs.CQInitAttr{CQE: n, WCFlags: uverbs.WCExStandard})
	require.NoError(b.t, err)
	b.t.Cleanup(func() { require.NoError(b.t, cq.Close()) })
	require.Equal(b.t, uverbs.WCExStandard, cq.WCFlags())
	return cq
}

func (b *bed) exQP(typ uverbs.QPType, cq *uverbs.CQ, ops uverbs.SendOps) *uverbs.QP {
	b.t.Helper()
	qp, err := b.pd.CreateQP(uverbs.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: defaultCap, SendOps: ops})
	require.NoError(b.t, err)
	b.t.Cleanup(func() { require.NoError(b.t, qp.Close()) })
	require.NotNil(b.t, qp.Ex())
	require.Equal(b.t, ops, qp.Ex().SendOps())
	return qp
}

// exPair is two connected QPs of typ with QPEx for ops, each on its own
// extended CQ.
func (b *bed) exPair(typ uverbs.QPType, ops uverbs.SendOps, access uverbs.Access) *pair {
	b.t.Helper()
	p := &pair{b: b, acq: b.exCQ(256), zcq: b.exCQ(256)}
	p.a = b.exQP(typ, p.acq, ops)
	p.z = b.exQP(typ, p.zcq, ops)
	params := b.params()
	params.Access = access // 0: the default
	require.NoError(b.t, p.a.Connect(uverbs.Endpoint{QPN: p.z.QPN(), PSN: 200, GID: b.gid}, 100, params))
	require.NoError(b.t, p.z.Connect(uverbs.Endpoint{QPN: p.a.QPN(), PSN: 100, GID: b.gid}, 200, params))
	return p
}

// readWC is what the getters say about the current completion.
func readWC(cq *uverbs.CQ) uverbs.WC {
	return uverbs.WC{WRID: cq.WRID(), Status: cq.Status(), Opcode: cq.ReadOpcode(), VendorErr: cq.ReadVendorErr(),
		ByteLen: cq.ReadByteLen(), Imm: cq.ReadImmData(), QPN: cq.ReadQPNum(), SrcQP: cq.ReadSrcQP(),
		Flags: cq.ReadWCFlags(), SLID: cq.ReadSLID(), SL: cq.ReadSL(), DLIDPathBits: cq.ReadDLIDPathBits(),
		PkeyIndex: cq.ReadPkeyIndex(), Timestamp: cq.ReadCompletionTS()}
}

// pollExN waits for n completions through StartPoll/NextPoll/EndPoll (never
// reading past the n-th, which would consume it) and returns what the
// getters read.
func pollExN(t *testing.T, cq *uverbs.CQ, n int) []uverbs.WC {
	t.Helper()
	var out []uverbs.WC
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < n {
		err := cq.StartPoll()
		if err != nil {
			require.ErrorIs(t, err, uverbs.ErrCQEmpty)
			require.ErrorIs(t, err, unix.ENOENT)
			if time.Now().After(deadline) {
				t.Fatalf("waited 20s for %d completions, got %d: %+v", n, len(out), out)
			}
			time.Sleep(20 * time.Microsecond)
			continue
		}
		for {
			out = append(out, readWC(cq))
			if len(out) == n {
				break
			}
			if err := cq.NextPoll(); err != nil {
				require.ErrorIs(t, err, uverbs.ErrCQEmpty)
				break
			}
		}
		cq.EndPoll()
	}
	return out
}

func pollEx(t *testing.T, cq *uverbs.CQ) uverbs.WC { t.Helper(); return pollExN(t, cq, 1)[0] }

const rcExOps = uverbs.SendOpSend | uverbs.SendOpSendWithImm | uverbs.SendOpRDMAWrite | uverbs.SendOpRDMAWriteWithImm |
	uverbs.SendOpRDMARead | uverbs.SendOpAtomicCmpAndSwp | uverbs.SendOpAtomicFetchAdd

// test_qp_ex_rc_send, _send_imm, _rdma_write, _rdma_write_imm,
// _rdma_read (+ zero-size), _atomic_cmp_swp, _atomic_fetch_add, and
// test_rc_traffic_cq_ex: data lands, atomics return the old value, and every
// WC field read through the getters is what was sent.
func TestQPExRCTraffic(t *testing.T) {
	b := newBed(t)
	p := b.exPair(uverbs.QPTypeRC, rcExOps, 0)
	am, amr := b.mem(1<<16, allAccess)
	zm, zmr := b.mem(1<<16, allAccess)
	src, dst := am.Bytes(), zm.Bytes()
	ax, zx := p.a.Ex(), p.z.Ex()

	recv := func(wrid uint64, off, n uint32) {
		wr := uverbs.RecvWR{WRID: wrid}
		if n > 0 {
			wr.SGL = []uverbs.SGE{zmr.SGE(int(off), int(n))}
		}
		_, err := p.z.PostRecv([]uverbs.RecvWR{wr})
		require.NoError(t, err)
	}
	sendDone := func(wrid uint64, op uverbs.WCOpcode, byteLen uint32) uverbs.WC {
		wc := pollEx(t, p.acq)
		require.Equal(t, uverbs.WCSuccess, wc.Status, "wr %d: %s", wc.WRID, wc.Status)
		require.EqualValues(t, wrid, wc.WRID)
		require.Equal(t, op, wc.Opcode)
		require.Equal(t, p.a.QPN(), wc.QPN)
		if op == uverbs.WCRDMARead || op == uverbs.WCCompSwap || op == uverbs.WCFetchAdd {
			require.EqualValues(t, byteLen, wc.ByteLen, "wr %d", wrid)
		}
		return wc
	}

	for i := 0; i < 10; i++ {
		seed := byte(i * 13)
		size := uint32(64 + i*397)
		// SEND from an SGE list, and SEND_WITH_IMM with inline data.
		fill(src[:size], seed)
		recv(uint64(100+i), 0, 8192)
		ax.Start()
		ax.WRID, ax.Flags = uint64(i), uverbs.SendSignaled
		ax.Send()
		ax.SetSGEList([]uverbs.SGE{amr.SGE(0, int(size/2)), amr.SGE(int(size/2), int(size-size/2))})
		require.NoError(t, ax.Complete())
		sendDone(uint64(i), uverbs.WCSend, 0)
		rc := pollEx(t, p.zcq)
		require.Equal(t, uverbs.WCSuccess, rc.Status, rc.Status.String())
		require.EqualValues(t, 100+i, rc.WRID)
		require.Equal(t, uverbs.WCRecv, rc.Opcode)
		require.EqualValues(t, size, rc.ByteLen)
		require.Equal(t, p.z.QPN(), rc.QPN)
		require.Zero(t, rc.Flags&(uverbs.WCWithImm|uverbs.WCWithInv))
		require.True(t, bytes.Equal(src[:size], dst[:size]), "iteration %d: SEND payload differs", i)

		inl := []byte{seed, 1, 2, 3, 4, 5, 6, 7, 8, 9, byte(i)}
		recv(uint64(200+i), 0, 8192)
		ax.Start()
		ax.WRID = uint64(1000 + i)
		ax.SendImm(0xc0de0000 + uint32(i))
		ax.SetInlineData(inl)
		require.NoError(t, ax.Complete())
		sendDone(uint64(1000+i), uverbs.WCSend, 0)
		rc = pollEx(t, p.zcq)
		require.Equal(t, uverbs.WCSuccess, rc.Status, rc.Status.String())
		require.Equal(t, uverbs.WCRecv, rc.Opcode)
		require.EqualValues(t, len(inl), rc.ByteLen)
		require.NotZero(t, rc.Flags&uverbs.WCWithImm)
		require.EqualValues(t, 0xc0de0000+uint32(i), rc.Imm, "imm data read back in host order")
		require.Equal(t, inl, dst[:len(inl)])

		// RDMA WRITE, then WRITE_WITH_IMM (which consumes a receive).
		fill(src[:size], seed+1)
		ax.Start()
		ax.WRID = uint64(2000 + i)
		ax.RDMAWrite(zmr.RKey(), zmr.Addr()+8192)
		ax.SetSGE(amr.LKey(), amr.Addr(), size)
		require.NoError(t, ax.Complete())
		sendDone(uint64(2000+i), uverbs.WCRDMAWrite, 0)
		require.True(t, bytes.Equal(src[:size], dst[8192:8192+size]), "iteration %d: WRITE payload differs", i)

		recv(uint64(300+i), 0, 0)
		ax.Start()
		ax.WRID = uint64(3000 + i)
		ax.RDMAWriteImm(zmr.RKey(), zmr.Addr()+16384, 0x1234+uint32(i))
		ax.SetSGE(amr.LKey(), amr.Addr(), size)
		require.NoError(t, ax.Complete())
		sendDone(uint64(3000+i), uverbs.WCRDMAWrite, 0)
		rc = pollEx(t, p.zcq)
		require.Equal(t, uverbs.WCRecvRDMAWithImm, rc.Opcode)
		require.EqualValues(t, 300+i, rc.WRID)
		require.EqualValues(t, size, rc.ByteLen)
		require.EqualValues(t, 0x1234+uint32(i), rc.Imm)
		require.True(t, bytes.Equal(src[:size], dst[16384:16384+size]))

		// RDMA READ back into a's second half.
		fill(dst[24576:24576+size], seed+2)
		ax.Start()
		ax.WRID = uint64(4000 + i)
		ax.RDMARead(zmr.RKey(), zmr.Addr()+24576)
		ax.SetSGE(amr.LKey(), amr.Addr()+32768, size)
		require.NoError(t, ax.Complete())
		sendDone(uint64(4000+i), uverbs.WCRDMARead, size)
		require.True(t, bytes.Equal(dst[24576:24576+size], src[32768:32768+size]), "iteration %d: READ payload differs", i)

		// Atomics on one word of z, both in one batch (one doorbell).
		binary.LittleEndian.PutUint64(dst[40960:], uint64(1000*i))
		ax.Start()
		ax.WRID = uint64(5000 + i)
		ax.AtomicFetchAdd(zmr.RKey(), zmr.Addr()+40960, 7)
		ax.SetSGE(amr.LKey(), amr.Addr()+40960, 8)
		ax.WRID = uint64(6000 + i)
		ax.AtomicCmpSwp(zmr.RKey(), zmr.Addr()+40960, uint64(1000*i+7), 0xabcdef)
		ax.SetSGE(amr.LKey(), amr.Addr()+40968, 8)
		require.NoError(t, ax.Complete())
		wcs := pollExN(t, p.acq, 2) // NextPoll walks the second
		for j, want := range []struct {
			wrid uint64
			op   uverbs.WCOpcode
		}{{uint64(5000 + i), uverbs.WCFetchAdd}, {uint64(6000 + i), uverbs.WCCompSwap}} {
			require.Equal(t, uverbs.WCSuccess, wcs[j].Status, wcs[j].Status.String())
			require.Equal(t, want.wrid, wcs[j].WRID)
			require.Equal(t, want.op, wcs[j].Opcode)
			require.EqualValues(t, 8, wcs[j].ByteLen)
			require.Equal(t, p.a.QPN(), wcs[j].QPN)
		}
		require.EqualValues(t, 1000*i, binary.LittleEndian.Uint64(src[40960:]), "fetch-add returns the old value")
		require.EqualValues(t, 1000*i+7, binary.LittleEndian.Uint64(src[40968:]), "cmp-swap returns the old value")
		require.EqualValues(t, 0xabcdef, binary.LittleEndian.Uint64(dst[40960:]), "the swap happened")
	}

	// Zero-size WRITE and READ (test_qp_ex_rc_rdma_write_zero_size, _read_zero_size).
	ax.Start()
	ax.WRID = 7000
	ax.RDMAWrite(zmr.RKey(), zmr.Addr())
	ax.SetSGE(amr.LKey(), amr.Addr(), 0)
	ax.WRID = 7001
	ax.RDMARead(zmr.RKey(), zmr.Addr())
	ax.SetSGE(amr.LKey(), amr.Addr(), 0)
	require.NoError(t, ax.Complete())
	sendDone(7000, uverbs.WCRDMAWrite, 0)
	sendDone(7001, uverbs.WCRDMARead, 0)

	// An aborted batch posts nothing: the next completion is the next batch's.
	ax.Start()
	ax.WRID = 8000
	ax.RDMAWrite(zmr.RKey(), zmr.Addr())
	ax.SetSGE(amr.LKey(), amr.Addr(), 8)
	ax.Abort()
	ax.Start()
	ax.WRID = 8001
	ax.RDMAWrite(zmr.RKey(), zmr.Addr())
	ax.SetSGE(amr.LKey(), amr.Addr(), 8)
	require.NoError(t, ax.Complete())
	sendDone(8001, uverbs.WCRDMAWrite, 0)

	// An operation the QP was not created for is refused at Complete.
	zx.Start()
	zx.SendInv(1)
	require.ErrorIs(t, zx.Complete(), uverbs.ErrNotSupported)
}

// test_qp_ex_ud_send, _ud_send_imm, _ud_zero_size, test_ud_traffic_cq_ex:
// UD through SetUDAddr; the receiver's getters report the source QP and the
// GRH.
func TestQPExUDTraffic(t *testing.T) {
	b := newBed(t)
	acq, zcq := b.exCQ(64), b.exCQ(64)
	ops := uverbs.SendOpSend | uverbs.SendOpSendWithImm
	a, z := b.exQP(uverbs.QPTypeUD, acq, ops), b.exQP(uverbs.QPTypeUD, zcq, ops)
	for _, q := range []*uverbs.QP{a, z} {
		require.NoError(t, q.Connect(uverbs.Endpoint{}, 0, uverbs.ConnectParams{QKey: 0x11111111}))
	}
	ah, err := b.pd.CreateAH(uverbs.RoCEAH(1, b.gidx, b.gid))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ah.Close()) })
	am, amr := b.mem(8192, allAccess)
	zm, zmr := b.mem(8192, allAccess)
	ax := a.Ex()
	for i, size := range []int{0, 1, 100, 1000, 4000 - 40} {
		fill(am.Bytes()[:size], byte(i))
		_, err := z.PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{zmr.SGE(0, 40+size)}}})
		require.NoError(t, err)
		ax.Start()
		ax.WRID, ax.Flags = uint64(100+i), uverbs.SendSignaled
		if i%2 == 0 {
			ax.Send()
		} else {
			ax.SendImm(uint32(0x55aa0000 + i))
		}
		ax.SetUDAddr(ah, z.QPN(), 0x11111111)
		ax.SetSGE(amr.LKey(), amr.Addr(), uint32(size))
		require.NoError(t, ax.Complete())
		sc := pollEx(t, acq)
		require.Equal(t, uverbs.WCSuccess, sc.Status, sc.Status.String())
		require.EqualValues(t, 100+i, sc.WRID)
		require.Equal(t, uverbs.WCSend, sc.Opcode)
		rc := pollEx(t, zcq)
		require.Equal(t, uverbs.WCSuccess, rc.Status, rc.Status.String())
		require.EqualValues(t, i, rc.WRID)
		require.Equal(t, uverbs.WCRecv, rc.Opcode)
		require.EqualValues(t, 40+size, rc.ByteLen)
		require.Equal(t, z.QPN(), rc.QPN)
		require.Equal(t, a.QPN(), rc.SrcQP)
		require.NotZero(t, rc.Flags&uverbs.WCWithGRH)
		if i%2 == 1 {
			require.NotZero(t, rc.Flags&uverbs.WCWithImm)
			require.EqualValues(t, 0x55aa0000+i, rc.Imm)
		} else {
			require.Zero(t, rc.Flags&uverbs.WCWithImm)
		}
		require.Equal(t, am.Bytes()[:size], zm.Bytes()[40:40+size])
	}

	// Inline data from unregistered Go memory, spread over a list.
	_, err = z.PostRecv([]uverbs.RecvWR{{WRID: 50, SGL: []uverbs.SGE{zmr.SGE(0, 40+64)}}})
	require.NoError(t, err)
	ax.Start()
	ax.WRID = 51
	ax.Send()
	ax.SetUDAddr(ah, z.QPN(), 0x11111111)
	ax.SetInlineDataList([][]byte{[]byte("go "), []byte("memory, "), []byte("inline")})
	require.NoError(t, ax.Complete())
	require.EqualValues(t, 51, pollEx(t, acq).WRID)
	rc := pollEx(t, zcq)
	require.Equal(t, uverbs.WCSuccess, rc.Status, rc.Status.String())
	require.EqualValues(t, 40+17, rc.ByteLen)
	require.Equal(t, "go memory, inline", string(zm.Bytes()[40:57]))

	// UD takes SEND and SEND_WITH_IMM only (rdma-core's rxe: RXE_SUP_UD_QP_SEND_OPS_FLAGS).
	_, err = b.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: acq, RecvCQ: acq, Cap: defaultCap,
		SendOps: uverbs.SendOpSend | uverbs.SendOpRDMAWrite})
	require.ErrorIs(t, err, uverbs.ErrNotSupported)
}

// test_create_cq_ex, test_create_cq_ex_bad_flow: each WC flag rxe can
// provide creates a CQ, the rest are ErrNotSupported (EOPNOTSUPP in C);
// too many entries and a comp vector out of range are EINVAL.
func TestCQExCreate(t *testing.T) {
	b := newBed(t)
	for f := uverbs.WCExFlags(1); f <= uverbs.WCExCompletionTimestampWallclock; f <<= 1 {
		cq, err := b.ctx.CreateCQ(uverbs.CQInitAttr{CQE: 10, WCFlags: f})
		if f&uverbs.WCExStandard != 0 {
			require.NoError(t, err, "wc flag %#x", uint64(f))
			require.NoError(t, cq.Close())
			continue
		}
		// rxe has no completion timestamps (the kernel says EOPNOTSUPP; the
		// wall-clock flag is refused before the create, rxe having neither
		// a wall-clock format nor a completion clock), and ibgo's WC has no
		// CVLAN, flow tag or TM info.
		require.ErrorIs(t, err, uverbs.ErrNotSupported, "wc flag %#x", uint64(f))
	}
	attr, err := b.ctx.QueryDevice()
	require.NoError(t, err)
	_, err = b.ctx.CreateCQ(uverbs.CQInitAttr{CQE: int(attr.MaxCQE) + 1, WCFlags: uverbs.WCExStandard})
	require.ErrorIs(t, err, unix.EINVAL)
	_, err = b.ctx.CreateCQ(uverbs.CQInitAttr{CQE: 10, WCFlags: uverbs.WCExStandard, CompVector: b.ctx.NumCompVectors() + 1})
	require.ErrorIs(t, err, unix.EINVAL)
}

// flushAtomicWriteCaps says whether the kernel's rxe has FLUSH and
// ATOMIC_WRITE (Linux 6.2+); without them, creating a QP for them must be a
// clear ErrNotSupported, and the test then skips saying so.
func flushAtomicWriteCaps(t *testing.T, b *bed, cq *uverbs.CQ, ops uverbs.SendOps) bool {
	t.Helper()
	attr, err := b.ctx.QueryDevice()
	require.NoError(t, err)
	need := uverbs.DeviceAtomicWrite
	if ops&uverbs.SendOpFlush != 0 {
		need = uverbs.DeviceFlushGlobal
	}
	if attr.DeviceCapFlagsEx&need != 0 {
		return true
	}
	_, err = b.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: defaultCap, SendOps: ops})
	require.ErrorIs(t, err, uverbs.ErrNotSupported)
	require.Contains(t, err.Error(), "Linux 6.2")
	t.Skipf("%s: the kernel's rxe has no %s (device_cap_flags_ex %#x); CreateQP refused it with ErrNotSupported as it must",
		b.vm.Dev, ops, attr.DeviceCapFlagsEx)
	return false
}

// test_qp_ex_rc_atomic_write: 8 bytes land at once at the target, and the
// completion is ATOMIC_WRITE.
func TestQPExAtomicWrite(t *testing.T) {
	b := newBed(t)
	probe := b.exCQ(8)
	flushAtomicWriteCaps(t, b, probe, uverbs.SendOpAtomicWrite)
	p := b.exPair(uverbs.QPTypeRC, uverbs.SendOpAtomicWrite|uverbs.SendOpRDMAWrite, 0)
	zmem, zmr := b.mem(4096, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	zm := zmem.Bytes()
	ax := p.a.Ex()
	for i := 0; i < 10; i++ {
		var v [8]byte
		binary.LittleEndian.PutUint64(v[:], 0x0102030405060708*uint64(i+1))
		off := uint64(8 * i)
		ax.Start()
		ax.WRID, ax.Flags = uint64(i), uverbs.SendSignaled
		ax.AtomicWrite(zmr.RKey(), zmr.Addr()+off, v)
		require.NoError(t, ax.Complete())
		wc := pollEx(t, p.acq)
		require.Equal(t, uverbs.WCSuccess, wc.Status, wc.Status.String())
		require.Equal(t, uverbs.WCAtomicWrite, wc.Opcode)
		require.EqualValues(t, i, wc.WRID)
		require.Equal(t, v[:], zm[off:off+8], "iteration %d: the 8 bytes landed", i)
	}
	// The target must be 8-byte aligned.
	ax.Start()
	ax.AtomicWrite(zmr.RKey(), zmr.Addr()+4, [8]byte{})
	require.ErrorIs(t, ax.Complete(), unix.EINVAL)
}

// test_qp_ex_rc_flush, test_qp_ex_rc_flush_type_violate: FLUSH of a range
// and of the whole MR completes successfully on an MR registered for global
// flush; asking for persistence of a non-persistent MR is a remote access
// error.
func TestQPExFlush(t *testing.T) {
	b := newBed(t)
	probe := b.exCQ(8)
	flushAtomicWriteCaps(t, b, probe, uverbs.SendOpFlush)
	// rxe's responder wants the flush types in the QP's access flags too
	// (rxe_resp.c: check_qp_attr_access); persistent is granted so that the
	// violation below is the MR's (a remote access error), not the QP's.
	p := b.exPair(uverbs.QPTypeRC, uverbs.SendOpFlush|uverbs.SendOpRDMAWrite,
		allAccess|uverbs.AccessFlushGlobal|uverbs.AccessFlushPersistent)
	am, amr := b.mem(4096, uverbs.AccessLocalWrite)
	zm, err := uverbs.AllocMemory(4096, uverbs.MemoryOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { zm.Close() })
	zmr, err := b.pd.RegMR(zm.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessFlushGlobal)
	require.NoError(t, err, "rxe with FLUSH registers FLUSH_GLOBAL memory")
	t.Cleanup(func() { zmr.Close() })
	ax := p.a.Ex()

	fill(am.Bytes()[:512], 5)
	ax.Start()
	ax.WRID, ax.Flags = 1, uverbs.SendSignaled
	ax.RDMAWrite(zmr.RKey(), zmr.Addr())
	ax.SetSGE(amr.LKey(), amr.Addr(), 512)
	ax.WRID = 2
	ax.Flush(zmr.RKey(), zmr.Addr(), 512, uverbs.FlushGlobal, uverbs.FlushRange)
	ax.WRID = 3
	ax.Flush(zmr.RKey(), zmr.Addr(), 0, uverbs.FlushGlobal, uverbs.FlushMR)
	require.NoError(t, ax.Complete())
	wcs := pollExN(t, p.acq, 3)
	for i, op := range []uverbs.WCOpcode{uverbs.WCRDMAWrite, uverbs.WCFlush, uverbs.WCFlush} {
		require.Equal(t, uverbs.WCSuccess, wcs[i].Status, "wr %d: %s", wcs[i].WRID, wcs[i].Status)
		require.EqualValues(t, i+1, wcs[i].WRID)
		require.Equal(t, op, wcs[i].Opcode)
	}
	require.Equal(t, am.Bytes()[:512], zm.Bytes()[:512], "the write before the flush landed")

	// Persistent placement on memory registered for global flush only.
	ax.Start()
	ax.WRID = 4
	ax.Flush(zmr.RKey(), zmr.Addr(), 512, uverbs.FlushPersistent, uverbs.FlushRange)
	require.NoError(t, ax.Complete())
	wc := pollEx(t, p.acq)
	require.EqualValues(t, 4, wc.WRID)
	require.Equal(t, uverbs.WCRemAccessErr, wc.Status, wc.Status.String())
}

// A QP asking for operations its provider has not (the extended API is
// per-provider in rdma-core too) is refused before any kernel command.
func TestQPExCreateBadFlow(t *testing.T) {
	b := newBed(t)
	cq := b.exCQ(8)
	for _, c := range []struct {
		typ uverbs.QPType
		ops uverbs.SendOps
	}{
		{uverbs.QPTypeUD, uverbs.SendOpRDMARead},
		{uverbs.QPTypeUC, uverbs.SendOpAtomicFetchAdd},
		{uverbs.QPTypeRC, uverbs.SendOpTSO},
		{uverbs.QPTypeUD, uverbs.SendOpBindMW},
		{uverbs.QPTypeUC, uverbs.SendOpLocalInv},
	} {
		_, err := b.pd.CreateQP(uverbs.QPInitAttr{Type: c.typ, SendCQ: cq, RecvCQ: cq, Cap: defaultCap, SendOps: c.ops})
		require.ErrorIs(t, err, uverbs.ErrNotSupported, "%s on %s", c.ops, c.typ)
		var ue *uverbs.Error
		require.True(t, errors.As(err, &ue))
	}
	qp := b.qp(uverbs.QPTypeRC, cq, cq, defaultCap, nil)
	require.Nil(t, qp.Ex(), "no QPEx without SendOps")
}

// exOnce posts one signaled RDMA WRITE through the QPEx and takes its
// completion through StartPoll/EndPoll; false on any failure (no error
// message is built, so nothing allocates).
func exOnce(p *pair, amr, zmr *uverbs.MR, size uint32) bool {
	x := p.a.Ex()
	x.Start()
	x.WRID, x.Flags = 1, uverbs.SendSignaled
	x.RDMAWrite(zmr.RKey(), zmr.Addr())
	x.SetSGE(amr.LKey(), amr.Addr(), size)
	if x.Complete() != nil {
		return false
	}
	for {
		err := p.acq.StartPoll()
		if err == nil {
			break
		}
		if err != uverbs.ErrCQEmpty {
			return false
		}
	}
	ok := p.acq.Status() == uverbs.WCSuccess && p.acq.ReadOpcode() == uverbs.WCRDMAWrite
	p.acq.EndPoll()
	return ok
}

// The extended APIs allocate nothing on the real device either: build, post
// and doorbell through the QPEx, poll through StartPoll and the getters.
func TestQPExCQExAllocateNothing(t *testing.T) {
	b := newBed(t)
	p := b.exPair(uverbs.QPTypeRC, uverbs.SendOpRDMAWrite, 0)
	_, amr := b.mem(4096, allAccess)
	_, zmr := b.mem(4096, allAccess)
	require.True(t, exOnce(p, amr, zmr, 64))
	ok := true
	allocs := testing.AllocsPerRun(200, func() { ok = ok && exOnce(p, amr, zmr, 64) })
	require.True(t, ok)
	require.Zero(t, allocs, "allocations per QPEx post + extended poll")
}

// BenchmarkQPExPostPoll is BenchmarkPostPoll's RDMAWrite4K through the
// extended APIs (QPEx post, StartPoll/EndPoll), for comparison.
func BenchmarkQPExPostPoll(bm *testing.B) {
	b := newBed(bm)
	p := b.exPair(uverbs.QPTypeRC, uverbs.SendOpRDMAWrite, 0)
	_, amr := b.mem(4096, allAccess)
	_, zmr := b.mem(4096, allAccess)
	bm.SetBytes(4096)
	bm.ReportAllocs()
	bm.ResetTimer()
	for i := 0; i < bm.N; i++ {
		if !exOnce(p, amr, zmr, 4096) {
			bm.Fatal("work request failed")
		}
	}
}

// test_qpex.py's bad flows on a UD QP created for the extended API
// (QpExUDSend): receive and extended send in RESET are EINVAL, a full
// receive queue is ENOMEM, a receive with more SGEs than the QP takes is
// EINVAL.
func TestQPExBadFlows(t *testing.T) {
	b := newBed(t)
	cq := b.exCQ(64)
	ops := uverbs.SendOpSend | uverbs.SendOpSendWithImm
	_, mr := b.mem(8192, allAccess)
	ah, err := b.pd.CreateAH(uverbs.RoCEAH(1, b.gidx, b.gid))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ah.Close()) })
	up := func() *uverbs.QP {
		qp := b.exQP(uverbs.QPTypeUD, cq, ops)
		require.NoError(t, qp.Connect(uverbs.Endpoint{}, 0, uverbs.ConnectParams{QKey: 0x11111111}))
		return qp
	}

	// test_post_receive_qp_state_bad_flow
	qp := up()
	require.NoError(t, qp.Reset())
	_, err = qp.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{mr.SGE(0, 100)}}})
	require.ErrorIs(t, err, unix.EINVAL)

	// test_post_send_qp_state_bad_flow: the kernel refuses the doorbell.
	qp = up()
	require.NoError(t, qp.Reset())
	x := qp.Ex()
	x.Start()
	x.WRID, x.Flags = 2, uverbs.SendSignaled
	x.Send()
	x.SetUDAddr(ah, qp.QPN(), 0x11111111)
	x.SetSGE(mr.LKey(), mr.Addr(), 100)
	require.ErrorIs(t, x.Complete(), unix.EINVAL)

	// test_full_rq_bad_flow
	qp = up()
	attr, _, err := qp.Query(uverbs.QPAttrCap)
	require.NoError(t, err)
	var full error
	for i := 0; i <= int(attr.Cap.MaxRecvWR); i++ {
		if _, full = qp.PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{mr.SGE(0, 100)}}}); full != nil {
			require.Equal(t, int(attr.Cap.MaxRecvWR), i, "only the receive past max_recv_wr %d fails", attr.Cap.MaxRecvWR)
			break
		}
	}
	require.ErrorIs(t, full, unix.ENOMEM)

	// test_rq_with_larger_sgl_bad_flow
	sgl := make([]uverbs.SGE, qp.Cap().MaxRecvSGE+1)
	for i := range sgl {
		sgl[i] = mr.SGE(i*8, 8)
	}
	qp = up()
	_, err = qp.PostRecv([]uverbs.RecvWR{{WRID: 9, SGL: sgl}})
	require.ErrorIs(t, err, unix.EINVAL)
}

// test_qp.py: test_create_ud_qp_with_privileged_qkey: the privileged Q_Key
// 0x80000000 is set and queried back on a UD QP, plain and created for the
// extended API (the guest runs as root, which has CAP_NET_RAW).
func TestPrivilegedQKey(t *testing.T) {
	b := newBed(t)
	cq := b.cq(8, nil)
	for _, ops := range []uverbs.SendOps{0, uverbs.SendOpSend} {
		qp, err := b.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: defaultCap, SendOps: ops})
		require.NoError(t, err)
		require.NoError(t, qp.Init(uverbs.ConnectParams{QKey: 0x80000000}))
		attr, init, err := qp.Query(uverbs.QPAttrQKey)
		require.NoError(t, err)
		require.EqualValues(t, uint32(0x80000000), attr.QKey, "send ops %s", ops)
		require.Equal(t, ops, init.SendOps)
		require.NoError(t, qp.Close())
	}
}
