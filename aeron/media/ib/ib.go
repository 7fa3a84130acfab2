// Package ib is the aeron:ib binding of the media driver's media seam
// (driver.Media): Aeron frames carried as InfiniBand/RoCE verbs messages.
// It is the only aeron package that meets verbs (uverbs) and the connection
// manager (cm).
//
// UD (the default) carries each Aeron datagram as one UD message. A
// subscription's transport listens for RDMA CM service id resolution
// (SIDR) on its endpoint's IP and port (cm.ListenUD); a publication's
// transport resolves the subscriber's QP with SIDR (cm.DialUD). A publication's log is registered with the
// device (driver.MemoryRegistrar, regmem.go) and frames in it are posted
// straight from the term buffer; small frames go inline and others (in
// unregistered memory, or beyond the in-flight bound) through a registered
// bounce buffer; the datagrams of one Send are one post list and one
// doorbell. Frames arrive in a ring of posted receive buffers that are
// reposted in place, GRH stripped, and handed to the driver exactly as the
// udp binding hands datagrams. Multicast channels (multicast.go) join their
// groups with the RDMA CM. ib-qp=rc is the reliable-connection transport of
// rc.go. What the medium recovers from (QP and CQ failures, link outages,
// device removal) is in errors.go, cqerror.go, asyncev.go and
// devremove.go; what it counts is Media's fields, published in the CnC.
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
	// completions in error; Unresolved datagrams dropped because their
	// destination was not resolved yet (peers.go: a UD transport resolves
	// it in the background) or, on ib-qp=rc, frames from no known
	// connection.
	RecvErrors, SendErrors, Unresolved atomic.Int64
	// ResolveErrors counts background SIDR attempts of a publication that
	// failed otherwise than "nobody listens there yet".
	ResolveErrors atomic.Int64
	// RegisterErrors counts publication logs the device refused to
	// register (their frames are then copied); Copied, Inline and
	// ZeroCopy count datagrams sent through the bounce buffer, inline in
	// the work request, and straight from a registered log.
	RegisterErrors, Copied, Inline, ZeroCopy atomic.Int64
	// QPRestarts counts receive paths restarted after their QP went to
	// the error state (errors.go); Reresolves publications that resolved
	// their subscription again after it fell silent (resolve.go).
	QPRestarts, Reresolves atomic.Int64
	// CQErrors counts UD completion queues that failed (a poll returned
	// an error: overrun, device error); CQRebuilds the endpoints rebuilt
	// with a new CQ after a CQ failed, UD and ib-qp=rc (cqerror.go).
	CQErrors, CQRebuilds atomic.Int64
	// RingBuffers is the number of receive buffers posted by the UD
	// endpoints open now: each sized for a datagram of the port's MTU,
	// as many as twice the receiver window's datagrams, within the
	// device's limits (ringSize). A UD datagram that finds none is
	// dropped by the device and recovered by NAK.
	RingBuffers atomic.Int64
	// AsyncEvents counts the asynchronous events read from the device
	// contexts the medium's queues live on (asyncev.go): a CQ_ERR or
	// SRQ_ERR fails its queue as a failed poll does, and the error events
	// are written to the error log.
	AsyncEvents atomic.Int64
	// HeldWhilePortDown counts the CM exchanges (SIDR, RC connects) the
	// medium put off because a port of its devices was down (fabricDown)
	HeldWhilePortDown atomic.Int64
	// DeviceRemovals counts the endpoints whose RDMA device was removed
	// under them (devremove.go): each let go of everything on it and
	// opened again on the device that has its address now.
	DeviceRemovals atomic.Int64
	// AddressHandles is the number of address handles the UD transports
	// hold now (their endpoints' peers, resolved and learnt);
	// PeersEvicted counts those closed because they were idle for
	// PeerIdleTimeout or the least recently used at MaxPeers, and
	// SourcesEvicted the source names forgotten likewise (evict.go).
	AddressHandles, PeersEvicted, SourcesEvicted atomic.Int64
	// RingEmpty counts the moments a UD endpoint's receive ring was found
	// empty (rqempty.go): datagrams arriving then were dropped and are
	// recovered by NAK. DeviceOutOfBuffer is the ports' own count of
	// those drops where the device keeps one (out_of_buffer), since the
	// medium first read it.
	RingEmpty, DeviceOutOfBuffer atomic.Int64
	devCounters                  deviceCounters

	async   asyncWatch
	handler atomic.Pointer[func(error)] // the driver's error handler (errors.go)
	// RC counts the ib-qp=rc connections' events (rc.go).
	RC RCStats
	// MediaClock counts hardware and software media timestamps (stamp.go).
	MediaClock MediaClockStats
}

// New returns the ib medium.
func New() *Media { return &Media{} }

// Statistics implements driver.StatisticsReporter: the medium's counts,
// which the driver publishes in the CnC as "aeron:ib: <name>" (type
// cnc.TypeMediaStatistic), so that `ibgo aeron stat`, Aeron's AeronStat
// and the metrics endpoint show them.
func (m *Media) Statistics() []driver.MediaStatistic {
	return []driver.MediaStatistic{
		{Name: "receive completions in error", Value: &m.RecvErrors},
		{Name: "send completions in error", Value: &m.SendErrors},
		{Name: "datagrams dropped, destination unresolved", Value: &m.Unresolved},
		{Name: "resolve errors", Value: &m.ResolveErrors},
		{Name: "re-resolutions", Value: &m.Reresolves},
		{Name: "log registration failures", Value: &m.RegisterErrors},
		{Name: "datagrams sent zero-copy", Value: &m.ZeroCopy},
		{Name: "datagrams sent inline", Value: &m.Inline},
		{Name: "datagrams sent copied", Value: &m.Copied},
		{Name: "QP restarts", Value: &m.QPRestarts},
		{Name: "CQ errors", Value: &m.CQErrors},
		{Name: "CQ rebuilds", Value: &m.CQRebuilds},
		{Name: "asynchronous events", Value: &m.AsyncEvents},
		{Name: "CM exchanges held while a port was down", Value: &m.HeldWhilePortDown},
		{Name: "endpoints whose device was removed", Value: &m.DeviceRemovals},
		{Name: "UD receive buffers posted", Value: &m.RingBuffers},
		{Name: "UD receive ring found empty", Value: &m.RingEmpty},
		{Name: "device receive-queue-empty drops (port out_of_buffer)", Value: &m.DeviceOutOfBuffer},
		{Name: "UD address handles held", Value: &m.AddressHandles},
		{Name: "UD address handles evicted", Value: &m.PeersEvicted},
		{Name: "UD source names evicted", Value: &m.SourcesEvicted},
		{Name: "rc connections accepted", Value: &m.RC.Accepted},
		{Name: "rc connections connected", Value: &m.RC.Connected},
		{Name: "rc connections disconnected", Value: &m.RC.Disconnected},
		{Name: "rc connections abandoned", Value: &m.RC.Abandoned},
		{Name: "rc connections stalled (no send completion)", Value: &m.RC.Stalled},
		{Name: "rc connections lost", Value: &m.RC.Lost},
		{Name: "rc connections rejected", Value: &m.RC.Rejected},
		{Name: "rc receive buffers grown for a larger mtu", Value: &m.RC.MTUGrowths},
		{Name: "rc shared receive queue found empty", Value: &m.RC.SRQEmpty},
		{Name: "rc work requests flushed", Value: &m.RC.Flushed},
		{Name: "rc frames dropped", Value: &m.RC.Dropped},
		{Name: "rc write: writes posted", Value: &m.RC.Writes},
		{Name: "rc write: bytes written", Value: &m.RC.WriteBytes},
		{Name: "rc write: bytes written again after a new grant", Value: &m.RC.Rewritten},
		{Name: "rc write: datagrams already written", Value: &m.RC.WriteSkipped},
		{Name: "rc write: datagrams joined to the write before", Value: &m.RC.Joined},
		{Name: "rc write: immediates received", Value: &m.RC.Immediates},
		{Name: "rc write: frames placed", Value: &m.RC.PlacedFrames},
		{Name: "rc write: bytes placed", Value: &m.RC.PlacedBytes},
		{Name: "rc write: placements refused", Value: &m.RC.BadPlacements},
		{Name: "rc write: grants issued", Value: &m.RC.GrantsIssued},
		{Name: "rc write: grants revoked", Value: &m.RC.GrantsRevoked},
		{Name: "rc write: grants denied", Value: &m.RC.GrantsDenied},
		{Name: "rc CQ errors", Value: &m.RC.CQErrors},
		{Name: "receive CQs with hardware timestamps", Value: &m.MediaClock.Hardware},
		{Name: "receive CQs with software timestamps", Value: &m.MediaClock.Software},
		{Name: "frames stamped in software on a hardware CQ", Value: &m.MediaClock.Fallbacks},
	}
}

// Name is "ib".
func (m *Media) Name() string { return string(uri.MediaIB) }

// ChannelKeys implements driver.ChannelKeyDeclarer: the keys aeron:ib
// reads beyond the driver's medium-independent ones.
func (m *Media) ChannelKeys() []string {
	return []string{uri.KeyIBQueuePair, uri.KeyIBMode, uri.KeyMediaRcvTimestampOffset}
}

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
	// postBatch is the most work requests posted with one doorbell (the
	// driver hands at most 16 datagrams to one Send).
	postBatch = 16
	// wantInline is the inline size asked of the QP: every control frame
	// (SETUP, status message, NAK, RTTM, heartbeat) and a datagram of one
	// 256-byte message (288 bytes) fit; rxe allows 400, ConnectX more.
	wantInline = 320
)

// receiveWindow is what a receive ring must hold in flight: the
// subscription's receiver window (rcv-wnd, else the driver's initial
// window), or so-rcvbuf when that is larger (it is what an aeron:udp
// socket would buffer), at least 128 KiB.
func receiveWindow(p driver.TransportParams) int {
	return max(p.ReceiverWindow, p.SocketRcvbuf, 128<<10)
}

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
	return m.OpenContext(context.Background(), ch, bind, connect, p, aff)
}

// OpenContext implements driver.BackgroundOpener: Open, whose waits on
// the fabric (the first SIDR resolution or RC connection, the multicast
// joins) end early with ctx.
func (m *Media) OpenContext(ctx context.Context, ch *uri.ChannelURI, bind, connect netip.AddrPort, p driver.TransportParams, aff driver.Affinity) (driver.Transport, error) {
	if err := m.CheckOpen(ch, bind, connect, p, aff); err != nil {
		return nil, err
	}
	if bind.Addr().IsMulticast() || connect.Addr().IsMulticast() {
		return m.openMulticast(ctx, ch, bind, connect, p, aff) // multicast.go
	}
	if qp, _ := ch.Get(uri.KeyIBQueuePair); qp == uri.IBQueuePairRC {
		return m.openRC(ctx, ch, bind, connect, p, aff)
	}
	t := &transport{m: m, peers: map[netip.AddrPort]*udPeer{}, keys: map[peerKey]*srcName{}, slots: newSlotRegs(sendSlots)}
	window := receiveWindow(p)
	// The QP's receive queue is sized before the device is known (the id
	// chooses it); maxRing is far below rxe's and mlx5's limits, and the
	// number posted is clamped to the device's below.
	ring := ringSize(window, 1024, 0, 0)
	opts := &cm.UDOptions{Cap: uverbs.QPCap{MaxSendWR: sendSlots, MaxRecvWR: uint32(ring), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: wantInline},
		Timestamps: p.MediaTimestamps}
	t.args = dialArgs{opts, p, aff, window, ring}
	if connect.IsValid() {
		t.kind, t.connect = kindDial, connect
		err := t.dial(ctx, opts, p, aff, window, ring)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, cm.ErrUnreachable) && !errors.Is(err, cm.ErrTimeout) {
			t.Close()
			return nil, err
		}
		// Nobody answers SIDR on connect yet, or its address does not
		// resolve yet (no ARP answer: the peer's host is still coming
		// up): a publication may exist before its subscription (as an
		// aeron:udp one sends into the void). Resolve in the background;
		// until then datagrams are dropped as a UDP socket would drop
		// them, and failures other than "nobody listens" are reported.
		if errors.Is(err, cm.ErrTimeout) {
			m.ResolveErrors.Add(1)
			m.report(err)
		}
		t.startDialLoop()
		return t, nil
	}
	t.kind, t.bind = kindListen, bind
	if err := t.listen(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// CheckOpen implements driver.BackgroundOpener: what Open would refuse
// before it touches the fabric, checked at once on the driver's
// conductor, which then runs a publication's Open (SIDR resolution, an RC
// connection, multicast joins: seconds when the peer does not answer) in
// the background.
func (m *Media) CheckOpen(ch *uri.ChannelURI, bind, connect netip.AddrPort, _ driver.TransportParams, _ driver.Affinity) error {
	if bind.Addr().IsMulticast() || connect.Addr().IsMulticast() {
		return checkMulticast(ch, bind, connect)
	}
	if qp, _ := ch.Get(uri.KeyIBQueuePair); qp == uri.IBQueuePairRC {
		return nil
	}
	if !connect.IsValid() && (!bind.Addr().IsValid() || bind.Addr().IsUnspecified()) {
		// a control-mode=manual publication without control=, or a
		// wildcard endpoint: no IP, so no device for the QP
		return fmt.Errorf("ib: bind %s: aeron:ib needs a specific local IP (it chooses the device the queue pair lives on): name one in endpoint= (a subscription) or control= (a multi-destination-cast publication)", bind)
	}
	return nil
}

// listen makes a subscription's endpoint: a UD QP listening for SIDR on
// t.bind, its receive ring posted, and the goroutine that answers SIDR.
// Open and a rebuild after a CQ failure (cqerror.go) both use it.
func (t *transport) listen() error {
	a := &t.args
	l, err := cm.ListenUD(context.Background(), t.bind.String(), a.opts)
	if err != nil {
		return fmt.Errorf("ib: listen on %s: %w", t.bind, err)
	}
	t.l, t.ep = l, l.Endpoint()
	if err := t.setup(a.p, a.aff, a.window, a.ring); err != nil {
		return err
	}
	t.done, t.exited = make(chan struct{}), make(chan struct{})
	go t.acceptLoop(l, t.done, t.exited)
	t.ready.Store(true)
	return nil
}

// startDialLoop resolves t.connect in the background (dialLoop), after
// the previous background goroutine, if any, has returned.
func (t *transport) startDialLoop() {
	t.stopLoop()
	t.done, t.exited = make(chan struct{}), make(chan struct{})
	a := t.args
	go t.dialLoop(t.done, t.exited, a.opts, a.p, a.aff, a.window, a.ring)
}

// stopLoop stops the accept or dial goroutine and waits for it.
func (t *transport) stopLoop() {
	if t.done == nil {
		return
	}
	close(t.done)
	<-t.exited
	t.done, t.exited = nil, nil
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
	t.addPeer(t.connect, peer, true)
	if peer.AHAttr.IsGlobal {
		t.addSource(peerKey{qpn: peer.QPN, gid: peer.AHAttr.GRH.DGID}, t.connect)
	}
	if err := t.setup(p, aff, window, ring); err != nil {
		return err
	}
	t.lastRecv, t.heard = time.Now().UnixNano(), false
	t.ready.Store(true)
	return nil
}

// dialLoop retries SIDR until a subscription answers or stopLoop/Close
// (done); it closes exited when it returns.
func (t *transport) dialLoop(done <-chan struct{}, exited chan<- struct{}, opts *cm.UDOptions, p driver.TransportParams, aff driver.Affinity, window, ring int) {
	defer close(exited)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	var b backoff
	for {
		select {
		case <-done:
			return
		case <-time.After(b.wait()):
		}
		if t.m.fabricDown() {
			t.m.HeldWhilePortDown.Add(1)
			continue // no CM exchange while a port is down (fabricDown)
		}
		err := t.dial(ctx, opts, p, aff, window, ring)
		if err == nil {
			return
		}
		t.release()
		if ctx.Err() != nil {
			return // Close came during the dial: nothing went wrong
		}
		if errors.Is(err, cm.ErrUnreachable) {
			b.reset() // the SIDR was answered: nobody listens there yet
		} else {
			b.failed()
			t.m.ResolveErrors.Add(1)
			t.m.report(err)
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

// The three kinds of UD transport, each set up (and rebuilt after a CQ
// failure, cqerror.go) its own way.
const (
	kindListen = iota + 1 // a unicast subscription: listens for SIDR on bind
	kindDial              // a unicast publication: resolved connect by SIDR
	kindGroup             // multicast: joined its groups (multicast.go)
)

// transport is one UD endpoint. It is used by the agent it was opened for
// only; the SIDR accept goroutine touches its listener alone, and the dial
// goroutine sets the endpoint up while ready is false.
type transport struct {
	m    *Media
	kind int
	// ringCounted is what this transport added to m.RingBuffers
	ringCounted int
	// posted is the receive work requests posted and not yet seen
	// complete (rqempty.go)
	posted  int
	ep      *cm.UDEndpoint
	l       *cm.UDListener
	done    chan struct{} // closed by stopLoop: stops the accept or dial goroutine
	exited  chan struct{} // closed when that goroutine has returned
	closed  bool
	ready   atomic.Bool // the endpoint below is set up (stored last)
	connect netip.AddrPort
	bind    netip.AddrPort // kindListen
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
	inline   int // the QP's max inline data

	stamp stamper // media receive timestamps (stamp.go)

	cqEvent atomic.Bool // the device reported t.cq in error (asyncev.go)

	// destinations resolved on demand (peers.go); epGen counts endpoints
	// released, so an answer for an earlier one is dropped
	res   peerResolver
	epGen uint32

	// registered memory (regmem.go): the driver's publication logs,
	// registered at the first Send after the endpoint is ready, and which
	// of them the work request in each send slot reads
	regions
	slots slotRegs

	// preallocated work requests: posting allocates nothing
	rwr  [1]uverbs.RecvWR
	rsge [1]uverbs.SGE
	swr  [postBatch]uverbs.SendWR
	ssge [postBatch]uverbs.SGE
	wcs  [pollBatch]uverbs.WC
	// receive completions polled while reclaiming send slots, delivered by
	// the next Recv
	pending []uverbs.WC
	pendAt  int // next of pending to deliver

	// errors.go: the QP is in the error state (cause says why) and Recv
	// restarts it
	broken bool
	cause  string
	// cqerror.go: the CQ failed and Recv rebuilds the endpoint (not before
	// rebuildAt after a failed attempt); failPoll makes the next poll fail
	// (the tests' FailNextPoll)
	cqFailed  bool
	rebuildAt int64
	rebuilds  backoff // the wait after a failed rebuild
	failPoll  atomic.Bool
	// devremove.go: cm.DeviceRemovals when Recv last looked
	removalsSeen uint64
	// resolve.go: when a unicast publication last heard its subscription
	args     dialArgs
	lastRecv int64
	heard    bool

	peers map[netip.AddrPort]*udPeer
	keys  map[peerKey]*srcName
	// eviction of idle peers and sources (evict.go): the sweep's epoch,
	// when the next sweep is due, and Recv's calls since the last check
	epoch      uint32
	sweepAt    int64
	sweepCalls uint32
	mc         *multicast // group memberships of a multicast transport (multicast.go)
	group      groupArgs  // kindGroup: what joinGroups joins

}

const sendWRID = 1 << 40

func (t *transport) setup(p driver.TransportParams, aff driver.Affinity, window, ring int) error {
	t.vctx, t.port, t.qp, t.cq = t.ep.Context(), t.ep.Port(), t.ep.QP(), t.ep.RecvCQ()
	t.m.usePort(t.vctx.Device().Name, int(t.port))
	if t.vctx == nil || t.qp == nil || t.cq == nil {
		return errors.New("ib: the UD endpoint has no QP")
	}
	t.cqEvent.Store(false)
	t.m.watchCQ(t.vctx, t.cq, &t.cqEvent) // asyncev.go
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
	t.m.RingBuffers.Add(int64(t.ring))
	t.ringCounted = t.ring
	t.slot = uverbs.GRHLen + t.payload
	t.sendBase = t.ring * t.slot
	t.sendFree, t.sendHead, t.sendTail = sendSlots, 0, 0
	t.stamp = newStamper(t.m, p.MediaTimestamps, t.cq)
	t.inline = int(t.qp.Cap().MaxInlineData)
	t.pending = make([]uverbs.WC, 0, t.ring)
	if t.mem, err = uverbs.AllocMemory((t.ring+sendSlots)*t.slot, uverbs.MemoryOptions{}); err != nil {
		return fmt.Errorf("ib: receive ring: %w", err)
	}
	if t.mr, err = t.ep.PD().RegMR(t.mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("ib: register receive ring: %w", err)
	}
	t.posted = 0
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
	t.posted++
	return nil
}

// acceptLoop answers every SIDR request with l's QP until done is closed
// (stopLoop); it closes exited when it returns.
func (t *transport) acceptLoop(l *cm.UDListener, done <-chan struct{}, exited chan<- struct{}) {
	defer close(exited)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-done; cancel() }()
	for {
		r, err := l.Accept(ctx)
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

// reap polls the CQ until it is empty or pending is full: send
// completions free send slots, receive completions are kept for Recv.
func (t *transport) reap() error {
	if t.pendAt > 0 { // compact: pending never outgrows the ring
		t.pending = t.pending[:copy(t.pending, t.pending[t.pendAt:])]
		t.pendAt = 0
	}
	if t.cqFailed {
		return errCQFailed // Recv rebuilds the endpoint first
	}
	// A full batch polls again, until the CQ is empty or pending is
	// full, before any buffer is reposted: so a ring the device emptied
	// shows as every posted buffer completed (rqempty.go).
	for {
		var n int
		var err error
		if t.failPoll.Load() && t.failPoll.CompareAndSwap(true, false) {
			err = errInjected
		} else if t.cqEvent.Load() {
			err = errCQEvent
		} else {
			n, err = t.cq.Poll(t.wcs[:])
		}
		if err != nil {
			t.cqFailure(err) // cqerror.go
			return fmt.Errorf("ib: poll: %w", err)
		}
		for i := range t.wcs[:n] {
			w := &t.wcs[i]
			if w.WRID >= sendWRID {
				// a send queue completes in order: this completion frees its
				// slot and every earlier unsignalled one
				k := int(w.WRID - sendWRID)
				freed := (k + 1 - t.sendTail + sendSlots) % sendSlots
				if freed == 0 {
					freed = sendSlots
				}
				for j := 0; j < freed; j++ {
					t.slots.free((t.sendTail + j) % sendSlots)
				}
				t.sendFree += freed
				t.sendTail = (k + 1) % sendSlots
				if w.Status != uverbs.WCSuccess {
					t.m.SendErrors.Add(1)
					t.sendFault(w)
				}
				continue
			}
			t.pending = append(t.pending, *w)
			if t.posted--; t.posted == 0 && w.Status == uverbs.WCSuccess {
				t.m.RingEmpty.Add(1) // the last posted buffer: the ring was empty (rqempty.go)
			}
		}
		if n < len(t.wcs) || cap(t.pending)-len(t.pending) < len(t.wcs) {
			return nil
		}
	}
}

// Send posts datagrams to dest as one post list per postBatch datagrams,
// one doorbell each. A datagram inside a registered log is posted from
// there (no copy) while its region's in-flight bound allows; one of at
// most t.inline bytes goes inline; any other is copied into its send
// slot's bounce buffer. One work request in signalEvery asks for a
// completion, and so does the last of a list when a registered region's
// bytes would otherwise wait for a later one: its in-flight count must
// come down without more traffic. A full send queue is a short send.
func (t *transport) Send(dest netip.AddrPort, datagrams [][]byte) (int, error) {
	if !t.ready.Load() || t.cqFailed {
		// not resolved yet, or the CQ failed and the next Recv rebuilds
		// the endpoint: lost, as on an unconnected UDP path
		return len(datagrams), nil
	}
	if !dest.IsValid() {
		dest = t.connect
	}
	peer := t.peers[dest]
	if peer == nil {
		t.collectPeers() // peers.go
		if peer = t.peers[dest]; peer == nil {
			// not resolved yet (a control address, a manual destination):
			// resolve it in the background; lost meanwhile, as on an
			// unconnected UDP path
			t.askPeer(dest)
			t.m.Unresolved.Add(int64(len(datagrams)))
			return len(datagrams), nil
		}
	}
	peer.used = t.epoch // evict.go
	if t.regsPending {
		t.registerPending(t.ep.PD(), t.m)
	}
	if t.sendFree < len(datagrams) {
		if err := t.reap(); err != nil {
			return 0, err
		}
	}
	sent := 0
	for sent < len(datagrams) {
		k := 0
		for k < postBatch && sent+k < len(datagrams) && t.sendFree > 0 {
			d := datagrams[sent+k]
			if len(d) > t.payload {
				if n, err := t.post(k, dest); err != nil {
					return sent + n, err
				}
				return sent + k, fmt.Errorf("ib: datagram of %d bytes to %s is above the port MTU %d", len(d), dest, t.payload)
			}
			t.prepare(k, d, peer.UDPeer)
			k++
		}
		if k == 0 {
			return sent, nil // short send: the send queue is full
		}
		n, err := t.post(k, dest)
		sent += n
		if err != nil {
			return sent, err
		}
		if sent < len(datagrams) && t.sendFree == 0 {
			if err := t.reap(); err != nil {
				return sent, err
			}
		}
	}
	return sent, nil
}

// prepare fills work request k of the next list with d, in send slot
// t.sendHead, and takes the slot.
func (t *transport) prepare(k int, d []byte, peer *cm.UDPeer) {
	slot := t.sendHead
	wr := &t.swr[k]
	*wr = uverbs.SendWR{WRID: sendWRID + uint64(slot), Opcode: uverbs.WRSend}
	t.m.fillSend(wr, t.ssge[k:k+1], d, slot, t.inline, &t.regions, &t.slots, t.mem.Bytes(), t.mr, t.sendBase+slot*t.slot)
	peer.Dest(wr)
	t.sendHead = (t.sendHead + 1) % sendSlots
	t.sendFree--
}

// post posts the k prepared work requests with one doorbell. Work
// requests the provider refused give their slots back.
func (t *transport) post(k int, dest netip.AddrPort) (int, error) {
	if k == 0 {
		return 0, nil
	}
	n, err := t.slots.post(t.qp, t.swr[:k])
	for j := k - 1; j >= n; j-- { // not posted: undo prepare
		t.sendHead = (t.sendHead - 1 + sendSlots) % sendSlots
		t.sendFree++
		t.slots.free(t.sendHead)
	}
	if err != nil {
		return n, fmt.Errorf("ib: post send to %s: %w", dest, err)
	}
	return n, nil
}

func (t *transport) Recv(maxN int, fn driver.RecvFunc) (int, error) {
	if t.cqFailed {
		return 0, t.rebuild() // cqerror.go
	}
	if !t.ready.Load() {
		return 0, nil
	}
	if t.deviceRemoved() { // devremove.go
		t.deviceGone()
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
				fn(t, buf[uverbs.GRHLen:w.ByteLen], from, t.stamp.stamp(w.Timestamp))
				n++
			}
		} else if w.Status != uverbs.WCSuccess {
			t.recvFault(&w) // errors.go
		}
		if t.broken {
			continue // the QP is in error: restart reposts the whole ring
		}
		if err := t.postRecv(i); err != nil {
			return n, err
		}
	}
	if t.broken {
		return n, t.restart()
	}
	t.checkSilence(n)   // resolve.go
	t.maybeSweep(n > 0) // evict.go
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
	if s, ok := t.keys[k]; ok {
		s.used = t.epoch // evict.go
		return s.addr, true
	}
	if t.mc != nil {
		return t.mc.source(t, k, &g), true
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
	t.addSource(k, a)
	t.addPeer(a, peer, false)
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
	if t.closed {
		return nil
	}
	t.closed = true
	t.stopLoop()
	t.stopPeers()
	// the driver's logs first: the PD they are registered with goes with
	// the endpoint
	err := t.unregisterAll()
	return errors.Join(err, t.release())
}

// release frees what setup and dial made (idempotent).
func (t *transport) release() error {
	t.ready.Store(false)
	t.m.RingBuffers.Add(-int64(t.ringCounted))
	t.ringCounted = 0
	t.epGen++
	t.m.unwatchCQ(t.vctx, t.cq)
	t.cq = nil
	var errs []error
	errs = append(errs, t.mc.leave(t))
	t.mc = nil
	for _, p := range t.peers {
		errs = append(errs, p.Close())
		t.m.AddressHandles.Add(-1)
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
