// Package ib is the aeron:ib binding of the media driver's media seam
// (driver.Media): Aeron frames carried as InfiniBand/RoCE verbs messages.
// It is the only aeron package that meets verbs (uverbs) and the connection
// manager (cm).
//
// This is a slice of issue 14: UD unicast only. A subscription's transport
// listens for RDMA CM service id resolution (SIDR) on its endpoint's IP and
// port (cm.ListenUD); a publication's transport resolves the subscriber's
// QP with SIDR (cm.DialUD). Frames leave through a registered bounce
// buffer (a copy per datagram: the driver's term buffers are not
// registered with the device yet) and arrive in a ring of posted receive
// buffers that are reposted in place, GRH stripped, and handed to the
// driver exactly as the udp binding hands datagrams. ib-qp=rc is the
// reliable-connection transport of rc.go; multicast is refused with an
// error saying so.
package ib

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/uverbs"
)

// Media is the ib medium. Safe for concurrent use.
type Media struct {
	// RecvErrors counts receive completions in error; SendErrors send
	// completions in error; Unresolved datagrams for a destination no
	// peer is known for.
	RecvErrors, SendErrors, Unresolved atomic.Int64
	// ResolveErrors counts background SIDR attempts of a publication that
	// failed otherwise than "nobody listens there yet".
	ResolveErrors atomic.Int64
	// RC counts the ib-qp=rc connections' events (rc.go).
	RC RCStats
}

// New returns the ib medium.
func New() *Media { return &Media{} }

// Name is "ib".
func (m *Media) Name() string { return string(uri.MediaIB) }

// ResolveTimeout bounds the SIDR exchange of a publication's Open.
var ResolveTimeout = 5 * time.Second

// ResolveRetry is how often a publication whose subscription has not
// answered SIDR yet asks again.
var ResolveRetry = 100 * time.Millisecond

const (
	minRing   = 64
	maxRing   = 4096
	sendSlots = 64
	// signalEvery: one send in this many asks for a completion (selective
	// signalling); a completion frees its slot and every earlier one, as a
	// send queue completes in order.
	signalEvery = 16
	pollBatch   = 32
)

// ringSize is the number of receive buffers for a receive window of
// window bytes and datagrams of up to payload bytes: twice the window's
// datagrams (a window in flight while the previous one drains), within
// [minRing, maxRing] and the device's work-request and CQ limits.
func ringSize(window, payload int, maxWR, maxCQE uint32) int {
	n := 2 * ((window + payload - 1) / payload)
	n = min(max(n, minRing), maxRing)
	if maxWR > 0 {
		n = min(n, int(maxWR))
	}
	if maxCQE > sendSlots {
		n = min(n, int(maxCQE)-sendSlots)
	}
	return n
}

// CheckMTU is the rule a UD channel's MTU must meet: one Aeron datagram is
// one IB message, at most the port's active path MTU.
func CheckMTU(mtu, activeMTU int) error {
	if mtu > activeMTU {
		return fmt.Errorf("mtu %d is above the port's active MTU %d: with ib-qp=ud an Aeron datagram is one IB message; lower mtu or use ib-qp=rc", mtu, activeMTU)
	}
	return nil
}

// Open opens a UD endpoint for ch: a listening one bound to bind (a
// subscription's endpoint) or, for a sender (connect valid), one that
// resolved connect's QP by SIDR.
func (m *Media) Open(ch *uri.ChannelURI, bind, connect netip.AddrPort, p driver.TransportParams, aff driver.Affinity) (driver.Transport, error) {
	if qp, _ := ch.Get(uri.KeyIBQueuePair); qp == uri.IBQueuePairRC {
		return m.openRC(ch, bind, connect, p, aff)
	}
	if bind.Addr().IsMulticast() || connect.Addr().IsMulticast() {
		return nil, errors.New("ib: multicast aeron:ib channels are not implemented by this driver yet (only UD unicast)")
	}
	t := &transport{m: m, peers: map[netip.AddrPort]*cm.UDPeer{}, keys: map[peerKey]netip.AddrPort{}}
	window := max(p.SocketRcvbuf, 128<<10)
	// The QP's receive queue is sized before the device is known (the id
	// chooses it); maxRing is far below rxe's and mlx5's limits, and the
	// number posted is clamped to the device's below.
	ring := ringSize(window, 1024, 0, 0)
	opts := &cm.UDOptions{Cap: uverbs.QPCap{MaxSendWR: sendSlots, MaxRecvWR: uint32(ring), MaxSendSGE: 1, MaxRecvSGE: 1}}
	if connect.IsValid() {
		t.connect = connect
		err := t.dial(context.Background(), opts, p, aff, window, ring)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, cm.ErrUnreachable) {
			t.Close()
			return nil, err
		}
		// Nobody answers SIDR on connect yet: a publication may exist
		// before its subscription (as an aeron:udp one sends into the
		// void). Resolve in the background; until then datagrams are
		// dropped as a UDP socket would drop them.
		t.done, t.exited = make(chan struct{}), make(chan struct{})
		go t.dialLoop(opts, p, aff, window, ring)
		return t, nil
	}
	l, err := cm.ListenUD(context.Background(), bind.String(), opts)
	if err != nil {
		return nil, fmt.Errorf("ib: listen on %s: %w", bind, err)
	}
	t.l, t.ep = l, l.Endpoint()
	if err := t.setup(p, aff, window, ring); err != nil {
		t.Close()
		return nil, err
	}
	t.done, t.exited = make(chan struct{}), make(chan struct{})
	go t.acceptLoop()
	t.ready.Store(true)
	return t, nil
}

// dial resolves t.connect by SIDR and sets the endpoint up.
func (t *transport) dial(ctx context.Context, opts *cm.UDOptions, p driver.TransportParams, aff driver.Affinity, window, ring int) error {
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	ep, peer, err := cm.DialUD(ctx, t.connect.String(), opts)
	cancel()
	if err != nil {
		return fmt.Errorf("ib: resolve %s by SIDR: %w", t.connect, err)
	}
	t.ep = ep
	t.peers[t.connect] = peer
	if peer.AHAttr.IsGlobal {
		t.keys[peerKey{qpn: peer.QPN, gid: peer.AHAttr.GRH.DGID}] = t.connect
	}
	if err := t.setup(p, aff, window, ring); err != nil {
		return err
	}
	t.ready.Store(true)
	return nil
}

// dialLoop retries SIDR until a subscription answers or Close.
func (t *transport) dialLoop(opts *cm.UDOptions, p driver.TransportParams, aff driver.Affinity, window, ring int) {
	defer close(t.exited)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-t.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-t.done:
			return
		case <-time.After(ResolveRetry):
		}
		err := t.dial(ctx, opts, p, aff, window, ring)
		if err == nil {
			return
		}
		t.release()
		if !errors.Is(err, cm.ErrUnreachable) {
			t.m.ResolveErrors.Add(1)
			if !errors.Is(err, cm.ErrTimeout) {
				return // a rule broken (the port's MTU): retrying cannot help
			}
		}
	}
}

type peerKey struct {
	qpn uint32
	gid uverbs.GID
}

// transport is one UD endpoint. It is used by the agent it was opened for
// only; the SIDR accept goroutine touches the listener alone.
type transport struct {
	m       *Media
	ep      *cm.UDEndpoint
	l       *cm.UDListener
	done    chan struct{} // closed by Close: stops the accept or dial goroutine
	exited  chan struct{} // closed when that goroutine has returned
	ready   atomic.Bool   // the endpoint below is set up (stored last)
	connect netip.AddrPort
	vctx    *uverbs.Context
	port    uint8
	mem     *uverbs.Memory
	mr      *uverbs.MR
	qp      *uverbs.QP
	cq      *uverbs.CQ

	slot     int // bytes per buffer: GRH + the port's active MTU
	payload  int // the port's active MTU
	ring     int // receive buffers, WRIDs 0..ring-1
	sendBase int // offset of the send slots in mem
	sendHead int // next send slot
	sendFree int // send slots not in flight
	sendTail int // oldest send slot in flight
	mediaTS  bool

	// preallocated work requests: posting allocates nothing
	rwr  [1]uverbs.RecvWR
	rsge [1]uverbs.SGE
	swr  [1]uverbs.SendWR
	ssge [1]uverbs.SGE
	wcs  [pollBatch]uverbs.WC
	// receive completions polled while reclaiming send slots, delivered by
	// the next Recv
	pending []uverbs.WC
	pendAt  int // next of pending to deliver

	peers map[netip.AddrPort]*cm.UDPeer
	keys  map[peerKey]netip.AddrPort
}

const sendWRID = 1 << 40

func (t *transport) setup(p driver.TransportParams, aff driver.Affinity, window, ring int) error {
	t.vctx, t.port, t.qp, t.cq = t.ep.Context(), t.ep.Port(), t.ep.QP(), t.ep.RecvCQ()
	if t.vctx == nil || t.qp == nil || t.cq == nil {
		return errors.New("ib: the UD endpoint has no QP")
	}
	pa, err := t.vctx.QueryPort(t.port)
	if err != nil {
		return fmt.Errorf("ib: query port %d: %w", t.port, err)
	}
	t.payload = pa.ActiveMTU.Bytes()
	if aff == driver.AffinitySender {
		// A receiver's MTU is the driver default, not the channel's; it
		// takes what the port carries.
		if err := CheckMTU(p.MTU, t.payload); err != nil {
			return err
		}
	}
	da, err := t.vctx.QueryDevice()
	if err != nil {
		return fmt.Errorf("ib: query device: %w", err)
	}
	t.ring = min(ring, ringSize(window, t.payload, da.MaxQPWR, da.MaxCQE))
	t.slot = uverbs.GRHLen + t.payload
	t.sendBase = t.ring * t.slot
	t.sendFree, t.sendHead, t.sendTail = sendSlots, 0, 0
	t.mediaTS = p.MediaTimestamps
	t.pending = make([]uverbs.WC, 0, t.ring)
	if t.mem, err = uverbs.AllocMemory((t.ring+sendSlots)*t.slot, uverbs.MemoryOptions{}); err != nil {
		return fmt.Errorf("ib: receive ring: %w", err)
	}
	if t.mr, err = t.ep.PD().RegMR(t.mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("ib: register receive ring: %w", err)
	}
	for i := 0; i < t.ring; i++ {
		if err := t.postRecv(i); err != nil {
			return err
		}
	}
	return nil
}

func (t *transport) postRecv(i int) error {
	t.rsge[0] = t.mr.SGE(i*t.slot, t.slot)
	t.rwr[0] = uverbs.RecvWR{WRID: uint64(i), SGL: t.rsge[:]}
	if _, err := t.qp.PostRecv(t.rwr[:]); err != nil {
		return fmt.Errorf("ib: post receive: %w", err)
	}
	return nil
}

// acceptLoop answers every SIDR request with the listener's QP until Close.
func (t *transport) acceptLoop() {
	defer close(t.exited)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-t.done; cancel() }()
	for {
		r, err := t.l.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		_ = r.Accept(nil)
	}
}

// reap polls the CQ once: send completions free send slots, receive
// completions are kept for Recv.
func (t *transport) reap() error {
	if t.pendAt > 0 { // compact: pending never outgrows the ring
		t.pending = t.pending[:copy(t.pending, t.pending[t.pendAt:])]
		t.pendAt = 0
	}
	n, err := t.cq.Poll(t.wcs[:])
	if err != nil {
		return fmt.Errorf("ib: poll: %w", err)
	}
	for i := range t.wcs[:n] {
		w := &t.wcs[i]
		if w.WRID >= sendWRID {
			k := int(w.WRID - sendWRID)
			freed := (k + 1 - t.sendTail + sendSlots) % sendSlots
			if freed == 0 {
				freed = sendSlots
			}
			t.sendFree += freed
			t.sendTail = (k + 1) % sendSlots
			if w.Status != uverbs.WCSuccess {
				t.m.SendErrors.Add(1)
			}
			continue
		}
		t.pending = append(t.pending, *w)
	}
	return nil
}

func (t *transport) Send(dest netip.AddrPort, datagrams [][]byte) (int, error) {
	if !t.ready.Load() {
		return len(datagrams), nil // not resolved yet: lost, as on an unconnected UDP path
	}
	if !dest.IsValid() {
		dest = t.connect
	}
	peer := t.peers[dest]
	if peer == nil {
		t.m.Unresolved.Add(1)
		return 0, fmt.Errorf("ib: no UD peer known for %s", dest)
	}
	for i, d := range datagrams {
		if len(d) > t.payload {
			return i, fmt.Errorf("ib: datagram of %d bytes to %s is above the port MTU %d", len(d), dest, t.payload)
		}
		for t.sendFree == 0 {
			if err := t.reap(); err != nil {
				return i, err
			}
			if t.sendFree == 0 {
				return i, nil // short send: the send queue is full
			}
		}
		off := t.sendBase + t.sendHead*t.slot
		copy(t.mem.Bytes()[off:], d)
		t.ssge[0] = t.mr.SGE(off, len(d))
		t.swr[0] = uverbs.SendWR{WRID: sendWRID + uint64(t.sendHead), Opcode: uverbs.WRSend, SGL: t.ssge[:]}
		if t.sendHead%signalEvery == signalEvery-1 {
			t.swr[0].Flags = uverbs.SendSignaled
		}
		peer.Dest(&t.swr[0])
		if _, err := t.qp.PostSend(t.swr[:]); err != nil {
			return i, fmt.Errorf("ib: post send to %s: %w", dest, err)
		}
		t.sendHead = (t.sendHead + 1) % sendSlots
		t.sendFree--
	}
	return len(datagrams), nil
}

func (t *transport) Recv(maxN int, fn driver.RecvFunc) (int, error) {
	if !t.ready.Load() {
		return 0, nil
	}
	if t.pendAt == len(t.pending) {
		t.pending, t.pendAt = t.pending[:0], 0
		if err := t.reap(); err != nil {
			return 0, err
		}
	}
	n := 0
	for n < maxN && t.pendAt < len(t.pending) {
		w := t.pending[t.pendAt]
		t.pendAt++
		i := int(w.WRID)
		buf := t.mem.Bytes()[i*t.slot : (i+1)*t.slot]
		if w.Status == uverbs.WCSuccess && int(w.ByteLen) >= uverbs.GRHLen {
			if from, ok := t.source(&w, buf[:uverbs.GRHLen]); ok {
				var ts int64
				if t.mediaTS {
					// software receive time: completion timestamps
					// (mlx5) are not wired in yet
					ts = time.Now().UnixNano()
				}
				fn(t, buf[uverbs.GRHLen:w.ByteLen], from, ts)
				n++
			}
		} else if w.Status != uverbs.WCSuccess {
			t.m.RecvErrors.Add(1)
		}
		if err := t.postRecv(i); err != nil {
			return n, err
		}
	}
	return n, nil
}

// source names the sender of a received datagram: an address whose IP is
// the sender's (from the GRH) and whose port is derived from its QPN, so
// replies to it (status messages, NAKs) find the AH made here.
func (t *transport) source(w *uverbs.WC, grh []byte) (netip.AddrPort, bool) {
	g, err := uverbs.ParseGRH(grh)
	if err != nil {
		t.m.RecvErrors.Add(1)
		return netip.AddrPort{}, false
	}
	k := peerKey{qpn: w.SrcQP, gid: g.SGID}
	if a, ok := t.keys[k]; ok {
		return a, true
	}
	attr, err := t.vctx.AHAttrFromWC(t.port, w, grh)
	if err != nil {
		t.m.RecvErrors.Add(1)
		return netip.AddrPort{}, false
	}
	peer, err := cm.NewUDPeer(t.ep.PD(), cm.UDParam{QPN: w.SrcQP, QKey: cm.UDPQKey, AH: attr})
	if err != nil {
		t.m.RecvErrors.Add(1)
		return netip.AddrPort{}, false
	}
	ip, _ := netip.AddrFromSlice(g.SGID[:])
	ip = ip.Unmap()
	port := uint16(w.SrcQP)
	a := netip.AddrPortFrom(ip, port)
	for t.peers[a] != nil || a == t.connect {
		port++
		a = netip.AddrPortFrom(ip, port)
	}
	t.keys[k], t.peers[a] = a, peer
	return a, true
}

func (t *transport) Reconnect(dest netip.AddrPort) error {
	if dest == t.connect {
		return nil
	}
	return fmt.Errorf("ib: reconnect to %s is not implemented yet", dest)
}

func (t *transport) SocketRcvbuf() (int, error) { return t.ring * t.payload, nil }

func (t *transport) LocalAddr() string {
	if !t.ready.Load() {
		return "0.0.0.0:0" // a publication still resolving its subscription
	}
	a := t.ep.LocalAddr()
	return a.String()
}

func (t *transport) Binding() string { return string(uri.MediaIB) }

func (t *transport) Close() error {
	if t.done != nil {
		select {
		case <-t.done:
			return nil
		default:
			close(t.done)
		}
		<-t.exited
	}
	return t.release()
}

// release frees what setup and dial made (idempotent).
func (t *transport) release() error {
	t.ready.Store(false)
	var errs []error
	for _, p := range t.peers {
		errs = append(errs, p.Close())
	}
	clear(t.peers)
	clear(t.keys)
	t.pending, t.pendAt = t.pending[:0], 0
	if t.mr != nil {
		errs = append(errs, t.mr.Close())
		t.mr = nil
	}
	if t.l != nil {
		errs = append(errs, t.l.Close())
	} else if t.ep != nil {
		errs = append(errs, t.ep.Close())
	}
	t.l, t.ep = nil, nil
	if t.mem != nil {
		errs = append(errs, t.mem.Close())
		t.mem = nil
	}
	return errors.Join(errs...)
}
