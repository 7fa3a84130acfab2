//go:build linux

package cm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

// udaddy's fixed port (librdmacm/examples/udaddy.c) and its defaults: 10
// messages of 100 bytes.
const (
	udaddyPort  = 7174
	udaddyCount = 10
	udaddySize  = 100
)

// The server address of an interop test: this guest in the one-guest
// topology, node 1 in the two-guest one.
func serverIP(vm testutil.VMInfo) string {
	if vm.Topo == "two" && vm.Node == 2 {
		return vm.Peer
	}
	return vm.IP
}

func udOptions(slots int) *cm.UDOptions {
	return &cm.UDOptions{Cap: uverbs.QPCap{MaxSendWR: uint32(slots) + 1, MaxRecvWR: uint32(slots), MaxSendSGE: 1, MaxRecvSGE: 1}}
}

// rigFor wraps an endpoint's verbs objects for the datapath helpers.
func rigFor(t *testing.T, ep *cm.UDEndpoint, slots, size int) *udRig {
	r := &udRig{t: t, ctx: ep.Context(), pd: ep.PD(), cq: ep.RecvCQ(), qp: ep.QP(), slots: slots, size: size}
	var err error
	r.mem, err = uverbs.AllocMemory((slots+1)*(size+uverbs.GRHLen), uverbs.MemoryOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { r.mem.Close() })
	r.mr, err = r.pd.RegMR(r.mem.Bytes(), uverbs.AccessLocalWrite)
	require.NoError(t, err)
	t.Cleanup(func() { r.mr.Close() })
	return r
}

// TestUDAddyServerCClient: ibgo answers SIDR for Debian's udaddy client
// (udaddy -s IP) and echoes its datagrams back to the QPN in their
// immediate data, through an AH built from the receive's GRH.
func TestUDAddyServerCClient(t *testing.T) {
	vm := testutil.VM(t)
	if vm.Topo == "two" && vm.Node == 2 {
		// Node 2 runs the C client against node 1's ibgo server.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		waitTCP(t, ctx, vm.Peer, 18701)
		c := startC(t, ctx, "udaddy", "-s", vm.Peer, "-b", vm.IP)
		out, err := c.wait(ctx)
		require.NoError(t, err, out)
		require.Contains(t, out, "data transfers complete")
		require.Contains(t, out, "return status 0")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := cm.ListenUD(ctx, net.JoinHostPort(vm.IP, strconv.Itoa(udaddyPort)), udOptions(udaddyCount))
	require.NoError(t, err)
	defer l.Close()
	ep := l.Endpoint()
	require.EqualValues(t, cm.UDPQKey, ep.QKey(), "PS_UDP ids use RDMA_UDP_QKEY")
	r := rigFor(t, ep, udaddyCount, udaddySize)
	r.postRecvs() // before the SIDR REP: the client sends at once

	var client *cproc
	if vm.Topo == "two" {
		signalTCP(t, ctx, vm.IP, 18701)
	} else {
		client = startC(t, ctx, "udaddy", "-s", vm.IP)
	}
	req, err := l.Accept(ctx)
	require.NoError(t, err)
	require.Equal(t, serverPeerIP(vm), req.Remote.IP.Addr().String(), "the request names the client's address")
	require.NoError(t, req.Accept(nil))

	var peer *uverbs.AH
	var peerQPN uint32
	got := 0
	err = r.poll(ctx, udaddyCount, 0, func(wc uverbs.WC, buf []byte) {
		require.NotZero(t, wc.Flags&uverbs.WCWithImm, "udaddy sends SEND_WITH_IMM")
		require.Equal(t, wc.SrcQP, wc.Imm, "the immediate carries the sender's QPN")
		require.EqualValues(t, udaddySize+uverbs.GRHLen, wc.ByteLen)
		g, err := uverbs.ParseGRH(buf)
		require.NoError(t, err)
		require.Equal(t, "::ffff:"+serverPeerIP(vm), g.SGID.String())
		if peer == nil {
			a, err := ep.Context().AHAttrFromWC(ep.Port(), &wc, buf)
			require.NoError(t, err)
			peer, err = ep.PD().CreateAH(a)
			require.NoError(t, err)
			peerQPN = wc.Imm
		}
		got++
	})
	require.NoError(t, err)
	defer peer.Close()
	require.Equal(t, udaddyCount, got)
	for i := 0; i < udaddyCount; i++ {
		r.send(peer, peerQPN, cm.UDPQKey, pattern(i, udaddySize), &peerQPN, true, i)
	}
	require.NoError(t, r.poll(ctx, 0, udaddyCount, nil))
	if client != nil {
		out, err := client.wait(ctx)
		require.NoError(t, err, out)
		require.Contains(t, out, "data transfers complete")
		require.Contains(t, out, "return status 0")
	}
}

// serverPeerIP is the client's address as the server sees it.
func serverPeerIP(vm testutil.VMInfo) string {
	if vm.Topo == "two" {
		return vm.Peer
	}
	return vm.IP
}

// TestUDAddyClientCServer: ibgo resolves Debian's udaddy server (udaddy -b
// IP) by SIDR, sends it 10 datagrams with its QPN as immediate data, and
// checks the 10 replies. The C server replies with the first 100 bytes of
// its receive buffer, which hold the GRH area of our last datagram (the
// IPv4 header naming us) and then our payload: both are checked.
func TestUDAddyClientCServer(t *testing.T) {
	vm := testutil.VM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srvIP := serverIP(vm)
	if vm.Topo == "two" && vm.Node == 1 {
		// udaddy's stdout is a pipe (its lines come at exit): the client
		// retries until the listener answers.
		s := startC(t, ctx, "udaddy", "-b", vm.IP)
		signalTCP(t, ctx, vm.IP, 18702)
		out, err := s.wait(ctx)
		require.NoError(t, err, out)
		require.Contains(t, out, "data transfers complete")
		return
	}
	var s *cproc
	if vm.Topo == "two" {
		waitTCP(t, ctx, srvIP, 18702)
	} else {
		s = startC(t, ctx, "udaddy", "-b", vm.IP)
	}
	var ep *cm.UDEndpoint
	var peer *cm.UDPeer
	var err error
	// Retry "no listener" (SIDR status 1) until the C server listens.
	for i := 0; ; i++ {
		ep, peer, err = cm.DialUD(ctx, net.JoinHostPort(srvIP, strconv.Itoa(udaddyPort)), udOptions(udaddyCount))
		if err == nil || i == 100 || !errors.Is(err, cm.ErrUnreachable) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err)
	defer ep.Close()
	defer peer.Close()
	require.EqualValues(t, cm.UDPQKey, peer.QKey)
	require.NotZero(t, peer.QPN)
	require.True(t, peer.AHAttr.IsGlobal)
	require.Equal(t, "::ffff:"+srvIP, peer.AHAttr.GRH.DGID.String())

	r := rigFor(t, ep, udaddyCount, udaddySize)
	r.postRecvs()
	payload := pattern(1, udaddySize)
	qpn := ep.QP().QPN()
	for i := 0; i < udaddyCount; i++ {
		wr := uverbs.SendWR{}
		peer.Dest(&wr)
		require.Equal(t, peer.QPN, wr.RemoteQPN)
		r.send(wr.AH, wr.RemoteQPN, wr.RemoteQKey, payload, &qpn, i == udaddyCount-1, i)
	}
	got := 0
	myIP := netip.MustParseAddr(vm.IP).As4()
	require.NoError(t, r.poll(ctx, udaddyCount, 1, func(wc uverbs.WC, buf []byte) {
		require.Equal(t, peer.QPN, wc.SrcQP)
		require.Equal(t, peer.QPN, wc.Imm, "the C server puts its QPN in the immediate")
		reply := buf[uverbs.GRHLen:]
		require.Len(t, reply, udaddySize)
		// Our GRH area as the server received it: 20 zero bytes, then an
		// IPv4 header from our address.
		require.Equal(t, make([]byte, 20), reply[:20])
		require.EqualValues(t, 0x45, reply[20])
		require.Equal(t, myIP[:], reply[32:36], "source address of our datagram")
		require.Equal(t, payload[:udaddySize-uverbs.GRHLen], reply[uverbs.GRHLen:], "our payload, echoed")
		got++
	}))
	require.Equal(t, udaddyCount, got)
	if s != nil {
		out, err := s.wait(ctx)
		require.NoError(t, err, out)
		require.Contains(t, out, "data transfers complete")
		require.Contains(t, out, "return status 0")
	}
}

// TestSIDRGo: Go client and Go server, private data both ways, and a
// datagram each way (one guest, or across the two).
func TestSIDRGo(t *testing.T) {
	vm := testutil.VM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := net.JoinHostPort(serverIP(vm), "7201")
	reqData := []byte("hello from the client")
	repData := []byte("welcome, client")
	server := func() error {
		l, err := cm.ListenUD(ctx, net.JoinHostPort(vm.IP, "7201"), udOptions(4))
		if err != nil {
			return err
		}
		defer l.Close()
		r := rigFor(t, l.Endpoint(), 4, 64)
		r.postRecvs()
		if vm.Topo == "two" {
			signalTCP(t, ctx, vm.IP, 18703)
		}
		req, err := l.Accept(ctx)
		if err != nil {
			return err
		}
		if len(req.PrivateData) != 180 || !bytes.HasPrefix(req.PrivateData, reqData) {
			return fmt.Errorf("request private data %q (len %d), want %q padded to 180", req.PrivateData, len(req.PrivateData), reqData)
		}
		if err := req.Accept(repData); err != nil {
			return err
		}
		var from uverbs.WC
		var grh []byte
		if err := r.poll(ctx, 1, 0, func(wc uverbs.WC, buf []byte) {
			from, grh = wc, append([]byte(nil), buf...)
		}); err != nil {
			return err
		}
		if !bytes.Equal(grh[uverbs.GRHLen:], pattern(1, 64)) {
			return fmt.Errorf("server received %q", grh[uverbs.GRHLen:])
		}
		a, err := l.Endpoint().Context().AHAttrFromWC(l.Endpoint().Port(), &from, grh)
		if err != nil {
			return err
		}
		ah, err := l.Endpoint().PD().CreateAH(a)
		if err != nil {
			return err
		}
		defer ah.Close()
		r.send(ah, from.Imm, cm.UDPQKey, pattern(2, 64), nil, true, 0)
		return r.poll(ctx, 0, 1, nil)
	}
	client := func() error {
		if vm.Topo == "two" {
			waitTCP(t, ctx, vm.Peer, 18703)
		}
		o := udOptions(4)
		o.PrivateData = reqData
		var ep *cm.UDEndpoint
		var peer *cm.UDPeer
		var err error
		for i := 0; ; i++ {
			ep, peer, err = cm.DialUD(ctx, addr, o)
			if err == nil || i == 50 || !errors.Is(err, cm.ErrUnreachable) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		defer ep.Close()
		defer peer.Close()
		if len(peer.PrivateData) != 136 || !bytes.HasPrefix(peer.PrivateData, repData) {
			return fmt.Errorf("reply private data %q (len %d), want %q padded to 136", peer.PrivateData, len(peer.PrivateData), repData)
		}
		r := rigFor(t, ep, 4, 64)
		r.postRecvs()
		qpn := ep.QP().QPN()
		r.send(peer.AH, peer.QPN, peer.QKey, pattern(1, 64), &qpn, true, 0)
		return r.poll(ctx, 1, 1, func(wc uverbs.WC, buf []byte) {
			require.Equal(t, pattern(2, 64), buf[uverbs.GRHLen:])
			require.Equal(t, peer.QPN, wc.SrcQP)
		})
	}
	switch {
	case vm.Topo == "two" && vm.Node == 1:
		require.NoError(t, server())
	case vm.Topo == "two":
		require.NoError(t, client())
	default:
		errc := make(chan error, 1)
		go func() { errc <- server() }()
		require.NoError(t, client())
		require.NoError(t, <-errc)
	}
}

// TestSIDRFailures: no listener answers SIDR status 1 within
// milliseconds; a server's reject arrives as ErrRefused with its private
// data (136 bytes, SIDR status 2).
func TestSIDRFailures(t *testing.T) {
	vm := testutil.OneNode(t)
	t.Run("no-listener", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		_, _, err := cm.DialUD(ctx, net.JoinHostPort(vm.IP, "7299"), udOptions(1))
		require.Error(t, err)
		require.ErrorIs(t, err, cm.ErrUnreachable)
		var ce *cm.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, cm.EventUnreachable, ce.Event)
		require.EqualValues(t, cm.SIDRUnsupported, ce.Status, "SIDR status 1: no listener on the service id")
		require.Less(t, time.Since(start), 5*time.Second)
		t.Logf("no listener: %v after %v", err, time.Since(start))
	})
	t.Run("reject", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		l, err := cm.ListenUD(ctx, net.JoinHostPort(vm.IP, "7202"), udOptions(1))
		require.NoError(t, err)
		defer l.Close()
		errc := make(chan error, 1)
		go func() {
			req, err := l.Accept(ctx)
			if err == nil {
				err = req.Reject([]byte("go away"))
			}
			errc <- err
		}()
		_, _, err = cm.DialUD(ctx, net.JoinHostPort(vm.IP, "7202"), udOptions(1))
		require.NoError(t, <-errc)
		require.ErrorIs(t, err, cm.ErrRefused)
		var ce *cm.Error
		require.ErrorAs(t, err, &ce)
		require.EqualValues(t, cm.SIDRReject, ce.Status)
		require.Len(t, ce.PrivateData, 136)
		require.True(t, bytes.HasPrefix(ce.PrivateData, []byte("go away")), "%q", ce.PrivateData)
	})
	t.Run("cancel", func(t *testing.T) {
		// A listener that never answers: the dial ends with the context.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		l, err := cm.ListenUD(ctx, net.JoinHostPort(vm.IP, "7203"), udOptions(1))
		require.NoError(t, err)
		defer l.Close()
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		defer dcancel()
		start := time.Now()
		_, _, err = cm.DialUD(dctx, net.JoinHostPort(vm.IP, "7203"), udOptions(1))
		require.ErrorIs(t, err, cm.ErrTimeout)
		require.Less(t, time.Since(start), 6*time.Second)
	})
}

// waitTCP waits until a TCP listener at ip:port accepts (the other guest's
// "ready" signal) and closes the connection.
func waitTCP(t *testing.T, ctx context.Context, ip string, port int) {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			buf := make([]byte, 1)
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			c.Read(buf)
			c.Close()
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the other guest never signalled on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signalTCP tells the other guest we are ready: it accepts one connection on
// ip:port, writes a byte and closes (in the background, until ctx ends).
func signalTCP(t *testing.T, ctx context.Context, ip string, port int) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	require.NoError(t, err)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte{1})
		c.Close()
	}()
}

// TestSIDRIPv6: SIDR over the netdev's IPv6 link-local address (RoCE v2
// GID fe80::…) in one guest, with a datagram each way.
func TestSIDRIPv6(t *testing.T) {
	vm := testutil.OneNode(t)
	ll := linkLocal(t, vm)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := netip.AddrPortFrom(ll, 7204).String()
	l, err := cm.ListenUD(ctx, addr, udOptions(2))
	require.NoError(t, err)
	defer l.Close()
	sr := rigFor(t, l.Endpoint(), 2, 64)
	sr.postRecvs()
	errc := make(chan error, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err == nil {
			err = req.Accept(nil)
		}
		errc <- err
	}()
	ep, peer, err := cm.DialUD(ctx, addr, udOptions(2))
	require.NoError(t, err)
	defer ep.Close()
	defer peer.Close()
	require.NoError(t, <-errc)
	require.Equal(t, ll.WithZone("").String(), peer.AHAttr.GRH.DGID.String(), "the server's link-local GID")
	cr := rigFor(t, ep, 2, 64)
	cr.postRecvs()
	qpn := ep.QP().QPN()
	cr.send(peer.AH, peer.QPN, peer.QKey, pattern(3, 64), &qpn, true, 0)
	require.NoError(t, cr.poll(ctx, 0, 1, nil))
	var from uverbs.WC
	var grh []byte
	require.NoError(t, sr.poll(ctx, 1, 0, func(wc uverbs.WC, buf []byte) {
		from, grh = wc, append([]byte(nil), buf...)
	}))
	require.Equal(t, pattern(3, 64), grh[uverbs.GRHLen:])
	g, err := uverbs.ParseGRH(grh)
	require.NoError(t, err)
	require.Equal(t, 6, g.Version, "an IPv6 GRH")
	a, err := l.Endpoint().Context().AHAttrFromWC(l.Endpoint().Port(), &from, grh)
	require.NoError(t, err)
	ah, err := l.Endpoint().PD().CreateAH(a)
	require.NoError(t, err)
	defer ah.Close()
	sr.send(ah, from.Imm, cm.UDPQKey, pattern(4, 64), nil, true, 0)
	require.NoError(t, sr.poll(ctx, 0, 1, nil))
	require.NoError(t, cr.poll(ctx, 1, 0, func(wc uverbs.WC, buf []byte) {
		require.Equal(t, pattern(4, 64), buf[uverbs.GRHLen:])
	}))
}

// TestIPoIBPortSpaceOnRxE: the IPoIB port space takes its Q_Key from the
// IPoIB broadcast group through the SA, which RoCE does not have; the
// brief predicted that a QP on such an id cannot be initialised on rxe.
// This records where it fails.
func TestIPoIBPortSpaceOnRxE(t *testing.T) {
	vm := testutil.OneNode(t)
	ch, err := cm.NewChannel()
	require.NoError(t, err)
	defer ch.Close()
	id, err := ch.CreateID(cm.PortSpaceIPoIB, uverbs.QPTypeUD)
	require.NoError(t, err)
	defer id.Close()
	a, err := cm.ParseAddr(vm.IP)
	require.NoError(t, err)
	berr := id.Bind(a)
	t.Logf("bind: %v", berr)
	_, _, ierr := id.InitQPAttr(uverbs.QPStateInit)
	t.Logf("INIT_QP_ATTR(INIT): %v", ierr)
	_, qerr := id.CreateQP(nil, cm.QPInitAttr{Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	t.Logf("create qp: %v", qerr)
	require.ErrorIs(t, berr, syscall.EINVAL, "BIND of a PS_IPOIB id to a RoCE address")
	require.ErrorIs(t, ierr, syscall.EINVAL)
	require.Error(t, qerr)
}

// TestUDAddyServerTwoClients: one ListenUD QP answers both of udaddy's ids
// (udaddy -c 2) and replies to each by the QPN in its immediate data.
func TestUDAddyServerTwoClients(t *testing.T) {
	vm := testutil.OneNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const clients, slots = 2, 2 * udaddyCount
	l, err := cm.ListenUD(ctx, net.JoinHostPort(vm.IP, strconv.Itoa(udaddyPort)), udOptions(slots))
	require.NoError(t, err)
	defer l.Close()
	ep := l.Endpoint()
	r := rigFor(t, ep, slots, udaddySize)
	r.postRecvs()
	c := startC(t, ctx, "udaddy", "-s", vm.IP, "-c", strconv.Itoa(clients))
	for i := 0; i < clients; i++ {
		req, err := l.Accept(ctx)
		require.NoError(t, err)
		require.NoError(t, req.Accept(nil))
	}
	ahs := map[uint32]*uverbs.AH{}
	defer func() {
		for _, ah := range ahs {
			ah.Close()
		}
	}()
	per := map[uint32]int{}
	require.NoError(t, r.poll(ctx, clients*udaddyCount, 0, func(wc uverbs.WC, buf []byte) {
		require.Equal(t, wc.SrcQP, wc.Imm)
		per[wc.Imm]++
		if ahs[wc.Imm] == nil {
			a, err := ep.Context().AHAttrFromWC(ep.Port(), &wc, buf)
			require.NoError(t, err)
			ahs[wc.Imm], err = ep.PD().CreateAH(a)
			require.NoError(t, err)
		}
	}))
	require.Len(t, per, clients, "datagrams from two client QPs")
	seq := 0
	for qpn, ah := range ahs {
		require.Equal(t, udaddyCount, per[qpn])
		for i := 0; i < udaddyCount; i++ {
			q := qpn
			r.send(ah, qpn, cm.UDPQKey, pattern(i, udaddySize), &q, true, seq)
			seq++
			require.NoError(t, r.poll(ctx, 0, 1, nil))
		}
	}
	out, err := c.wait(ctx)
	require.NoError(t, err, out)
	require.Contains(t, out, "data transfers complete")
	require.Contains(t, out, "return status 0")
}
