//go:build linux

package uverbs_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/uverbs"
)

// rdma-core tests/test_device.py: test_query_pkey, test_get_pkey_index.
func TestPKeyTable(t *testing.T) {
	vm, c := openCtx(t)
	pa, err := c.QueryPort(1)
	require.NoError(t, err)
	require.EqualValues(t, 1, pa.PkeyTblLen, "rxe has one P_Key")
	for i := 0; i < int(pa.PkeyTblLen); i++ {
		k, err := c.QueryPKey(1, i)
		require.NoError(t, err)
		want, err := strconv.ParseUint(sysfs(t, vm.Dev, "ports/1/pkeys/"+strconv.Itoa(i)), 0, 16)
		require.NoError(t, err)
		require.EqualValues(t, want, k, "P_Key %d against sysfs", i)
		idx, err := c.PKeyIndex(1, k)
		require.NoError(t, err)
		require.Equal(t, i, idx)
	}
	k, err := c.QueryPKey(1, 0)
	require.NoError(t, err)
	require.EqualValues(t, 0xffff, k, "the default full-membership P_Key")

	// Bad flows: typed errors naming what was wrong.
	var ue *uverbs.Error
	_, err = c.QueryPKey(1, int(pa.PkeyTblLen))
	require.ErrorIs(t, err, unix.EINVAL)
	require.ErrorAs(t, err, &ue)
	require.Contains(t, err.Error(), "past the table")
	_, err = c.QueryPKey(1, -1)
	require.ErrorIs(t, err, unix.EINVAL)
	for _, port := range []uint8{0, 2} {
		_, err = c.QueryPKey(port, 0)
		require.ErrorIs(t, err, unix.EINVAL, "port %d", port)
		_, err = c.PKeyIndex(port, 0xffff)
		require.ErrorIs(t, err, unix.EINVAL, "port %d", port)
	}
	_, err = c.PKeyIndex(1, 0x1234)
	require.ErrorIs(t, err, unix.ENOENT)
	require.NoError(t, c.Close())
	_, err = c.QueryPKey(1, 0)
	require.ErrorIs(t, err, uverbs.ErrClosed)
}

// rdma-core tests/test_device.py: test_query_gid_table_bad_flow,
// test_query_gid_ex_bad_flow (and test_query_gid_ex by index).
func TestGIDTableBadFlows(t *testing.T) {
	_, c := openCtx(t)
	all, err := c.QueryGIDTable()
	require.NoError(t, err)
	require.NotEmpty(t, all)

	// The caller's buffer: too small (empty included) is EINVAL, as in
	// rdma-core's test; exactly large enough gives the table.
	_, err = c.QueryGIDTableInto(nil)
	require.ErrorIs(t, err, unix.EINVAL)
	if len(all) > 1 {
		_, err = c.QueryGIDTableInto(make([]uverbs.GIDEntry, len(all)-1))
		require.ErrorIs(t, err, unix.EINVAL)
	}
	buf := make([]uverbs.GIDEntry, len(all))
	n, err := c.QueryGIDTableInto(buf)
	require.NoError(t, err)
	require.Equal(t, all, buf[:n])

	// One entry by index, through the ioctl and the sysfs path.
	pa, err := c.QueryPort(1)
	require.NoError(t, err)
	used := map[uint32]bool{}
	for _, g := range all {
		used[g.Index] = true
		e, err := c.QueryGID(1, int(g.Index))
		require.NoError(t, err)
		require.Equal(t, g, e)
		e, err = c.GIDSysfs(1, int(g.Index))
		require.NoError(t, err)
		require.Equal(t, g, e)
	}
	empty := -1
	for i := 0; i < pa.GIDTblLen; i++ {
		if !used[uint32(i)] {
			empty = i
			break
		}
	}
	require.GreaterOrEqual(t, empty, 0, "rxe's table (%d entries) has empty slots", pa.GIDTblLen)
	_, err = c.QueryGID(1, empty)
	require.ErrorIs(t, err, uverbs.ErrNoGID)
	require.ErrorIs(t, err, unix.ENODATA, "rdma-core's test expects ENODATA")
	_, err = c.GIDSysfs(1, empty)
	require.ErrorIs(t, err, unix.ENODATA)
	for _, idx := range []int{pa.GIDTblLen, -1} {
		_, err = c.QueryGID(1, idx)
		require.ErrorIs(t, err, unix.EINVAL, "index %d", idx)
		require.False(t, errors.Is(err, uverbs.ErrNoGID))
	}
	_, err = c.GIDSysfs(1, pa.GIDTblLen)
	require.ErrorIs(t, err, unix.EINVAL)
	for _, port := range []uint8{0, 2, 255} {
		_, err = c.QueryGID(port, 0)
		require.ErrorIs(t, err, unix.EINVAL, "port %d", port)
		require.Contains(t, err.Error(), "no port")
	}
}

// rdma-core tests/test_qp.py: test_query_data_in_order. rxe's provider has
// no data-in-order op, so rdma-core answers 0 there; so does ibgo, for
// every opcode and flag, and for unknown flags.
func TestQueryDataInOrder(t *testing.T) {
	b := newBed(t)
	a, _, _, _, _ := b.udPair()
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	for _, qp := range []*uverbs.QP{a, p.a} {
		for _, op := range []uverbs.WROpcode{uverbs.WRSend, uverbs.WRRDMAWrite} {
			require.Zero(t, qp.QueryDataInOrder(op, 0))
			caps := qp.QueryDataInOrder(op, uverbs.DataInOrderReturnCaps)
			require.Contains(t, []uverbs.DataInOrderCaps{0, uverbs.DataInOrderAligned128,
				uverbs.DataInOrderWholeMsg | uverbs.DataInOrderAligned128}, caps)
			require.Zero(t, caps, "rxe has no data-in-order guarantee to report")
			require.Zero(t, qp.QueryDataInOrder(op, 1<<6))
		}
	}
}

// rdma-core tests/test_cq_events.py: test_cq_events_ud. A UD receive raises
// a completion event on the armed CQ's channel; the event names the CQ,
// the datagram is intact, and no event comes without re-arming.
func TestCompletionEventsUD(t *testing.T) {
	b := newBed(t)
	ch, err := b.ctx.CreateCompChannel()
	require.NoError(t, err)
	defer ch.Close()
	acq := b.cq(16, ch)
	zcq := b.cq(16, ch)
	a := b.qp(uverbs.QPTypeUD, acq, acq, defaultCap, nil)
	z := b.qp(uverbs.QPTypeUD, zcq, zcq, defaultCap, nil)
	for _, q := range []*uverbs.QP{a, z} {
		require.NoError(t, q.Connect(uverbs.Endpoint{}, 0, uverbs.ConnectParams{QKey: 0x11111111}))
	}
	ah, err := b.pd.CreateAH(uverbs.RoCEAH(1, b.gidx, b.gid))
	require.NoError(t, err)
	defer ah.Close()
	am, amr := b.mem(4096, allAccess)
	zm, zmr := b.mem(4096, allAccess)
	getEvent := func(d time.Duration) (*uverbs.CQ, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return ch.GetEvent(ctx)
	}
	for i := uint64(1); i <= 3; i++ {
		require.NoError(t, zcq.ReqNotify(false))
		require.NoError(t, acq.ReqNotify(false))
		fill(am.Bytes()[:512], byte(i))
		_, err = z.PostRecv([]uverbs.RecvWR{{WRID: i, SGL: []uverbs.SGE{zmr.SGE(0, 40+512)}}})
		require.NoError(t, err)
		_, err = a.PostSend([]uverbs.SendWR{{WRID: 100 + i, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{amr.SGE(0, 512)}, AH: ah, RemoteQPN: z.QPN(), RemoteQKey: 0x11111111}})
		require.NoError(t, err)
		// One event per armed CQ, in either order.
		seen := map[*uverbs.CQ]int{}
		for len(seen) < 2 {
			cq, err := getEvent(10 * time.Second)
			require.NoError(t, err, "round %d: events so far %v", i, seen)
			seen[cq]++
		}
		require.Equal(t, map[*uverbs.CQ]int{acq: 1, zcq: 1}, seen)
		requireWC(t, wait(t, acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 100+i)
		rc := wait(t, zcq, 1)[0]
		requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, i)
		require.EqualValues(t, 40+512, rc.ByteLen)
		require.Equal(t, a.QPN(), rc.SrcQP)
		require.Equal(t, am.Bytes()[:512], zm.Bytes()[40:40+512])
		acq.AckEvents(1)
		zcq.AckEvents(1)
		// Not re-armed: nothing more is due.
		_, err = getEvent(100 * time.Millisecond)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	for _, cq := range []*uverbs.CQ{acq, zcq} {
		d, ak := cq.Events()
		require.Equal(t, [2]int{3, 3}, [2]int{d, ak})
	}
}

// rdma-core tests/test_qp.py: test_create_ud_qp_with_privileged_qkey. A UD
// QP takes the privileged Q_Key 0x80000000 (the guest runs as root; kernels
// from 6.4 refuse it without CAP_NET_RAW) and a query returns it; a send
// with that Q_Key arrives.
func TestUDPrivilegedQKey(t *testing.T) {
	const qkey = 0x80000000
	b := newBed(t)
	acq, zcq := b.cq(16, nil), b.cq(16, nil)
	a := b.qp(uverbs.QPTypeUD, acq, acq, defaultCap, nil)
	z := b.qp(uverbs.QPTypeUD, zcq, zcq, defaultCap, nil)
	require.NoError(t, z.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, Port: 1, QKey: qkey},
		uverbs.QPAttrState|uverbs.QPAttrPkeyIndex|uverbs.QPAttrPort|uverbs.QPAttrQKey))
	attr, _, err := z.Query(uverbs.QPAttrQKey)
	require.NoError(t, err)
	require.EqualValues(t, qkey, attr.QKey)
	// A WR Q_Key with the high bit set means "the sending QP's own Q_Key"
	// (IBA 10.2.5; rxe_req.c), so the sender holds the same one.
	require.NoError(t, a.Connect(uverbs.Endpoint{}, 0, uverbs.ConnectParams{QKey: qkey}))
	require.NoError(t, z.Connect(uverbs.Endpoint{}, 0, uverbs.ConnectParams{QKey: qkey}))
	attr, _, err = z.Query(uverbs.QPAttrQKey)
	require.NoError(t, err)
	require.EqualValues(t, qkey, attr.QKey, "still after RTR/RTS")
	ah, err := b.pd.CreateAH(uverbs.RoCEAH(1, b.gidx, b.gid))
	require.NoError(t, err)
	defer ah.Close()
	am, amr := b.mem(4096, allAccess)
	zm, zmr := b.mem(4096, allAccess)
	fill(am.Bytes()[:100], 5)
	_, err = z.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{zmr.SGE(0, 40+100)}}})
	require.NoError(t, err)
	_, err = a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(0, 100)}, AH: ah, RemoteQPN: z.QPN(), RemoteQKey: qkey}})
	require.NoError(t, err)
	requireWC(t, wait(t, acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 2)
	requireWC(t, wait(t, zcq, 1)[0], uverbs.WCSuccess, uverbs.WCRecv, 1)
	require.Equal(t, am.Bytes()[:100], zm.Bytes()[40:140])
}

// rdma-core tests/test_atomic.py: test_atomic_invalid_qp_access,
// test_atomic_invalid_mr_access, test_atomic_invalid_lkey,
// test_atomic_invalid_rkey: each atomic fails with an error completion and
// leaves the target unchanged.
func TestAtomicBadFlows(t *testing.T) {
	b := newBed(t)
	type setup struct {
		zAccess  uverbs.Access // the responder QP's rights
		mrAccess uverbs.Access // the target MR's rights
		lkeyAdd  uint32
		rkeyAdd  uint32
		want     []uverbs.WCStatus
	}
	for name, s := range map[string]setup{
		"qp without REMOTE_ATOMIC": {zAccess: uverbs.AccessLocalWrite, mrAccess: allAccess,
			want: []uverbs.WCStatus{uverbs.WCRemInvReqErr, uverbs.WCRemAccessErr}},
		"mr without REMOTE_ATOMIC": {mrAccess: uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite,
			want: []uverbs.WCStatus{uverbs.WCRemAccessErr}},
		"bad lkey": {mrAccess: allAccess, lkeyAdd: 1,
			want: []uverbs.WCStatus{uverbs.WCLocProtErr, uverbs.WCLocAccessErr}},
		"bad rkey": {mrAccess: allAccess, rkeyAdd: 1,
			want: []uverbs.WCStatus{uverbs.WCRemAccessErr}},
	} {
		t.Run(name, func(t *testing.T) {
			acq, zcq := b.cq(16, nil), b.cq(16, nil)
			a := b.qp(uverbs.QPTypeRC, acq, acq, defaultCap, nil)
			z := b.qp(uverbs.QPTypeRC, zcq, zcq, defaultCap, nil)
			zp := b.params()
			zp.Access = s.zAccess
			require.NoError(t, a.Connect(uverbs.Endpoint{QPN: z.QPN(), PSN: 1, GID: b.gid}, 2, b.params()))
			require.NoError(t, z.Connect(uverbs.Endpoint{QPN: a.QPN(), PSN: 2, GID: b.gid}, 1, zp))
			am, amr := b.mem(4096, allAccess)
			zm, zmr := b.mem(4096, s.mrAccess)
			fill(zm.Bytes()[:8], 3)
			before := append([]byte(nil), zm.Bytes()[:8]...)
			fill(am.Bytes()[:8], 9)
			sge := amr.SGE(0, 8)
			sge.LKey += s.lkeyAdd
			_, err := a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{sge}, RemoteAddr: zmr.Addr(), RKey: zmr.RKey() + s.rkeyAdd, CompareAdd: 5}})
			require.NoError(t, err)
			wc := wait(t, acq, 1)[0]
			require.Contains(t, s.want, wc.Status, "got %s", wc.Status)
			if s.lkeyAdd == 0 {
				require.Equal(t, before, zm.Bytes()[:8], "the target is unchanged")
			}
		})
	}
}

// rdma-core tests/test_relaxed_ordering.py: test_ro_rc_traffic,
// test_ro_ud_traffic, test_ro_mr_ex_traffic. RELAXED_ORDERING is an
// optional access flag: rxe registers the MR and traffic through it is
// intact.
func TestRelaxedOrderingTraffic(t *testing.T) {
	b := newBed(t)
	ro := allAccess | uverbs.AccessRelaxedOrdering
	am, amr := b.mem(8192, ro)
	zm, zmr := b.mem(8192, ro)
	require.Equal(t, ro, amr.Access())
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	for i := uint64(1); i <= 3; i++ {
		fill(am.Bytes()[:4096], byte(i))
		_, err := p.z.PostRecv([]uverbs.RecvWR{{WRID: i, SGL: []uverbs.SGE{zmr.SGE(0, 4096)}}})
		require.NoError(t, err)
		_, err = p.a.PostSend([]uverbs.SendWR{{WRID: i, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{amr.SGE(0, 4096)}}})
		require.NoError(t, err)
		requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, i)
		requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCRecv, i)
		require.Equal(t, am.Bytes()[:4096], zm.Bytes()[:4096])
	}
	a, z, acq, zcq, ah := b.udPair()
	fill(am.Bytes()[:1000], 42)
	_, err := z.PostRecv([]uverbs.RecvWR{{WRID: 9, SGL: []uverbs.SGE{zmr.SGE(4096, 40+1000)}}})
	require.NoError(t, err)
	_, err = a.PostSend([]uverbs.SendWR{{WRID: 10, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(0, 1000)}, AH: ah, RemoteQPN: z.QPN(), RemoteQKey: 0x11111111}})
	require.NoError(t, err)
	requireWC(t, wait(t, acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 10)
	requireWC(t, wait(t, zcq, 1)[0], uverbs.WCSuccess, uverbs.WCRecv, 9)
	require.Equal(t, am.Bytes()[:1000], zm.Bytes()[4096+40:4096+40+1000])
}

// rdma-core tests/test_qp.py: test_modify_rc_qp_rd_atomic. The RD atomic
// depths asked for at RTR/RTS are what a query returns (at least), and
// reads run with that many outstanding.
func TestRCRdAtomicQueried(t *testing.T) {
	b := newBed(t)
	da, err := b.ctx.QueryDevice()
	require.NoError(t, err)
	want := uint8(12)
	if da.MaxQPRdAtom < uint32(want) || da.MaxQPInitRdAtom < uint32(want) {
		t.Fatalf("rxe allows %d/%d outstanding reads, the case needs 12", da.MaxQPRdAtom, da.MaxQPInitRdAtom)
	}
	acq, zcq := b.cq(64, nil), b.cq(64, nil)
	a := b.qp(uverbs.QPTypeRC, acq, acq, defaultCap, nil)
	z := b.qp(uverbs.QPTypeRC, zcq, zcq, defaultCap, nil)
	p := b.params()
	p.MaxRdAtomic, p.MaxDestRdAtomic = want, want
	require.NoError(t, a.Connect(uverbs.Endpoint{QPN: z.QPN(), PSN: 1, GID: b.gid}, 2, p))
	require.NoError(t, z.Connect(uverbs.Endpoint{QPN: a.QPN(), PSN: 2, GID: b.gid}, 1, p))
	for _, qp := range []*uverbs.QP{a, z} {
		attr, _, err := qp.Query(uverbs.QPAttrMaxQPRdAtomic | uverbs.QPAttrMaxDestRdAtomic)
		require.NoError(t, err)
		require.GreaterOrEqual(t, attr.MaxRdAtomic, want, "max_rd_atomic")
		require.GreaterOrEqual(t, attr.MaxDestRdAtomic, want, "max_dest_rd_atomic")
	}
	am, amr := b.mem(1<<16, allAccess)
	zm, zmr := b.mem(1<<16, allAccess)
	fill(zm.Bytes(), 21)
	wrs := make([]uverbs.SendWR, want)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{amr.SGE(i*4096, 4096)}, RemoteAddr: zmr.Addr() + uint64(i*4096), RKey: zmr.RKey()}
	}
	n, err := a.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
	for _, wc := range wait(t, acq, len(wrs)) {
		requireWC(t, wc, uverbs.WCSuccess, uverbs.WCRDMARead, wc.WRID)
	}
	require.Equal(t, zm.Bytes()[:int(want)*4096], am.Bytes()[:int(want)*4096])
}
