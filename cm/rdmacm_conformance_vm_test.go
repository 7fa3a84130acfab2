//go:build linux

package cm_test

// The cases of rdma-core's tests/test_rdmacm.py that no other cm VM test
// does the same way (docs/conformance.md maps the rest): the event-driven
// connection with traffic (test_rdmacm_async_traffic, with the ACK timeout
// 21 it sets), the same with QPs the application creates and drives through
// INIT_QP_ATTR (..._traffic_external_qp), RDMA READ and WRITE over a CM
// connection (test_rdmacm_async_read/_write), and no traffic after leaving a
// multicast group (test_rdmacm_async_ex_leave_multicast_traffic's bad flow).
// Only cm's public API is used.

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

// confSide is one end of an async connection: its id, QP and a registered
// buffer of confBuf bytes.
type confSide struct {
	id  *cm.ID
	qp  *uverbs.QP
	cq  *uverbs.CQ
	mem *uverbs.Memory
	mr  *uverbs.MR
}

const confBuf = 8192

func (s *confSide) register(t *testing.T, pd *uverbs.PD) {
	t.Helper()
	var err error
	s.mem, err = uverbs.AllocMemory(confBuf, uverbs.MemoryOptions{})
	require.NoError(t, err)
	s.mr, err = pd.RegMR(s.mem.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	require.NoError(t, err)
}

// close releases the side in dependency order: the QP (the id's or the
// external one), its CQ, the buffer (before the id: the id's device PD
// goes with the last id), the id.
func (s *confSide) close(external bool) {
	if s.qp != nil {
		if external {
			s.qp.Close()
		} else if s.id != nil {
			s.id.DestroyQP()
		}
	}
	if s.cq != nil {
		s.cq.Close()
	}
	if s.mr != nil {
		s.mr.Close()
	}
	if s.mem != nil {
		s.mem.Close()
	}
	if s.id != nil {
		s.id.Close()
	}
}

func confCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// confPoll waits for one successful completion on cq.
func confPoll(t *testing.T, ctx context.Context, cq *uverbs.CQ) uverbs.WC {
	t.Helper()
	wc := make([]uverbs.WC, 1)
	for {
		n, err := cq.Poll(wc)
		require.NoError(t, err)
		if n == 1 {
			require.Equal(t, uverbs.WCSuccess, wc[0].Status, "completion %+v", wc[0])
			return wc[0]
		}
		require.NoError(t, ctx.Err(), "waiting for a completion")
		time.Sleep(100 * time.Microsecond)
	}
}

// asyncPair connects a client and a server id through the event API
// (rdmacm_utils.CMAsyncConnection): the client resolves, sets the ACK
// timeout, connects; the server accepts the CONNECT_REQUEST's child. With
// external, both QPs are the application's, moved by ModifyQP from
// INIT_QP_ATTR (with_ext_qp); otherwise the ids create them.
func asyncPair(t *testing.T, port uint16, external bool, ackTimeout uint8) (cli, srv *confSide) {
	vm := testutil.VM(t)
	return asyncPairAt(t, cm.IPAddr(netip.AddrPortFrom(netip.MustParseAddr(vm.IP), port)), external, ackTimeout)
}

// asyncPairAt is asyncPair on the server address addr.
func asyncPairAt(t *testing.T, addr cm.Addr, external bool, ackTimeout uint8) (cli, srv *confSide) {
	ctx := confCtx(t)
	param := &cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}

	cli, srv = &confSide{}, &confSide{}
	var sch, cch *cm.Channel
	var lid *cm.ID
	t.Cleanup(func() {
		srv.close(external)
		cli.close(external)
		if lid != nil {
			lid.Close()
		}
		if sch != nil {
			sch.Close()
		}
		if cch != nil {
			cch.Close()
		}
	})
	sch, err := cm.NewChannel()
	require.NoError(t, err)
	lid, err = sch.CreateID(cm.PortSpaceTCP, uverbs.QPTypeRC)
	require.NoError(t, err)
	require.NoError(t, lid.Bind(addr))
	require.NoError(t, lid.Listen(1))

	cch, err = cm.NewChannel()
	require.NoError(t, err)
	cli.id, err = cch.CreateID(cm.PortSpaceTCP, uverbs.QPTypeRC)
	require.NoError(t, err)
	require.NoError(t, cli.id.Resolve(ctx, cm.Addr{}, addr))
	require.NoError(t, cli.id.SetAckTimeout(ackTimeout))

	// newQP gives an id its QP: the id's own, or an external one on the
	// id's device left in RESET (rdma-core's with_ext_qp).
	newQP := func(s *confSide) {
		vctx, pd, err := s.id.Verbs()
		require.NoError(t, err)
		s.cq, err = vctx.CreateCQ(uverbs.CQInitAttr{CQE: 64})
		require.NoError(t, err)
		s.register(t, pd)
		if external {
			s.qp, err = pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq, Cap: cm.DefaultCap})
			require.NoError(t, err)
			require.NoError(t, s.id.ModifyQP(s.qp, uverbs.QPStateInit, nil))
			return
		}
		s.qp, err = s.id.CreateQP(pd, cm.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, Cap: cm.DefaultCap})
		require.NoError(t, err)
	}
	newQP(cli)
	cp := *param
	cp.QPN = cli.qp.QPN()
	require.NoError(t, cli.id.Connect(&cp))

	req, err := lid.WaitEvent(ctx, cm.EventConnectRequest)
	require.NoError(t, err)
	srv.id = req.Child
	newQP(srv)
	sp := *param
	if external {
		// The passive side brings its own QP up before the REP leaves,
		// as rdma_accept would for an id QP.
		for _, s := range []uverbs.QPState{uverbs.QPStateRTR, uverbs.QPStateRTS} {
			require.NoError(t, srv.id.ModifyQP(srv.qp, s, nil))
		}
		sp.QPN = srv.qp.QPN()
	}
	require.NoError(t, srv.id.Accept(&sp))
	if external {
		_, err = cli.id.WaitEvent(ctx, cm.EventConnectResponse)
		require.NoError(t, err)
		for _, s := range []uverbs.QPState{uverbs.QPStateRTR, uverbs.QPStateRTS} {
			require.NoError(t, cli.id.ModifyQP(cli.qp, s, nil))
		}
		require.NoError(t, cli.id.Establish())
	} else {
		_, err = cli.id.WaitEvent(ctx, cm.EventEstablished)
		require.NoError(t, err)
	}
	_, err = srv.id.WaitEvent(ctx, cm.EventEstablished)
	require.NoError(t, err)
	require.Equal(t, uverbs.QPStateRTS, cli.qp.State())
	require.Equal(t, uverbs.QPStateRTS, srv.qp.State())
	return cli, srv
}

// sendRecv moves n messages each way (client first), each checked byte for
// byte, as rdmacm_traffic does with its num_msgs.
func sendRecv(t *testing.T, cli, srv *confSide, n int) {
	ctx := confCtx(t)
	const size = 1024
	one := func(from, to *confSide, i int) {
		msg := bytes.Repeat([]byte{byte(i + 1)}, size)
		copy(msg, []byte{byte(i), 0xA5})
		_, err := to.qp.PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{to.mr.SGE(0, size)}}})
		require.NoError(t, err)
		copy(from.mem.Bytes()[4096:], msg)
		_, err = from.qp.PostSend([]uverbs.SendWR{{WRID: uint64(100 + i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{from.mr.SGE(4096, size)}}})
		require.NoError(t, err)
		wc := confPoll(t, ctx, to.cq)
		require.Equal(t, uverbs.WCRecv, wc.Opcode)
		require.EqualValues(t, size, wc.ByteLen)
		require.Equal(t, msg, to.mem.Bytes()[:size], "message %d", i)
		require.Equal(t, uint64(100+i), confPoll(t, ctx, from.cq).WRID)
	}
	for i := 0; i < n; i++ {
		one(cli, srv, i)
		one(srv, cli, i)
	}
}

func disconnect(t *testing.T, cli, srv *confSide) {
	ctx := confCtx(t)
	require.NoError(t, cli.id.Disconnect())
	_, err := srv.id.WaitEvent(ctx, cm.EventDisconnected)
	require.NoError(t, err)
	require.NoError(t, srv.id.Disconnect())
	_, err = cli.id.WaitEvent(ctx, cm.EventDisconnected)
	require.NoError(t, err)
}

// test_rdmacm_async_traffic: the event-driven connection with qp_timeout
// 21 (the ACK timeout option reaches the client QP's RTS timeout), then
// traffic both ways with the data checked.
func TestRDMACMAsyncTraffic(t *testing.T) {
	cli, srv := asyncPair(t, 7960, false, 21)
	a, _, err := cli.qp.Query(uverbs.QPAttrTimeout)
	require.NoError(t, err)
	require.EqualValues(t, 21, a.Timeout, "RDMA_OPTION_ID_ACK_TIMEOUT 21 gives the RTS timeout")
	sendRecv(t, cli, srv, 10)
	disconnect(t, cli, srv)
}

// test_rdmacm_async_traffic_external_qp: the same with QPs the
// application created (not the ids'), driven through INIT_QP_ATTR.
func TestRDMACMAsyncTrafficExternalQP(t *testing.T) {
	cli, srv := asyncPair(t, 7961, true, 21)
	require.Nil(t, cli.id.QP(), "the client's QP is not the id's")
	require.Nil(t, srv.id.QP(), "the server's QP is not the id's")
	a, _, err := cli.qp.Query(uverbs.QPAttrTimeout)
	require.NoError(t, err)
	require.EqualValues(t, 21, a.Timeout)
	sendRecv(t, cli, srv, 10)
	require.NoError(t, cli.qp.ToErr())
	require.NoError(t, srv.qp.ToErr())
	disconnect(t, cli, srv)
}

// test_rdmacm_async_write and test_rdmacm_async_read: RDMA WRITE into and
// READ from the server's buffer over a CM connection, data checked.
func TestRDMACMAsyncReadWrite(t *testing.T) {
	cli, srv := asyncPair(t, 7962, false, 14)
	ctx := confCtx(t)
	const size = 2048
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*13 + 1)
	}
	copy(cli.mem.Bytes()[:size], want)
	_, err := cli.qp.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{cli.mr.SGE(0, size)}, RemoteAddr: srv.mr.Addr() + 1024, RKey: srv.mr.RKey()}})
	require.NoError(t, err)
	require.Equal(t, uverbs.WCRDMAWrite, confPoll(t, ctx, cli.cq).Opcode)
	require.Equal(t, want, srv.mem.Bytes()[1024:1024+size], "the write landed")

	for i := range want {
		want[i] = byte(255 - i*7)
	}
	copy(srv.mem.Bytes()[4096:], want)
	_, err = cli.qp.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{cli.mr.SGE(4096, size)}, RemoteAddr: srv.mr.Addr() + 4096, RKey: srv.mr.RKey()}})
	require.NoError(t, err)
	require.Equal(t, uverbs.WCRDMARead, confPoll(t, ctx, cli.cq).Opcode)
	require.Equal(t, want, cli.mem.Bytes()[4096:4096+size], "the read brought the server's bytes")
	disconnect(t, cli, srv)
}

// test_rdmacm_async_ex_leave_multicast_traffic: a member that left the
// group receives nothing more (the bad flow), while it did before.
func TestRDMACMLeaveMulticastTraffic(t *testing.T) {
	vm := testutil.OneNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n, size, group = 2, 128, "239.1.2.9"
	rx, err := cm.OpenUD(ctx, vm.IP, udOptions(n))
	require.NoError(t, err)
	defer rx.Close()
	rr := rigFor(t, rx, n, size)
	rr.postRecvs()
	mr, err := rx.JoinMulticast(ctx, group, nil)
	require.NoError(t, err)
	tx, err := cm.OpenUD(ctx, vm.IP, udOptions(n))
	require.NoError(t, err)
	defer tx.Close()
	tr := rigFor(t, tx, n, size)
	mt, err := tx.JoinMulticast(ctx, group, &cm.JoinOptions{SendOnly: true})
	require.NoError(t, err)
	defer mt.Leave()

	tr.send(mt.Peer.AH, mt.Peer.QPN, mt.Peer.QKey, pattern(1, size), nil, true, 0)
	require.NoError(t, tr.poll(ctx, 0, 1, nil))
	require.NoError(t, rr.poll(ctx, 1, 0, func(_ uverbs.WC, buf []byte) {
		require.Equal(t, pattern(1, size), buf[uverbs.GRHLen:])
	}), "a member receives")

	require.NoError(t, mr.Leave())
	tr.send(mt.Peer.AH, mt.Peer.QPN, mt.Peer.QKey, pattern(2, size), nil, true, 1)
	require.NoError(t, tr.poll(ctx, 0, 1, nil), "the send itself completes")
	quiet, cancelQuiet := context.WithTimeout(ctx, time.Second)
	defer cancelQuiet()
	err = rr.poll(quiet, 1, 0, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing arrives after the leave")
}

// An RC connection over IPv6: the guest's link-local address (the only
// IPv6 RoCE GID on the test netdev), resolved, connected and carrying
// traffic both ways with the data checked, then disconnected from both
// sides.
func TestRDMACMIPv6LinkLocal(t *testing.T) {
	vm := testutil.OneNode(t)
	ll := linkLocal(t, vm)
	cli, srv := asyncPairAt(t, cm.IPAddr(netip.AddrPortFrom(ll, 7964)), false, 19)
	info, err := cli.id.Query()
	require.NoError(t, err)
	require.True(t, info.Dst.IP.Addr().Is6(), "destination %s", info.Dst)
	require.True(t, info.Src.IP.Addr().Is6(), "source %s", info.Src)
	sendRecv(t, cli, srv, 4)
	disconnect(t, cli, srv)
}
