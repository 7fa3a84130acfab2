//go:build linux

package uverbs_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/uverbs"
)

// mwMR is memory the peer can reach only through a window: the MR itself
// grants no remote rights (rdma-core tests/test_mr.py: MWRC registers with
// LOCAL_WRITE|MW_BIND).
const mwMR = uverbs.AccessLocalWrite | uverbs.AccessMWBind

const mwRights = uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead

func (b *bed) mw(typ uverbs.MWType) *uverbs.MW {
	b.t.Helper()
	mw, err := b.pd.AllocMW(typ)
	require.NoError(b.t, err)
	b.t.Cleanup(func() { require.NoError(b.t, mw.Close()) })
	return mw
}

// rdma posts one signalled RDMA write or read of n bytes from a's buffer at
// off to the remote address and returns its completion.
func (p *pair) rdma(op uverbs.WROpcode, mr *uverbs.MR, off, n int, raddr uint64, rkey uint32) uverbs.WC {
	p.b.t.Helper()
	_, err := p.a.PostSend([]uverbs.SendWR{{WRID: 77, Opcode: op, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{mr.SGE(off, n)}, RemoteAddr: raddr, RKey: rkey}})
	require.NoError(p.b.t, err)
	return wait(p.b.t, p.acq, 1)[0]
}

// bindType2 binds mw to [addr, addr+n) of mr from z with a work request and
// returns the new key.
func (p *pair) bindType2(mw *uverbs.MW, mr *uverbs.MR, addr uint64, n int) uint32 {
	t := p.b.t.(*testing.T)
	t.Helper()
	key := uverbs.IncRKey(mw.RKey())
	_, err := p.z.PostSend([]uverbs.SendWR{{WRID: 9, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled,
		Bind: uverbs.MWBindWR{MW: mw, RKey: key, Info: uverbs.MWBindInfo{MR: mr, Addr: addr, Length: uint64(n), Access: mwRights}}}})
	require.NoError(t, err)
	requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCBindMW, 9)
	require.Equal(t, key, mw.RKey(), "a posted bind gives the window its new key")
	return key
}

// writeReadThrough writes a pattern into the window and reads it back, and
// checks both landed where the window points.
func writeReadThrough(t *testing.T, p *pair, am *uverbs.Memory, amr *uverbs.MR, zm *uverbs.Memory, zoff int, raddr uint64, rkey uint32, seed byte) {
	t.Helper()
	fill(am.Bytes()[:1024], seed)
	requireWC(t, p.rdma(uverbs.WRRDMAWrite, amr, 0, 1024, raddr, rkey), uverbs.WCSuccess, uverbs.WCRDMAWrite, 77)
	require.Equal(t, am.Bytes()[:1024], zm.Bytes()[zoff:zoff+1024], "data written through the window")
	requireWC(t, p.rdma(uverbs.WRRDMARead, amr, 2048, 1024, raddr, rkey), uverbs.WCSuccess, uverbs.WCRDMARead, 77)
	require.Equal(t, zm.Bytes()[zoff:zoff+1024], am.Bytes()[2048:3072], "data read through the window")
}

// rdma-core tests/test_mr.py: test_mw_type1, test_invalidate_mw_type1 (and
// test_mw_ex_type1: ibgo registers every MR with one command).
func TestMWType1(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	am, amr := b.mem(8192, allAccess)
	zm, zmr := b.mem(16384, mwMR)
	mw := b.mw(uverbs.MWType1)
	require.Equal(t, uverbs.MWType1, mw.Type())
	old := mw.RKey()

	// The MR alone grants nothing remote.
	p2 := b.pair(uverbs.QPTypeRC, defaultCap)
	requireWC(t, p2.rdma(uverbs.WRRDMAWrite, amr, 0, 64, zmr.Addr(), zmr.RKey()), uverbs.WCRemAccessErr, 0, 77)

	// Bind the window to the second 4 KiB of the MR.
	win := zmr.Addr() + 4096
	key, err := p.z.BindMW(mw, uverbs.MWBind{WRID: 5, Flags: uverbs.SendSignaled,
		Info: uverbs.MWBindInfo{MR: zmr, Addr: win, Length: 4096, Access: mwRights}})
	require.NoError(t, err)
	requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCBindMW, 5)
	require.Equal(t, key, mw.RKey())
	require.Equal(t, uverbs.IncRKey(old), key)
	require.Equal(t, old&^0xff, key&^0xff, "a bind changes only the key byte")
	writeReadThrough(t, p, am, amr, zm, 4096, win, key, 3)
	// A type 1 window is not tied to a QP: another connection reaches it.
	p3 := b.pair(uverbs.QPTypeRC, defaultCap)
	writeReadThrough(t, p3, am, amr, zm, 4096+1024, win+1024, key, 4)
	// Past the memory behind the window, and with rights it does not
	// grant, access fails. (rxe of 6.1 and 6.12 checks a window access
	// against the range of the window's MR, not the window's own range:
	// kernel rxe_resp.c: check_rkey calls mr_check_range on mw->mr.)
	requireWC(t, p3.rdma(uverbs.WRRDMAWrite, amr, 0, 64, zmr.Addr()+uint64(zmr.Len())-32, key), uverbs.WCRemAccessErr, 0, 77)
	p4 := b.pair(uverbs.QPTypeRC, defaultCap)
	_, err = p4.a.PostSend([]uverbs.SendWR{{WRID: 77, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(0, 8)}, RemoteAddr: win, RKey: key, CompareAdd: 1}})
	require.NoError(t, err)
	requireWC(t, wait(t, p4.acq, 1)[0], uverbs.WCRemAccessErr, 0, 77)

	// A zero-length bind invalidates the window: its key stops working.
	key2, err := p.z.BindMW(mw, uverbs.MWBind{WRID: 6, Flags: uverbs.SendSignaled, Info: uverbs.MWBindInfo{MR: zmr, Addr: win}})
	require.NoError(t, err)
	requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCBindMW, 6)
	wc := p.rdma(uverbs.WRRDMAWrite, amr, 0, 64, win, key2)
	require.Equal(t, uverbs.WCRemAccessErr, wc.Status, "write through an invalidated type 1 window: %s", wc.Status)

	// Type 1 windows are bound by BindMW only, never zero based.
	mw2 := b.mw(uverbs.MWType1)
	_, err = p2.z.BindMW(mw2, uverbs.MWBind{Info: uverbs.MWBindInfo{MR: zmr, Addr: 0, Length: 64, Access: mwRights | uverbs.AccessZeroBased}})
	require.ErrorIs(t, err, unix.EINVAL)
	require.Equal(t, uint32(0x12345600), uverbs.IncRKey(0x123456ff), "the key byte wraps inside its 8 bits")
}

// rdma-core tests/test_mr.py: test_mw_type2, and the rules a type 2 window
// adds: reachable only through the QP that bound it, rebound after an
// invalidation with a new key, never by BindMW.
func TestMWType2(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	am, amr := b.mem(8192, allAccess)
	zm, zmr := b.mem(16384, mwMR)
	mw := b.mw(uverbs.MWType2)
	_, err := p.z.BindMW(mw, uverbs.MWBind{Info: uverbs.MWBindInfo{MR: zmr, Addr: zmr.Addr(), Length: 64}})
	require.ErrorIs(t, err, unix.EINVAL, "type 2 windows are bound by work requests")

	win := zmr.Addr() + 8192
	key := p.bindType2(mw, zmr, win, 4096)
	writeReadThrough(t, p, am, amr, zm, 8192, win, key, 7)

	// Another connection to the same PD cannot use a type 2 window.
	p2 := b.pair(uverbs.QPTypeRC, defaultCap)
	requireWC(t, p2.rdma(uverbs.WRRDMAWrite, amr, 0, 64, win, key), uverbs.WCRemAccessErr, 0, 77)

	// Invalidate locally, rebind with the next key: the new key works, the
	// old one does not.
	_, err = p.z.PostSend([]uverbs.SendWR{{WRID: 10, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, Imm: key}})
	require.NoError(t, err)
	requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCLocalInv, 10)
	key2 := p.bindType2(mw, zmr, win-4096, 4096)
	require.NotEqual(t, key, key2)
	writeReadThrough(t, p, am, amr, zm, 4096, win-4096, key2, 9)
	requireWC(t, p.rdma(uverbs.WRRDMAWrite, amr, 0, 64, win-4096, key), uverbs.WCRemAccessErr, 0, 77)
}

// rdma-core tests/test_mr.py: test_mw_type2_invalidate_local.
func TestMWType2InvalidateLocal(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	am, amr := b.mem(8192, allAccess)
	zm, zmr := b.mem(8192, mwMR)
	mw := b.mw(uverbs.MWType2)
	key := p.bindType2(mw, zmr, zmr.Addr(), 8192)
	writeReadThrough(t, p, am, amr, zm, 0, zmr.Addr(), key, 11)
	_, err := p.z.PostSend([]uverbs.SendWR{{WRID: 10, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, Imm: key}})
	require.NoError(t, err)
	requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCLocalInv, 10)
	before := append([]byte(nil), zm.Bytes()[:64]...)
	fill(am.Bytes()[:64], 99)
	requireWC(t, p.rdma(uverbs.WRRDMAWrite, amr, 0, 64, zmr.Addr(), key), uverbs.WCRemAccessErr, 0, 77)
	require.Equal(t, before, zm.Bytes()[:64], "nothing was written through the invalidated window")
}

// rdma-core tests/test_mr.py: test_mw_type2_invalidate_remote.
func TestMWType2InvalidateRemote(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	am, amr := b.mem(8192, allAccess)
	zm, zmr := b.mem(8192, mwMR|uverbs.AccessLocalWrite)
	_, rbuf := b.mem(4096, allAccess)
	mw := b.mw(uverbs.MWType2)
	key := p.bindType2(mw, zmr, zmr.Addr(), 4096)
	writeReadThrough(t, p, am, amr, zm, 0, zmr.Addr(), key, 13)
	// The peer's SEND_WITH_INV invalidates the window at the receiver,
	// which sees the key in its completion.
	_, err := p.z.PostRecv([]uverbs.RecvWR{{WRID: 20, SGL: []uverbs.SGE{rbuf.SGE(0, 256)}}})
	require.NoError(t, err)
	_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 21, Opcode: uverbs.WRSendWithInv, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(0, 32)}, Imm: key}})
	require.NoError(t, err)
	requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 21)
	rc := wait(t, p.zcq, 1)[0]
	requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, 20)
	require.NotZero(t, rc.Flags&uverbs.WCWithInv, "the receive says it invalidated a key")
	require.Equal(t, key, rc.Imm, "and which")
	requireWC(t, p.rdma(uverbs.WRRDMAWrite, amr, 0, 64, zmr.Addr(), key), uverbs.WCRemAccessErr, 0, 77)
	// SEND_WITH_INV exists on RC only.
	_, err = b.pair(uverbs.QPTypeUC, defaultCap).a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSendWithInv, SGL: []uverbs.SGE{amr.SGE(0, 8)}, Imm: key}})
	require.ErrorIs(t, err, unix.EINVAL)
}

// rdma-core tests/test_mr.py: test_mw_type2_invalidate_dealloc.
func TestMWType2Dealloc(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	am, amr := b.mem(8192, allAccess)
	zm, zmr := b.mem(8192, mwMR)
	mw, err := b.pd.AllocMW(uverbs.MWType2)
	require.NoError(t, err)
	key := p.bindType2(mw, zmr, zmr.Addr(), 4096)
	writeReadThrough(t, p, am, amr, zm, 0, zmr.Addr(), key, 15)
	// The MR cannot go while a window is bound to it.
	require.Error(t, zmr.Close(), "rxe refuses to deregister an MR with a bound window")
	require.NoError(t, mw.Close())
	require.NoError(t, mw.Close(), "Close is idempotent")
	requireWC(t, p.rdma(uverbs.WRRDMAWrite, amr, 0, 64, zmr.Addr(), key), uverbs.WCRemAccessErr, 0, 77)
}

// rdma-core tests/test_mr.py: test_reg_mw_wrong_type, and the bind errors
// the device reports in the completion (IBA C10-73: the MR must allow
// binding).
func TestMWBadFlows(t *testing.T) {
	b := newBed(t)
	_, err := b.pd.AllocMW(3)
	require.ErrorIs(t, err, unix.EINVAL)
	var ue *uverbs.Error
	require.ErrorAs(t, err, &ue)
	_, err = b.pd.AllocMW(0)
	require.ErrorIs(t, err, unix.EINVAL)

	// Binding to an MR registered without MW_BIND fails in its completion
	// (6.1: MW_BIND_ERR; 6.12's rxe moves the QP to ERR first and reports
	// the failed bind as flushed), and the window stays unusable.
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	_, amr := b.mem(4096, allAccess)
	_, nobind := b.mem(4096, uverbs.AccessLocalWrite)
	mw := b.mw(uverbs.MWType2)
	key := uverbs.IncRKey(mw.RKey())
	_, err = p.z.PostSend([]uverbs.SendWR{{WRID: 30, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled,
		Bind: uverbs.MWBindWR{MW: mw, RKey: key, Info: uverbs.MWBindInfo{MR: nobind, Addr: nobind.Addr(), Length: 64, Access: mwRights}}}})
	require.NoError(t, err)
	wc := wait(t, p.zcq, 1)[0]
	require.Contains(t, []uverbs.WCStatus{uverbs.WCMWBindErr, uverbs.WCWRFlushErr}, wc.Status, "bind to an MR without MW_BIND: %s", wc.Status)
	require.EqualValues(t, 30, wc.WRID)
	p2 := b.pair(uverbs.QPTypeRC, defaultCap)
	requireWC(t, p2.rdma(uverbs.WRRDMAWrite, amr, 0, 8, nobind.Addr(), key), uverbs.WCRemAccessErr, 0, 77)

	// Malformed bind requests never reach the queue.
	for name, wr := range map[string]uverbs.SendWR{
		"no window":      {Opcode: uverbs.WRBindMW, Bind: uverbs.MWBindWR{RKey: 1, Info: uverbs.MWBindInfo{MR: amr, Length: 8}}},
		"no MR":          {Opcode: uverbs.WRBindMW, Bind: uverbs.MWBindWR{MW: mw, Info: uverbs.MWBindInfo{Length: 8}}},
		"with SGEs":      {Opcode: uverbs.WRBindMW, SGL: []uverbs.SGE{amr.SGE(0, 8)}, Bind: uverbs.MWBindWR{MW: mw}},
		"immediate data": {Opcode: uverbs.WRBindMW, Imm: 1, Bind: uverbs.MWBindWR{MW: mw}},
	} {
		n, err := p2.z.PostSend([]uverbs.SendWR{wr})
		require.Zero(t, n, name)
		require.ErrorIs(t, err, unix.EINVAL, name)
	}
	a, _, _, _, _ := b.udPair()
	_, err = a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRBindMW, Bind: uverbs.MWBindWR{MW: mw}}})
	require.ErrorIs(t, err, unix.EINVAL, "no binds on UD")

	// A closed window is refused before anything is posted.
	mw3, err := b.pd.AllocMW(uverbs.MWType1)
	require.NoError(t, err)
	require.NoError(t, mw3.Close())
	_, err = p2.z.BindMW(mw3, uverbs.MWBind{})
	require.ErrorIs(t, err, uverbs.ErrClosed)
}
