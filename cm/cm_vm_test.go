//go:build linux

package cm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	_ "github.com/ibgo/ibgo/mlx5" // the providers Verbs opens devices with
	_ "github.com/ibgo/ibgo/rxe"
	"github.com/ibgo/ibgo/uverbs"
)

func vmAddr(t *testing.T, port uint16) (testutil.VMInfo, Addr) {
	t.Helper()
	vm := testutil.VM(t)
	if _, err := os.Stat(DevicePath); err != nil {
		t.Fatalf("%s missing in the VM: %v", DevicePath, err)
	}
	return vm, Addr{IP: netip.AddrPortFrom(netip.MustParseAddr(vm.IP), port)}
}

// newChannelID opens an event channel with one id on it; both are closed
// when the test ends (Close is idempotent, so a test may close them first).
func newChannelID(t *testing.T, ps PortSpace, qpType uverbs.QPType) (*Channel, *ID) {
	t.Helper()
	ch, err := NewChannel()
	require.NoError(t, err)
	t.Cleanup(func() { ch.Close() })
	id, err := ch.CreateID(ps, qpType)
	require.NoError(t, err)
	t.Cleanup(func() { id.Close() })
	return ch, id
}

func tctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// buffers is a registered region on a PD, split into slots.
type buffers struct {
	mem *uverbs.Memory
	mr  *uverbs.MR
}

func newBuffers(t *testing.T, pd *uverbs.PD, n int) *buffers {
	t.Helper()
	m, err := uverbs.AllocMemory(n, uverbs.MemoryOptions{})
	require.NoError(t, err)
	mr, err := pd.RegMR(m.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	require.NoError(t, err)
	return &buffers{mem: m, mr: mr}
}

func (b *buffers) close() { b.mr.Close(); b.mem.Close() }

func pollOne(t *testing.T, cq *uverbs.CQ) uverbs.WC {
	t.Helper()
	wc := make([]uverbs.WC, 1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := cq.Poll(wc)
		require.NoError(t, err)
		if n == 1 {
			require.Equal(t, uverbs.WCSuccess, wc[0].Status, "completion %+v", wc[0])
			return wc[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("no completion in 20 s")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// The ids, query and INIT_QP_ATTR facts of the brief (§1, §2.3), on one id.
func TestIDResolveQuery(t *testing.T) {
	vm, dst := vmAddr(t, 7999)
	_, id := newChannelID(t, PortSpaceTCP, 0)
	require.Error(t, id.ResolveRoute(time.Second), "RESOLVE_ROUTE before ADDR_RESOLVED")
	require.NoError(t, id.Resolve(tctx(t, 10*time.Second), Addr{}, dst))
	info, err := id.Query()
	require.NoError(t, err)
	require.Equal(t, vm.IP, info.Src.IP.Addr().String())
	require.Equal(t, dst.IP, info.Dst.IP)
	require.NotZero(t, info.Src.IP.Port(), "an ephemeral port was bound")
	require.EqualValues(t, 1, info.Port)
	dev, err := uverbs.DeviceByName(vm.Dev)
	require.NoError(t, err)
	require.Equal(t, dev.NodeGUID, info.NodeGUID, "node_guid is the verbs device's")
	t.Logf("QUERY ADDR: %+v (pkey %#x)", info, info.PKey)
	g, err := id.QueryGID()
	require.NoError(t, err)
	require.NotNil(t, g.Src.IB)
	require.Equal(t, "::ffff:"+vm.IP, netip.AddrFrom16(g.Src.IB.GID).String())
	t.Logf("QUERY GID: src sid %#x", g.Src.IB.SID)
	paths, err := id.QueryPaths()
	require.NoError(t, err)
	require.Len(t, paths, 1)
	require.EqualValues(t, 0x2B, paths[0].Flags)

	a, m, err := id.InitQPAttr(uverbs.QPStateInit)
	require.NoError(t, err)
	require.EqualValues(t, 0x39, m, "RC INIT mask")
	require.Zero(t, a.AccessFlags, "INIT before any CM exchange")
	_, _, err = id.InitQPAttr(uverbs.QPStateRTR)
	t.Logf("INIT_QP_ATTR RTR before connect: %v", err)
}

func TestIDsStartAnywhereAndUDMask(t *testing.T) {
	_, dst := vmAddr(t, 7998)
	_, id := newChannelID(t, PortSpaceUDP, 0)
	require.True(t, id.ud)
	require.NoError(t, id.Resolve(tctx(t, 10*time.Second), Addr{}, dst))
	a, m, err := id.InitQPAttr(uverbs.QPStateInit)
	require.NoError(t, err)
	require.EqualValues(t, 0x71, m, "UD INIT mask")
	require.EqualValues(t, 0x01234567, a.QKey)
	require.ErrorIs(t, id.SetAckTimeout(14), syscall.EINVAL, "ACK_TIMEOUT is RC only")
}

// A Go client and a Go server in one process: private data both ways, a
// SEND each way, a disconnect from the client seen by the server.
func TestDialListenLoopback(t *testing.T) {
	_, addr := vmAddr(t, 7990)
	lc := ListenConfig{}
	var srvBuf *buffers
	lc.BeforeAccept = func(c *Conn) error {
		srvBuf = newBuffers(t, c.PD(), 4096)
		_, err := c.QP().PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{srvBuf.mr.SGE(0, 1024)}}})
		return err
	}
	lc.Param = &ConnParam{PrivateData: []byte("from server"), RetryCount: 7, RNRRetryCount: 7, ResponderResources: 1, InitiatorDepth: 1}
	l, err := lc.Listen(addr)
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, addr.IP, l.Addr().IP)

	type res struct {
		c   *Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := l.Accept(tctx(t, 30*time.Second))
		acc <- res{c, err}
	}()
	var cliBuf *buffers
	d := Dialer{Param: &ConnParam{PrivateData: []byte("from client"), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}}
	d.BeforeConnect = func(c *Conn) error {
		cliBuf = newBuffers(t, c.PD(), 4096)
		_, err := c.QP().PostRecv([]uverbs.RecvWR{{WRID: 2, SGL: []uverbs.SGE{cliBuf.mr.SGE(0, 1024)}}})
		return err
	}
	cli, err := d.Dial(tctx(t, 30*time.Second), addr)
	require.NoError(t, err)
	r := <-acc
	require.NoError(t, r.err)
	srv := r.c
	defer srvBuf.close()
	defer cliBuf.close()
	require.Equal(t, "from client", string(srv.Remote().PrivateData[:11]))
	require.Len(t, srv.Remote().PrivateData, 56, "REQ private data comes padded to 56")
	require.Equal(t, "from server", string(cli.Remote().PrivateData[:11]))
	require.Equal(t, cli.QP().QPN(), srv.Remote().QPN)
	require.Equal(t, uverbs.QPStateRTS, cli.QP().State())
	require.Equal(t, uverbs.QPStateRTS, srv.QP().State())
	// The attributes INIT_QP_ATTR gave (cm-brief.md §2.3): after the
	// INIT refresh both sides allow remote write, read and atomics
	// (responder resources 1); RTS timeout is the packet lifetime + 1
	// (19 on 6.1, 17 on 6.12); min_rnr_timer 0.
	for name, qp := range map[string]*uverbs.QP{"client": cli.QP(), "server": srv.QP()} {
		a, _, err := qp.Query(uverbs.QPAttrAccessFlags | uverbs.QPAttrTimeout | uverbs.QPAttrMinRNRTimer | uverbs.QPAttrMaxQPRdAtomic | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrPathMTU)
		require.NoError(t, err)
		t.Logf("%s QP: access %v (%#x) timeout %d min_rnr_timer %d rd_atomic %d dest_rd_atomic %d mtu %v",
			name, a.AccessFlags, uint32(a.AccessFlags), a.Timeout, a.MinRNRTimer, a.MaxRdAtomic, a.MaxDestRdAtomic, a.PathMTU)
		want := uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic
		require.Equal(t, want, a.AccessFlags&want, name)
		require.Contains(t, []uint8{17, 19}, a.Timeout, name)
		require.EqualValues(t, 1, a.MaxRdAtomic, name)
		require.EqualValues(t, 1, a.MaxDestRdAtomic, name)
	}
	require.Equal(t, cli.LocalAddr().IP, srv.RemoteAddr().IP)

	copy(cliBuf.mem.Bytes()[2048:], "ping")
	_, err = cli.QP().PostSend([]uverbs.SendWR{{WRID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{cliBuf.mr.SGE(2048, 4)}}})
	require.NoError(t, err)
	pollOne(t, cli.SendCQ())
	wc := pollOne(t, srv.RecvCQ())
	require.EqualValues(t, 4, wc.ByteLen)
	require.Equal(t, "ping", string(srvBuf.mem.Bytes()[:4]))
	copy(srvBuf.mem.Bytes()[2048:], "pong!")
	_, err = srv.QP().PostSend([]uverbs.SendWR{{WRID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{srvBuf.mr.SGE(2048, 5)}}})
	require.NoError(t, err)
	pollOne(t, srv.SendCQ())
	pollOne(t, cli.RecvCQ())
	require.Equal(t, "pong!", string(cliBuf.mem.Bytes()[:5]))

	require.NoError(t, cli.Disconnect())
	require.NoError(t, srv.WaitDisconnect(tctx(t, 20*time.Second)))
	require.Equal(t, uverbs.QPStateErr, srv.QP().State())
	require.NoError(t, cli.WaitDisconnect(tctx(t, 20*time.Second)), "the initiator gets DISCONNECTED on the DREP")
	require.NoError(t, cli.Close())
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close(), "idempotent")
}

// Several connections at once through one listener.
func TestManyConnections(t *testing.T) {
	_, addr := vmAddr(t, 7991)
	l, err := Listen(addr.String())
	require.NoError(t, err)
	defer l.Close()
	const n = 4
	var wg sync.WaitGroup
	srvs := make(chan *Conn, n)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			c, err := l.Accept(tctx(t, 60*time.Second))
			if err != nil {
				t.Errorf("accept %d: %v", i, err)
				return
			}
			srvs <- c
		}
	}()
	clis := make([]*Conn, n)
	errs := make([]error, n)
	for i := range clis {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clis[i], errs[i] = Dial(tctx(t, 60*time.Second), addr.String())
		}()
	}
	wg.Wait()
	close(srvs)
	for i := range clis {
		require.NoError(t, errs[i], "dial %d", i)
		require.NoError(t, clis[i].Close())
	}
	k := 0
	for c := range srvs {
		require.NoError(t, c.WaitDisconnect(tctx(t, 20*time.Second)))
		require.NoError(t, c.Close())
		k++
	}
	require.Equal(t, n, k)
}

func TestConnectNoListenerRefused(t *testing.T) {
	_, addr := vmAddr(t, 7992)
	start := time.Now()
	_, err := Dial(tctx(t, 20*time.Second), addr.String())
	require.ErrorIs(t, err, ErrRefused)
	var ce *Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, RejectInvalidServiceID, ce.Reason)
	require.Less(t, time.Since(start), 10*time.Second)
	t.Logf("%v (in %v)", err, time.Since(start))
}

func TestRejectWithPrivateData(t *testing.T) {
	_, addr := vmAddr(t, 7993)
	lc := ListenConfig{BeforeAccept: func(c *Conn) error {
		return &RejectError{PrivateData: []byte("go away: full")}
	}}
	l, err := lc.Listen(addr)
	require.NoError(t, err)
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept(tctx(t, 20*time.Second))
		done <- err
	}()
	_, err = Dial(tctx(t, 20*time.Second), addr.String())
	require.ErrorIs(t, err, ErrRefused)
	var ce *Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, RejectConsumerDefined, ce.Reason)
	require.Len(t, ce.PrivateData, 148, "REJ private data comes padded to 148")
	require.Equal(t, "go away: full", string(ce.PrivateData[:13]))
	var rj *RejectError
	require.ErrorAs(t, <-done, &rj)
}

func TestListenPortInUse(t *testing.T) {
	_, addr := vmAddr(t, 7994)
	l, err := Listen(addr.String())
	require.NoError(t, err)
	defer l.Close()
	_, err = Listen(addr.String())
	require.ErrorIs(t, err, ErrPortInUse)
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	_, err = Listen(fmt.Sprintf("0.0.0.0:%d", addr.IP.Port()))
	require.ErrorIs(t, err, ErrPortInUse, "wildcard vs specific")
	t.Logf("%v", err)
}

// The brief's pitfall: a destination with no RDMA GID (the loopback
// address) fails route resolution with ENODEV; an unreachable network fails
// RESOLVE_ADDR at once; both typed.
func TestUnreachable(t *testing.T) {
	vmAddr(t, 0)
	start := time.Now()
	_, err := Dial(tctx(t, 10*time.Second), "127.0.0.1:7174")
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrRouteFailed) || errors.Is(err, ErrUnreachable), "%v", err)
	t.Logf("127.0.0.1: %v (%v)", err, time.Since(start))
	start = time.Now()
	_, err = Dial(tctx(t, 3*time.Second), "192.0.2.1:7174")
	require.ErrorIs(t, err, ErrUnreachable)
	require.Less(t, time.Since(start), 5*time.Second, "within the timeout")
	t.Logf("192.0.2.1: %v (%v)", err, time.Since(start))

	// A silent host in the subnet: on dummy0 (NOARP) the address resolves
	// and the REQ goes unanswered; the kernel would give up after ~98 s,
	// the context's 3 s end the wait, and the id is destroyed (REJ 4).
	vm := testutil.VM(t)
	ip := netip.MustParseAddr(vm.IP).As4()
	ip[3] = 77
	silent := netip.AddrPortFrom(netip.AddrFrom4(ip), 7174).String()
	start = time.Now()
	_, err = Dial(tctx(t, 3*time.Second), silent)
	require.ErrorIs(t, err, ErrTimeout)
	require.Less(t, time.Since(start), 5*time.Second, "within the timeout")
	t.Logf("%s: %v (%v)", silent, err, time.Since(start))
}

// Cancelling the context of a pending resolution returns at once, and the
// late answer does not confuse the next wait.
func TestCancelResolve(t *testing.T) {
	_, dst := vmAddr(t, 7995)
	_, id := newChannelID(t, PortSpaceTCP, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, id.ResolveAddr(Addr{}, dst, time.Second))
	_, err := id.WaitEvent(ctx, EventAddrResolved)
	require.ErrorIs(t, err, context.Canceled)
	// The answer arrives and is dropped; a new wait sees only new events.
	time.Sleep(200 * time.Millisecond)
	short, c2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer c2()
	_, err = id.GetEvent(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the cancelled wait's event was dropped")
	require.NoError(t, id.ResolveRoute(time.Second))
	_, err = id.WaitEvent(tctx(t, 10*time.Second), EventRouteResolved)
	require.NoError(t, err)

	// A deadline on a wait that never ends is ErrTimeout.
	_, err = id.WaitEvent(tctx(t, 100*time.Millisecond), EventEstablished)
	require.ErrorIs(t, err, ErrTimeout)
}

// Destroying ids with unread events neither hangs nor leaks; a listener's
// unread requests are rejected (the client sees REJECTED 28, not a minute
// of silence).
func TestDestroyWithUnreadEvents(t *testing.T) {
	_, addr := vmAddr(t, 7996)
	ch, id := newChannelID(t, PortSpaceTCP, 0)
	require.NoError(t, id.ResolveAddr(Addr{}, addr, time.Second))
	time.Sleep(100 * time.Millisecond) // ADDR_RESOLVED queued, unread
	require.NoError(t, id.Close())

	lid, err := ch.CreateID(PortSpaceTCP, 0)
	require.NoError(t, err)
	require.NoError(t, lid.Bind(addr))
	require.NoError(t, lid.Listen(4))
	errc := make(chan error, 1)
	go func() {
		_, err := Dial(tctx(t, 30*time.Second), addr.String())
		errc <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lid.mu.Lock()
		n := len(lid.queue)
		lid.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	require.NoError(t, lid.Close())
	err = <-errc
	require.ErrorIs(t, err, ErrRefused)
	var ce *Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, RejectConsumerDefined, ce.Reason)
	require.Less(t, time.Since(start), 5*time.Second)
	require.NoError(t, ch.Close())
}

// MIGRATE_ID moves an id and its unread events to another channel.
func TestMigrate(t *testing.T) {
	_, dst := vmAddr(t, 7997)
	a, err := NewChannel()
	require.NoError(t, err)
	defer a.Close()
	b, err := NewChannel()
	require.NoError(t, err)
	defer b.Close()
	id, err := a.CreateID(PortSpaceTCP, 0)
	require.NoError(t, err)
	require.NoError(t, id.ResolveAddr(Addr{}, dst, time.Second))
	require.NoError(t, id.Migrate(b))
	require.Same(t, b, id.Channel())
	_, err = id.WaitEvent(tctx(t, 10*time.Second), EventAddrResolved)
	require.NoError(t, err)
	require.NoError(t, id.ResolveRoute(time.Second), "commands go to the new channel")
	_, err = id.WaitEvent(tctx(t, 10*time.Second), EventRouteResolved)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	_, err = id.Query()
	require.NoError(t, err, "closing the old channel leaves the migrated id alone")
	require.NoError(t, id.Close())
}

func TestOptions(t *testing.T) {
	_, dst := vmAddr(t, 7989)
	ch, id := newChannelID(t, PortSpaceTCP, 0)
	require.NoError(t, id.SetReuseAddr(true))
	require.NoError(t, id.SetAFOnly(true))
	require.NoError(t, id.SetTOS(32))
	require.NoError(t, id.SetAckTimeout(12))
	require.NoError(t, id.Resolve(tctx(t, 10*time.Second), Addr{}, dst))
	a, m, err := id.InitQPAttr(uverbs.QPStateInit)
	require.NoError(t, err)
	_ = a
	require.NotZero(t, m)

	// Two ids with REUSEADDR share a port.
	x, err := ch.CreateID(PortSpaceTCP, 0)
	require.NoError(t, err)
	defer x.Close()
	y, err := ch.CreateID(PortSpaceTCP, 0)
	require.NoError(t, err)
	defer y.Close()
	p := Addr{IP: netip.AddrPortFrom(dst.IP.Addr(), 7988)}
	require.NoError(t, x.SetReuseAddr(true))
	require.NoError(t, y.SetReuseAddr(true))
	require.NoError(t, x.Bind(p))
	require.NoError(t, y.Bind(p))
}

// IPv6: a listener on :: accepts an IPv4 client (AFONLY off by default).
func TestIPv6WildcardAcceptsIPv4(t *testing.T) {
	_, addr := vmAddr(t, 7987)
	l, err := Listen("[::]:7987")
	require.NoError(t, err)
	defer l.Close()
	acc := make(chan error, 1)
	go func() {
		c, err := l.Accept(tctx(t, 30*time.Second))
		if err == nil {
			c.Close()
		}
		acc <- err
	}()
	c, err := Dial(tctx(t, 30*time.Second), addr.String())
	require.NoError(t, err)
	require.NoError(t, <-acc)
	c.Close()
}

// The low-level API end to end, the client managing its own QP as rping -q
// does (rdma_establish): CONNECT_REQUEST with the child, CONNECT_RESPONSE
// without an id QP, Establish, ESTABLISHED on the passive side, DISCONNECTED
// on both, then TIMEWAIT_EXIT.
func TestLowLevelEstablish(t *testing.T) {
	_, addr := vmAddr(t, 7986)
	ctx := tctx(t, 60*time.Second)
	_, lid := newChannelID(t, PortSpaceTCP, 0)
	require.NoError(t, lid.Bind(addr))
	require.NoError(t, lid.Listen(1))

	_, cid := newChannelID(t, PortSpaceTCP, 0)
	require.NoError(t, cid.Resolve(ctx, Addr{}, addr))
	vctx, pd, err := cid.Verbs()
	require.NoError(t, err)
	cq, err := vctx.CreateCQ(uverbs.CQInitAttr{CQE: 8})
	require.NoError(t, err)
	defer cq.Close()
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: DefaultCap})
	require.NoError(t, err)
	defer qp.Close()
	require.NoError(t, cid.ModifyQP(qp, uverbs.QPStateInit, nil))
	require.NoError(t, cid.Connect(&ConnParam{QPN: qp.QPN(), PrivateData: []byte{1, 2, 3}, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}))

	req, err := lid.WaitEvent(ctx, EventConnectRequest)
	require.NoError(t, err)
	child := req.Child
	require.NotNil(t, child)
	defer child.Close()
	require.Equal(t, qp.QPN(), req.Conn.QPN)
	require.Equal(t, []byte{1, 2, 3}, req.Conn.PrivateData[:3])
	require.Equal(t, req.Handle, child.Handle())
	_, err = child.CreateQP(nil, QPInitAttr{Cap: DefaultCap})
	require.NoError(t, err)
	require.NoError(t, child.Accept(&ConnParam{PrivateData: []byte("ok"), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}))

	resp, err := cid.WaitEvent(ctx, EventConnectResponse)
	require.NoError(t, err)
	require.Equal(t, child.QP().QPN(), resp.Conn.QPN)
	require.Equal(t, "ok", string(resp.Conn.PrivateData[:2]))
	require.Len(t, resp.Conn.PrivateData, 196, "REP private data comes padded to 196")
	for _, s := range []uverbs.QPState{uverbs.QPStateInit, uverbs.QPStateRTR, uverbs.QPStateRTS} {
		require.NoError(t, cid.ModifyQP(qp, s, nil))
	}
	require.NoError(t, cid.Establish())
	_, err = child.WaitEvent(ctx, EventEstablished)
	require.NoError(t, err)

	require.NoError(t, qp.ToErr())
	require.NoError(t, cid.Disconnect())
	_, err = child.WaitEvent(ctx, EventDisconnected)
	require.NoError(t, err)
	require.NoError(t, child.Disconnect())
	_, err = cid.WaitEvent(ctx, EventDisconnected)
	require.NoError(t, err)
	start := time.Now()
	_, err = cid.WaitEvent(ctx, EventTimewaitExit)
	require.NoError(t, err)
	t.Logf("TIMEWAIT_EXIT %v after DISCONNECTED", time.Since(start))
	require.NoError(t, qp.Close())
	require.NoError(t, cq.Close())
	require.NoError(t, cid.Close())
	require.NoError(t, lid.Close())
}

// Across the two guests: node 1 accepts, node 2 dials (retrying until the
// listener is up), private data and one SEND cross the link.
func TestTwoNodeDialListen(t *testing.T) {
	vm := testutil.TwoNodes(t)
	ctx := tctx(t, 90*time.Second)
	if vm.Node == 1 {
		var cb *buffers
		lc := ListenConfig{BeforeAccept: func(c *Conn) error {
			cb = newBuffers(t, c.PD(), 64)
			_, err := c.QP().PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{cb.mr.SGE(0, 64)}}})
			return err
		}}
		l, err := lc.Listen(mustAddr(t, vm.IP+":7985"))
		require.NoError(t, err)
		defer l.Close()
		c, err := l.Accept(ctx)
		require.NoError(t, err)
		defer cb.close()
		require.Equal(t, "node 2", string(c.Remote().PrivateData[:6]))
		require.Equal(t, vm.Peer, c.RemoteAddr().IP.Addr().String())
		wc := pollOne(t, c.RecvCQ())
		require.Equal(t, "across", string(cb.mem.Bytes()[:wc.ByteLen]))
		require.NoError(t, c.WaitDisconnect(ctx))
		require.NoError(t, c.Close())
		return
	}
	var cb *buffers
	d := Dialer{Param: &ConnParam{PrivateData: []byte("node 2"), RetryCount: 7, RNRRetryCount: 7},
		BeforeConnect: func(c *Conn) error { cb = newBuffers(t, c.PD(), 64); return nil }}
	var c *Conn
	for {
		var err error
		c, err = d.Dial(ctx, mustAddr(t, vm.Peer+":7985"))
		if err == nil {
			break
		}
		require.ErrorIs(t, err, ErrRefused, "until node 1 listens")
		if cb != nil {
			cb.close()
			cb = nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	defer cb.close()
	copy(cb.mem.Bytes(), "across")
	_, err := c.QP().PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{cb.mr.SGE(0, 6)}}})
	require.NoError(t, err)
	pollOne(t, c.SendCQ())
	require.NoError(t, c.Close())
}

// AF_IB addresses on RoCE: binding the id to its own (IPv4-mapped) GID and
// a service id in the IB port space. The kernel finds no device for an
// AF_IB source on a RoCE port (observed on 6.12: ENODEV), so AF_IB is for
// InfiniBand ports; if a kernel accepts it, QUERY GID must give it back.
func TestAFIBBind(t *testing.T) {
	vm, _ := vmAddr(t, 0)
	_, id := newChannelID(t, PortSpaceIB, uverbs.QPTypeRC)
	gid := netip.MustParseAddr("::ffff:" + vm.IP).As16()
	a := Addr{IB: &IBAddr{PKey: 0xffff, GID: gid, SID: serviceID(PortSpaceIB, 7984), SIDMask: ^uint64(0)}}
	err := id.Bind(a)
	t.Logf("AF_IB bind %v: %v", a, err)
	if err != nil {
		require.ErrorIs(t, err, syscall.ENODEV)
		return
	}
	g, err := id.QueryGID()
	require.NoError(t, err)
	require.NotNil(t, g.Src.IB)
	require.Equal(t, gid, g.Src.IB.GID)
	require.Equal(t, serviceID(PortSpaceIB, 7984), g.Src.IB.SID)
	q, err := id.Query()
	require.NoError(t, err)
	t.Logf("QUERY ADDR of an AF_IB id: %+v", q)
}
