//go:build linux

package uverbs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// exMWPair is two connected RC QPs with QPEx for the window operations, on
// ordinary CQs so the fixture's wait and rdma helpers apply.
func (b *bed) exMWPair(ops uverbs.SendOps) *pair {
	b.t.Helper()
	p := &pair{b: b, acq: b.cq(256, nil), zcq: b.cq(256, nil)}
	mk := func(cq *uverbs.CQ) *uverbs.QP {
		qp, err := b.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: defaultCap, SendOps: ops})
		require.NoError(b.t, err)
		b.t.Cleanup(func() { require.NoError(b.t, qp.Close()) })
		require.NotNil(b.t, qp.Ex())
		return qp
	}
	p.a, p.z = mk(p.acq), mk(p.zcq)
	require.NoError(b.t, p.a.Connect(uverbs.Endpoint{QPN: p.z.QPN(), PSN: 200, GID: b.gid}, 100, b.params()))
	require.NoError(b.t, p.z.Connect(uverbs.Endpoint{QPN: p.a.QPN(), PSN: 100, GID: b.gid}, 200, b.params()))
	return p
}

// exBind binds mw to [addr, addr+n) of mr through z's QPEx
// (ibv_wr_bind_mw) and returns the new key once the bind completed.
func (p *pair) exBind(t *testing.T, mw *uverbs.MW, mr *uverbs.MR, addr uint64, n int) uint32 {
	t.Helper()
	key := uverbs.IncRKey(mw.RKey())
	x := p.z.Ex()
	x.Start()
	x.WRID, x.Flags = 9, uverbs.SendSignaled
	x.BindMW(mw, key, uverbs.MWBindInfo{MR: mr, Addr: addr, Length: uint64(n), Access: mwRights})
	require.NoError(t, x.Complete())
	requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCBindMW, 9)
	require.Equal(t, key, mw.RKey(), "a posted bind gives the window its new key")
	return key
}

// rdma-core tests/test_qpex.py: test_qp_ex_rc_bind_mw: a type 2 window
// bound through the QPEx; RDMA write (and read) through it land in the
// window's memory. Then the other window operations of the extended API on
// rxe: the peer's SEND_WITH_INV through its QPEx invalidates the window, a
// rebind gives the next key, and LOCAL_INV through the QPEx revokes it.
func TestQPExRCBindMW(t *testing.T) {
	b := newBed(t)
	ops := uverbs.SendOpBindMW | uverbs.SendOpLocalInv | uverbs.SendOpSendWithInv | uverbs.SendOpSend |
		uverbs.SendOpRDMAWrite | uverbs.SendOpRDMARead
	p := b.exMWPair(ops)
	am, amr := b.mem(8192, allAccess)
	zm, zmr := b.mem(16384, mwMR|uverbs.AccessLocalWrite)
	_, rbuf := b.mem(4096, allAccess)
	mw := b.mw(uverbs.MWType2)

	win := zmr.Addr() + 8192
	key := p.exBind(t, mw, zmr, win, 4096)
	writeReadThrough(t, p, am, amr, zm, 8192, win, key, 21)

	// SEND_WITH_INV from the peer's QPEx (ibv_wr_send_inv).
	_, err := p.z.PostRecv([]uverbs.RecvWR{{WRID: 20, SGL: []uverbs.SGE{rbuf.SGE(0, 256)}}})
	require.NoError(t, err)
	x := p.a.Ex()
	x.Start()
	x.WRID, x.Flags = 21, uverbs.SendSignaled
	x.SendInv(key)
	x.SetSGE(amr.LKey(), amr.Addr(), 32)
	require.NoError(t, x.Complete())
	requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 21)
	rc := wait(t, p.zcq, 1)[0]
	requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, 20)
	require.NotZero(t, rc.Flags&uverbs.WCWithInv)
	require.Equal(t, key, rc.Imm)

	// Rebind with the next key, use it, then LOCAL_INV through the QPEx.
	key2 := p.exBind(t, mw, zmr, zmr.Addr(), 4096)
	require.NotEqual(t, key, key2)
	writeReadThrough(t, p, am, amr, zm, 0, zmr.Addr(), key2, 23)
	z := p.z.Ex()
	z.Start()
	z.WRID, z.Flags = 10, uverbs.SendSignaled
	z.LocalInv(key2)
	require.NoError(t, z.Complete())
	requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCLocalInv, 10)
	before := append([]byte(nil), zm.Bytes()[:64]...)
	fill(am.Bytes()[:64], 99)
	requireWC(t, p.rdma(uverbs.WRRDMAWrite, amr, 0, 64, zmr.Addr(), key2), uverbs.WCRemAccessErr, 0, 77)
	require.Equal(t, before, zm.Bytes()[:64], "nothing was written through the invalidated window")
}
