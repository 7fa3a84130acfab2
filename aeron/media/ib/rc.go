package ib

// ib-qp=rc: Aeron frames over reliable connections.
//
// A subscription's transport listens with RDMA CM on its endpoint (TCP port
// space, service id 0x0106<port>) and accepts one connection per
// publication transport that dials it. Every accepted QP receives through
// ONE shared receive queue whose buffers (channel MTU each) are reposted in
// place, and completes on ONE CQ shared by all of them; status messages,
// NAKs and RTT measurements go back over the connection the frames came on.
// A publication's transport dials its endpoint; while nobody listens it
// retries in the background and drops frames as an unconnected UDP path
// would, and it dials again when the connection is lost (the subscriber's
// driver restarted). The QP's own retransmission makes the fabric lossless
// to Aeron; Aeron's NAKs remain for frames this binding had to drop (a send
// queue that stayed full).
//
// Ownership: the transport's agent owns every QP, CQ and buffer; the
// goroutines that accept, dial and watch connection events hand new and
// lost connections to it through a channel (rcTransport.evc) and never
// touch a QP that has been handed over, so the data path takes no lock.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/uverbs"
)

// RCStats are the ib-qp=rc counters of a Media. Every field is safe for
// concurrent use.
type RCStats struct {
	// Accepted counts connections a subscription accepted, Connected
	// those a publication's dial established.
	Accepted, Connected atomic.Int64
	// Disconnected counts connections the peer ended in order (the CM's
	// DISCONNECTED: its subscription or publication closed, its driver
	// stopped or restarted; the kernel sends the same disconnect when a
	// process dies). As a vanished aeron:udp peer, it is not an error:
	// Aeron's liveness and EOS handle the image, a publication dials
	// again, and nothing goes to the error log.
	Disconnected atomic.Int64
	// Stalled counts connections a publication gave up because every
	// send slot stayed posted with no completion, not even an error, for
	// RCStallTimeout (also counted in Lost).
	Stalled atomic.Int64
	// Abandoned counts accepted connections whose handshake the dialling
	// peer gave up before it completed (REJECTED, CONNECT_ERROR or
	// UNREACHABLE before ESTABLISHED: its dial timed out after a lost
	// REP or RTU, and it dials again). Not an error either.
	Abandoned atomic.Int64
	// Lost counts connections that ended abnormally: the QP went to error
	// (a completion in error, a failed post), the CM reported an error
	// event, or its event channel failed. Each goes to the driver's error
	// log with its cause. The transport drops them; a publication dials
	// again.
	Lost atomic.Int64
	// Rejected counts connection requests a subscription refused: frames
	// larger than it can ever take, or the device out of queue pairs,
	// completion queues or memory for one more connection (written to the
	// error log with the device's error). No fixed bound on connections
	// is set below the device's.
	Rejected atomic.Int64
	// MTUGrowths counts the times a subscription grew its receive buffers
	// for a publication's larger mtu (its CONNECT names it): the request
	// is asked to come again, the shared queues are rebuilt with buffers
	// of that size, and connections already made dial again.
	MTUGrowths atomic.Int64
	// Flushed counts work requests completed with a flush status (a QP
	// that had gone to error): expected when a connection is lost, and not
	// counted in RecvErrors/SendErrors.
	Flushed atomic.Int64
	// Dropped counts frames a transport dropped: no connection yet (a
	// publication dialling), no connection to the destination, or a
	// connection lost while sending. A full send queue drops nothing: Send
	// returns short and the driver sends the rest on its next duty.
	Dropped atomic.Int64
	// SRQEmpty counts the moments a subscription's shared receive queue
	// was found empty (rqempty.go): messages arriving then were refused
	// with an RNR NAK and sent again by the publication's QP.
	SRQEmpty atomic.Int64
	// CQErrors counts CQs and SRQs that failed (a poll or a post returned
	// an error: overrun, device error). A publication drops its connection
	// and dials again with a new CQ; a subscription drops its connections
	// and rebuilds its shared CQ and SRQ (rebuildShared), and its
	// publications dial again. Both count in Media.CQRebuilds.
	CQErrors atomic.Int64

	// ib-mode=write (write.go). Publication side: Writes counts RDMA
	// WRITE WITH IMMEDIATE work requests posted and WriteBytes their
	// bytes; Rewritten the bytes written again from the log after a new
	// grant; WriteSkipped datagrams already written (a retransmit the
	// connection had delivered).
	// Joined counts datagrams that joined the write before them (one
	// immediate for several datagrams of a sender's duty).
	// LongPadding counts padding frames longer than 2 MiB short of the
	// term's end (an unblocked claim), written with their length word.
	Writes, WriteBytes, Rewritten, WriteSkipped, Joined, LongPadding atomic.Int64
	// Subscription side: Immediates counts write immediates taken,
	// PlacedFrames and PlacedBytes what they announced (frames the
	// driver did not copy); BadPlacements writes whose frame headers
	// failed the checks (the connection is dropped and the error
	// logged).
	Immediates, PlacedFrames, PlacedBytes, BadPlacements atomic.Int64
	// GrantsIssued counts images granted to a connection, GrantsRevoked
	// grants ended (the connection lost, the image closed),
	// GrantsDenied grants the device refused (the session sends instead).
	GrantsIssued, GrantsRevoked, GrantsDenied atomic.Int64
}

const (
	rcSendSlots = 128 // send queue depth and bounce slots per publication connection
	// rcSubSendSlots is the send queue depth and bounce slots of a
	// subscription's connection: it sends only status messages, NAKs,
	// RTT replies and ERR frames, and its own small CQ (a connection's
	// completions never share one, so the number of connections is
	// bounded by the device's QPs and CQs alone)
	rcSubSendSlots = 32
	rcPeerRecv     = 64 // receive buffers on a publication's own QP (control frames)
	// rcMagic starts the CONNECT private data (then the channel MTU,
	// little-endian u32) and a subscription's REJECT data (then the
	// largest frame it receives).
	rcMagic = "AIBR"
	// rcGrowMagic starts the REJECT data of a subscription that grows its
	// receive buffers to the requested mtu: dial again shortly (a
	// publication's dial loop does, without counting an error).
	rcGrowMagic = "AIBG"
	// rcMaxMTU is the largest mtu a subscription grows to: Aeron's
	// largest frame (uri's MaxUDPPayload).
	rcMaxMTU = uri.MaxUDPPayload
)

// RCAckTimeout is the ACK timeout a publication's RC queue pair waits
// before it retransmits (4.096 µs × 2^RCAckTimeout; 14 is 67 ms, the
// value perftest and most RDMA applications use). 0 keeps the kernel's,
// which rdma_cm derives from the route's packet lifetime (on RoCE about
// 0.5 s): with it, a lossy link stalled the stream for longer than
// Aeron's image liveness timeout (TestIBRCNetemTwoNodes on 6.12). Set it
// before the driver starts.
var RCAckTimeout uint8 = 14

// RCStallTimeout is how long a publication's RC connection may keep every
// send slot posted without a single completion before the publication
// takes it for lost and dials again. A queue pair whose peer vanished
// completes its sends in error once its retries run out (RCAckTimeout ×
// 8, about half a second); soft-RoCE's, across a link that went down
// for a second, was seen to stop retransmitting and never complete them
// (docs/reliability.md). Receiver-not-ready retries are unlimited, so a
// subscription that takes nothing for this long loses its connection
// too; Aeron's flow control keeps a live one from that. 0 disables it.
var RCStallTimeout = 3 * time.Second

// stalled is called when a send found c's slots all posted and a poll
// freed none: after RCStallTimeout of that c fails (true). Agent.
func (t *rcTransport) stalled(c *rcConn) bool {
	if RCStallTimeout <= 0 || !t.connect.IsValid() {
		return false // a subscription's connections: its publisher's watch
	}
	now := time.Now().UnixNano()
	if c.stallAt == 0 {
		c.stallAt = now
		return false
	}
	if now-c.stallAt < int64(RCStallTimeout) {
		return false
	}
	t.m.RC.Stalled.Add(1)
	t.fail(c, fmt.Sprintf("no send completion for %v with all %d send slots posted: the queue pair stopped without an error", RCStallTimeout, c.slotsN))
	return true
}

// rcRingSize is the number of SRQ buffers of a subscription: ringSize's
// rule on MTU-sized buffers, clamped to the device's SRQ depth and CQ
// size (the shared CQ holds the receive completions only).
func rcRingSize(window, mtu int, maxSRQWR, maxCQE uint32) int {
	n := ringSize(window, mtu, maxSRQWR, 0)
	if maxCQE > 0 {
		n = min(n, int(maxCQE))
	}
	return n
}

// rcMTU is the largest frame an RC transport of ch carries: the channel's
// mtu when it names one, else params.MTU (for a subscription, the driver
// default; the subscription's channel should name the publication's mtu).
func rcMTU(ch *uri.ChannelURI, p driver.TransportParams) int {
	if v, ok := ch.Size(uri.KeyMTU); ok && int(v) > p.MTU {
		return int(v)
	}
	return p.MTU
}

// rcGrowData is the REJECT data of a subscription growing to mtu.
func rcGrowData(mtu int) []byte {
	b := rcConnectData(mtu, 0)
	copy(b, rcGrowMagic)
	return b
}

// grow makes the subscription's receive buffers mtu bytes (a CONNECT asked
// for it, accept): the ring is sized again for the window, and the shared
// queues are rebuilt with it, which drops the connections made on the old
// ones (their publications dial again). Agent.
func (t *rcTransport) grow(mtu int) error {
	t.sharedMu.Lock()
	t.mtu = mtu
	t.ring = rcRingSize(t.window, mtu, t.maxSRQWR, t.maxCQE)
	if n := t.ring + pollBatch; cap(t.pend) < n {
		t.pend = make([]uverbs.WC, 0, n)
	}
	t.sharedMu.Unlock()
	t.m.RC.MTUGrowths.Add(1)
	t.rebuildAt = 0
	if err := t.rebuildSharedFor(false); err != nil {
		t.sharedFailed = true // Recv tries again, as after a failure
		return err
	}
	return nil
}

// rcConnectData is a CONNECT's private data (and, flags 0, a REJECT's):
// the magic, the mtu, then flags (rcConnWrite), little-endian u32s.
func rcConnectData(mtu int, flags uint32) []byte {
	b := make([]byte, 12)
	copy(b, rcMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(mtu))
	binary.LittleEndian.PutUint32(b[8:], flags)
	return b
}

// rcParseData reads rcConnectData's number (0, false without the magic).
func rcParseData(b []byte) (int, bool) {
	if len(b) < 8 || string(b[:4]) != rcMagic {
		return 0, false
	}
	return int(binary.LittleEndian.Uint32(b[4:])), true
}

// rcParseFlags reads rcConnectData's flags (0 from a peer that sends none).
func rcParseFlags(b []byte) uint32 {
	if len(b) < 12 || string(b[:4]) != rcMagic {
		return 0
	}
	return binary.LittleEndian.Uint32(b[8:])
}

// rcConn is one connection and its send ring (and, on a publication, its
// receive buffers). Owned by the agent once handed over.
type rcConn struct {
	key    uint32 // unique per transport: the send WRIDs carry it
	gen    uint32 // subscription side: the shared queues' generation its QP uses
	id     *cm.ID // subscription side: the accepted child id
	conn   *cm.Conn
	qp     *uverbs.QP
	cq     *uverbs.CQ // the QP's own CQ: publication side its sends and receives, subscription side its sends
	scq    bool       // subscription side: cq is c's to destroy after the QP (release)
	slotsN int        // send queue depth and bounce slots
	addr   netip.AddrPort
	mem    *uverbs.Memory
	mr     *uverbs.MR

	recvSlots         int // receive buffers at the start of mem (publication side)
	sendBase          int
	head, tail, nfree int
	inline            int                      // the QP's max inline data
	slots             slotRegs                 // which registered log each send slot reads (regmem.go)
	closing           atomic.Bool              // the first to set it reports the loss
	parkedAt          int64                    // when drop parked it (ns; rcTransport.parked)
	stallAt           int64                    // since when every send slot is posted with no completion (ns; 0: not)
	dropped           bool                     // drop has run (agent)
	removalSeen       bool                     // drop re-registered the logs after its device went (agent)
	peerClosed        atomic.Bool              // ended by the peer's disconnect (watcher), not lost
	swr               [postBatch]uverbs.SendWR // preallocated: posting allocates nothing
	ssge              [postBatch]uverbs.SGE
	rwr               [1]uverbs.RecvWR
	rsge              [1]uverbs.SGE
	shared            bool // mem and mr are the transport's (publication side)
	close             bool

	ts stamper // publication side: media timestamps of cq's frames

	// ib-mode=write (write.go): write says the publication asked for it;
	// wslots are the images granted on the connection (subscription
	// side), grants those it holds, asked and askFor the sessions it
	// asked for or is to ask for again (publication side)
	write  bool
	wslots []*wImage
	grants map[uint64]*wGrant
	asked  map[uint64]int64 // when it last asked (ns)
	askFor []uint64

	// publication side: the device reported cq in error (asyncev.go);
	// unwatch ends that watch before cq goes
	cqEvent atomic.Bool
	unwatch func()
}

// rcEvent hands a connection to the agent (up) or tells it one is lost.
type rcEvent struct {
	c  *rcConn
	up bool
}

// rcTransport is an ib-qp=rc endpoint. It is used by the agent it was
// opened for only (Send, Recv, Close); its background goroutines only hand
// connections over.
type rcTransport struct {
	m       *Media
	connect netip.AddrPort // publication side
	bind    netip.AddrPort
	mtu     int // largest frame sent or received (subscription: grows, under sharedMu)
	window  int
	mediaTS bool
	local   string

	evc    chan rcEvent
	ctx    context.Context // cancelled by Close: ends every background wait
	cancel context.CancelFunc
	done   <-chan struct{} // ctx.Done()
	wg     sync.WaitGroup
	live   atomic.Int32  // subscription: connections accepted and not yet dropped
	redial chan struct{} // publication side: the connection was lost
	lostAt atomic.Int64  // publication side: when drop last took a lost connection (ns; LossGrace)
	keys   atomic.Uint32

	// publication side: an id resolved to the subscriber's address keeps
	// the device (and its PD, where pmem is registered) open across
	// connections
	anchorCh *cm.Channel
	anchor   *cm.ID
	ppd      *uverbs.PD // the anchor's; the agent reads it once a connection was handed over
	pmem     *uverbs.Memory
	pmr      *uverbs.MR

	// the driver's publication logs (regmem.go), registered with the
	// transport's PD at the first Send with a connection
	regions

	// subscription side. sharedMu guards cq, srq and gen against the
	// accept goroutine, which creates QPs on them, while the agent rebuilds
	// them (rebuildShared); the agent reads them without it.
	ch       *cm.Channel
	lid      *cm.ID
	pd       *uverbs.PD
	sharedMu sync.Mutex
	gen      uint32
	cq       *uverbs.CQ
	srq      *uverbs.SRQ
	mem      *uverbs.Memory
	mr       *uverbs.MR
	ring     int
	posted   int // SRQ buffers posted and not yet seen complete (rqempty.go)
	// rebuildShared: the shared queues failed (sharedFailed; Recv rebuilds
	// them, not before rebuildAt after a failed attempt); retired are
	// failed ones whose destruction waits for a QP still on them
	sharedFailed bool
	rebuildAt    int64
	retired      []rcShared
	// subscription: wantMTU is the largest mtu a refused CONNECT asked
	// for (accept goroutine), which the agent grows to (grow); the
	// device's limits the ring is sized within
	wantMTU          atomic.Int64
	maxSRQWR, maxCQE uint32
	failPoll         atomic.Bool // the tests' FailNextPoll
	// devremove.go: the listener's accept goroutine (listenCancel ends
	// it, acceptDone is closed when it has returned); relisten says the
	// device was removed and Recv listens again (not before rebuildAt);
	// removalsSeen is cm.DeviceRemovals when Recv last looked
	listenCancel context.CancelFunc
	acceptDone   chan struct{}
	relisten     bool
	relistens    backoff
	removalsSeen uint64
	// the device reported the shared CQ or SRQ in error (asyncev.go);
	// vctx is the context they live on
	cqEvent, srqEvent atomic.Bool
	vctx              *uverbs.Context

	// ib-mode=write (write.go): write is a publication's channel asking
	// for it; wimgs the images a subscription granted (or grants again on
	// a new connection), by session and stream; ctlMsg and ctlBatch carry
	// a grant to Send
	write    bool
	wimgs    map[uint64]*wImage
	ctlMsg   [rcGrantLen]byte
	ctlBatch [1][]byte
	// grantsDue are grants (or denials) a full send queue held back:
	// Recv sends them (write.go)
	grantsDue []grantDue

	// agent state
	cur    *rcConn // publication side
	byQPN  map[uint32]*rcConn
	byKey  map[uint32]*rcConn
	byAddr map[netip.AddrPort]*rcConn
	wcs    [pollBatch]uverbs.WC
	pend   []uverbs.WC
	pendAt int
	polled int // completions the last poll took
	// idleCalls counts Recv calls that found nothing (subscription): one
	// in 1024 reads the clock for the device counters (rqempty.go)
	idleCalls uint32
	rwr       [1]uverbs.RecvWR
	rsge      [1]uverbs.SGE
	closed    bool
	ts        stamper // subscription side: media timestamps of the shared CQ's frames
	// parked are lost connections, their QPs in the error state, not yet
	// disconnected: a disconnect sends a DREQ, a CM MAD, which must not
	// go while a port is down (fabricDown) nor in the LossGrace after the
	// loss; they go once both are over, or at Close (when the kernel's
	// destroy of an established id sends the DREQ anyway)
	parked []*rcConn
}

// LossGrace is how long a lost RC connection waits before it is
// disconnected and before its publication dials again. A link going down
// fails sends (and so loses connections) before the port reads down, and
// a CM exchange started while a soft-RoCE port is down leaves the port's
// QP1 unable to send until reboot (docs/aeron.md, "Link outages"); after
// LossGrace the port's state is settled and fabricDown holds the exchange.
var LossGrace = 250 * time.Millisecond

// releaseParked disconnects and frees the parked connections whose
// LossGrace is over, when no port is down (force: all, at Close). Agent.
func (t *rcTransport) releaseParked(force bool) {
	if len(t.parked) == 0 {
		return
	}
	now := time.Now().UnixNano()
	if !force {
		// the oldest first: nothing is due before its grace is over
		if now-t.parked[0].parkedAt < int64(LossGrace) || t.m.fabricDown() {
			return
		}
	}
	keep := t.parked[:0]
	for _, c := range t.parked {
		if !force && now-c.parkedAt < int64(LossGrace) {
			keep = append(keep, c)
			continue
		}
		c.release()
	}
	clear(t.parked[len(keep):])
	t.parked = keep
	if len(t.retired) > 0 {
		t.freeRetired() // shared queues the released QPs held (cqerror.go)
	}
}

const rcSendWRID = 1 << 62

// sharedCQForTest, when set, is the size of the next shared CQ a
// subscription makes (once): the tests overrun it (export_test.go).
var sharedCQForTest atomic.Int32

// openRC opens an ib-qp=rc transport (Open dispatches here).
func (m *Media) openRC(ctx context.Context, ch *uri.ChannelURI, bind, connect netip.AddrPort, p driver.TransportParams, aff driver.Affinity) (driver.Transport, error) {
	if bind.Addr().IsMulticast() || connect.Addr().IsMulticast() {
		// aeron/uri refuses this already; a transport must not rely on it
		return nil, errMulticastRC
	}
	t := &rcTransport{m: m, bind: bind, connect: connect, mtu: rcMTU(ch, p), window: receiveWindow(p),
		mediaTS: p.MediaTimestamps, evc: make(chan rcEvent, 64),
		byQPN: map[uint32]*rcConn{}, byKey: map[uint32]*rcConn{}, byAddr: map[netip.AddrPort]*rcConn{},
		write: connect.IsValid() && ch.IBMode() == uri.IBModeWrite, wimgs: map[uint64]*wImage{}}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.done = t.ctx.Done()
	if connect.IsValid() {
		if err := t.openPublication(ctx); err != nil {
			t.Close()
			return nil, err
		}
		return t, nil
	}
	if err := t.openSubscription(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// ---- subscription side

func (t *rcTransport) openSubscription() error {
	t.local = t.bind.String()
	var err error
	if t.ch, err = cm.NewChannel(); err != nil {
		return fmt.Errorf("ib: rc listen on %s: %w", t.bind, err)
	}
	if t.lid, err = t.ch.CreateID(cm.PortSpaceTCP, uverbs.QPTypeRC); err != nil {
		return fmt.Errorf("ib: rc listen on %s: %w", t.bind, err)
	}
	if err = t.lid.Bind(cm.IPAddr(t.bind)); err != nil {
		return fmt.Errorf("ib: rc listen on %s: %w", t.bind, err)
	}
	// A specific IP binds the id to its device: the SRQ, CQ and buffers
	// are made there before any peer connects.
	vctx, pd, err := t.lid.Verbs()
	if err != nil {
		return fmt.Errorf("ib: rc listen on %s: %w", t.bind, err)
	}
	if info, err := t.lid.Query(); err == nil {
		t.m.usePort(vctx.Device().Name, int(info.Port)) // fabricDown watches it
	}
	da, err := t.lid.DeviceAttr()
	if err != nil {
		return fmt.Errorf("ib: rc listen on %s: %w", t.bind, err)
	}
	t.pd = pd
	t.maxSRQWR, t.maxCQE = da.MaxSRQWR, da.MaxCQE
	t.ring = rcRingSize(t.window, t.mtu, da.MaxSRQWR, da.MaxCQE)
	t.pend = make([]uverbs.WC, 0, t.ring+pollBatch)
	if err := t.makeShared(vctx); err != nil {
		return err
	}
	if err = t.lid.Listen(0); err != nil {
		return fmt.Errorf("ib: rc listen on %s: %w", t.bind, err)
	}
	var lctx context.Context
	lctx, t.listenCancel = context.WithCancel(t.ctx)
	t.acceptDone = make(chan struct{})
	t.wg.Add(1)
	go t.acceptLoop(lctx, t.lid, t.acceptDone)
	return nil
}

// makeShared makes the shared CQ, the SRQ and its posted ring of
// receive buffers (at open, and again by rebuildShared). The caller holds
// sharedMu or the accept goroutine is not running yet.
func (t *rcTransport) makeShared(vctx *uverbs.Context) error {
	var err error
	cqe := t.ring
	if n := sharedCQForTest.Swap(0); n > 0 {
		cqe = int(n) // the overrun test's undersized CQ (export_test.go)
	}
	if t.cq, err = stampedCQ(vctx, t.pd, uverbs.CQInitAttr{CQE: cqe}, t.mediaTS); err != nil {
		return fmt.Errorf("ib: rc shared CQ: %w", err)
	}
	t.ts = newStamper(t.m, t.mediaTS, t.cq)
	t.vctx = vctx
	t.cqEvent.Store(false)
	t.m.watchCQ(vctx, t.cq, &t.cqEvent)
	if t.srq, err = t.pd.CreateSRQ(uverbs.SRQInitAttr{MaxWR: uint32(t.ring), MaxSGE: 1}); err != nil {
		return fmt.Errorf("ib: rc shared receive queue of %d: %w", t.ring, err)
	}
	t.srqEvent.Store(false)
	t.m.watchSRQ(vctx, t.srq, &t.srqEvent)
	if t.mem, err = uverbs.AllocMemory(t.ring*t.mtu, uverbs.MemoryOptions{}); err != nil {
		return fmt.Errorf("ib: rc receive ring: %w", err)
	}
	if t.mr, err = t.pd.RegMR(t.mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("ib: register rc receive ring: %w", err)
	}
	t.posted = 0
	for i := 0; i < t.ring; i++ {
		if err := t.postSRQ(i); err != nil {
			return err
		}
	}
	return nil
}

func (t *rcTransport) postSRQ(i int) error {
	t.rsge[0] = t.mr.SGE(i*t.mtu, t.mtu)
	t.rwr[0] = uverbs.RecvWR{WRID: uint64(i), SGL: t.rsge[:]}
	if _, err := t.srq.PostRecv(t.rwr[:]); err != nil {
		return fmt.Errorf("ib: post to the rc shared receive queue: %w", err)
	}
	t.posted++
	return nil
}

// acceptLoop accepts connection requests on lid until Close (or
// stopListener ends ctx); it closes done when it returns.
func (t *rcTransport) acceptLoop(ctx context.Context, lid *cm.ID, done chan<- struct{}) {
	defer t.wg.Done()
	defer close(done)
	for {
		ev, err := lid.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, cm.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if ev.Type != cm.EventConnectRequest || ev.Child == nil {
			continue
		}
		t.accept(ctx, ev)
	}
}

func (t *rcTransport) accept(ctx context.Context, ev *cm.Event) {
	child := ev.Child
	reject := func(data []byte) {
		t.m.RC.Rejected.Add(1)
		_ = child.Reject(data, cm.RejectConsumerDefined)
		_ = child.Close()
	}
	if mtu, ok := rcParseData(ev.Conn.PrivateData); ok {
		t.sharedMu.Lock()
		cur := t.mtu
		t.sharedMu.Unlock()
		switch {
		case mtu > rcMaxMTU:
			reject(rcConnectData(cur, 0)) // never: no Aeron frame is larger
			return
		case mtu > cur:
			// the publication's frames would not fit the SRQ's buffers:
			// grow them (the agent rebuilds the shared queues, grow) and
			// have it dial again, as Aeron receivers take any mtu a
			// SETUP names
			for w := t.wantMTU.Load(); int64(mtu) > w && !t.wantMTU.CompareAndSwap(w, int64(mtu)); w = t.wantMTU.Load() {
			}
			_ = child.Reject(rcGrowData(mtu), cm.RejectConsumerDefined)
			_ = child.Close()
			return
		}
	}
	info, _ := child.Query()
	c := &rcConn{key: t.keys.Add(1), id: child, addr: info.Dst.IP, slotsN: rcSubSendSlots,
		write: rcParseFlags(ev.Conn.PrivateData)&rcConnWrite != 0}
	refuse := func(what string, err error) {
		t.m.report(fmt.Errorf("ib: rc subscription %s refused a connection from %s: %s: %w", t.local, c.addr, what, err))
		reject(nil)
	}
	// The shared queues cannot be rebuilt under a QP being created on
	// them; a QP made just before a rebuild is dropped by apply (gen).
	t.sharedMu.Lock()
	cq, srq, mtu, vctx := t.cq, t.srq, t.mtu, t.vctx
	c.gen = t.gen
	var err error
	what := "its queue pair"
	if cq == nil || srq == nil {
		err = errCQFailed // a rebuild failed: none to connect to until the next
	} else if c.cq, err = vctx.CreateCQ(uverbs.CQInitAttr{CQE: rcSubSendSlots}); err != nil {
		what = "its send CQ"
	} else {
		c.scq = true
		_, err = child.CreateQP(t.pd, cm.QPInitAttr{SendCQ: c.cq, RecvCQ: cq, SRQ: srq,
			Cap: uverbs.QPCap{MaxSendWR: rcSubSendSlots, MaxSendSGE: 1, MaxInlineData: wantInline}})
	}
	t.sharedMu.Unlock()
	if err != nil {
		if c.cq != nil {
			_ = c.cq.Close()
		}
		refuse(what, err)
		return
	}
	c.qp = child.QP()
	c.inline = int(c.qp.Cap().MaxInlineData)
	if err := c.allocSend(t.pd, 0, mtu); err != nil {
		c.id = nil // release frees the buffers and the CQ; reject closes the id
		_ = child.DestroyQP()
		c.release()
		refuse("its send buffers", err)
		return
	}
	t.m.watchCQ(vctx, c.cq, &c.cqEvent)
	m, scq := t.m, c.cq
	c.unwatch = func() { m.unwatchCQ(vctx, scq) }
	t.live.Add(1)
	// Handed over before the REP leaves: the peer's first frame finds the
	// connection known.
	if !t.handOver(rcEvent{c: c, up: true}) {
		return
	}
	// Status messages and NAKs go back on this QP: it retransmits as
	// quickly as the publication's (RCAckTimeout), not after rdma_cm's
	// default. Accept moves it to RTS with this value.
	if RCAckTimeout != 0 {
		if err := child.SetAckTimeout(RCAckTimeout); err != nil {
			t.lose(c, "set the ACK timeout: "+err.Error())
			return
		}
	}
	var acc *cm.ConnParam
	if c.write {
		// the answer says this subscription takes ib-mode=write (write.go);
		// one that predates it accepts with no data, and the publication
		// sends instead
		acc = &cm.ConnParam{ResponderResources: ev.Conn.ResponderResources, InitiatorDepth: ev.Conn.InitiatorDepth,
			RetryCount: 7, RNRRetryCount: 7, PrivateData: rcConnectData(mtu, rcConnWrite)}
	}
	if err := child.Accept(acc); err != nil {
		t.lose(c, "accept: "+err.Error())
		return
	}
	t.m.RC.Accepted.Add(1)
	t.wg.Add(1)
	go t.watch(ctx, c, child, false)
}

// handOver passes ev to the agent; false when Close came first (Close then
// releases what is still queued).
func (t *rcTransport) handOver(ev rcEvent) bool {
	select {
	case t.evc <- ev:
		return true
	case <-t.done:
		if ev.up {
			ev.c.release()
		}
		return false
	}
}

// lose reports c lost once, whoever noticed first (the watcher, the agent).
func (t *rcTransport) lose(c *rcConn, cause string) {
	if c.closing.CompareAndSwap(false, true) {
		t.m.RC.Lost.Add(1)
		t.reportLoss(c, cause)
		t.handOver(rcEvent{c: c})
	}
}

// disconnected ends c as the peer asked: counted in n, not reported (see
// RCStats.Disconnected and Abandoned), unless the agent already found it
// lost.
func (t *rcTransport) disconnected(c *rcConn, n *atomic.Int64) {
	if c.closing.CompareAndSwap(false, true) {
		n.Add(1)
		c.peerClosed.Store(true) // drop releases it at once: no LossGrace
		t.handOver(rcEvent{c: c})
	}
}

// reportLoss records a lost connection in the driver's error log
// (ErrorReporter): the text names both ends and the cause, no counts.
func (t *rcTransport) reportLoss(c *rcConn, cause string) {
	local := t.local
	if c.conn != nil {
		local = c.conn.LocalAddr().String() // a publication's own end (t.local is its first)
	}
	t.m.report(fmt.Errorf("ib: rc connection %s <-> %s lost: %s", local, c.addr, cause))
}

// watch waits for the connection's end: DISCONNECTED (the peer closed or
// restarted), or an error event.
//
// established is false for an accepted connection until the CM reports it
// ESTABLISHED: an end before that is a handshake the dialling peer gave up
// (its dial timed out, e.g. on a lossy link, and it dials again), counted
// in RCStats.Abandoned and not an error.
func (t *rcTransport) watch(ctx context.Context, c *rcConn, id *cm.ID, established bool) {
	defer t.wg.Done()
	for {
		ev, err := id.GetEvent(ctx)
		if err != nil {
			if ctx.Err() == nil && !c.closing.Load() {
				t.lose(c, "CM event channel: "+err.Error())
			}
			return
		}
		switch ev.Type {
		case cm.EventEstablished:
			established = true
			continue
		case cm.EventDisconnected:
			t.disconnected(c, &t.m.RC.Disconnected)
			return
		case cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
			if !established {
				t.disconnected(c, &t.m.RC.Abandoned)
				return
			}
			t.lose(c, "CM event "+ev.Type.String())
			return
		case cm.EventDeviceRemoval, cm.EventAddrChange:
			t.lose(c, "CM event "+ev.Type.String())
			return
		}
	}
}

// ---- publication side

func (t *rcTransport) openPublication(ctx context.Context) error {
	t.local = "0.0.0.0:0"
	t.redial = make(chan struct{}, 1)
	t.pend = make([]uverbs.WC, 0, rcPeerRecv+pollBatch)
	// the first attempt also ends with the open's ctx; the transport's
	// own (t.ctx) lives until Close
	dctx, stop := context.WithCancel(t.ctx)
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-dctx.Done():
		}
	}()
	c, err := t.dial(dctx)
	if err == nil {
		t.local = c.conn.LocalAddr().String()
		t.evc <- rcEvent{c: c, up: true}
		t.wg.Add(1)
		go t.watch(t.ctx, c, c.conn.ID(), true)
	} else if !retriable(err) {
		return err
	} else {
		t.redial <- struct{}{}
	}
	t.wg.Add(1)
	go t.dialLoop()
	return nil
}

// retriable: nobody listens on the endpoint yet (or any more), or it did
// not answer in time; the subscription may appear later. A subscription
// that refuses the channel's mtu is not: Open returns that error (the
// client sees INVALID_CHANNEL with both sizes); once open, a publication's
// later dials keep trying and count it in ResolveErrors.
func retriable(err error) bool {
	return errors.Is(err, cm.ErrRefused) || errors.Is(err, cm.ErrUnreachable) || errors.Is(err, cm.ErrTimeout) ||
		errors.Is(err, cm.ErrRouteFailed) || errors.Is(err, cm.ErrDisconnected)
}

// dial connects to t.connect with a receive ring posted before the request
// leaves.
func (t *rcTransport) dial(ctx context.Context) (*rcConn, error) {
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	if t.anchor != nil && t.anchor.DeviceRemoved() {
		t.dropAnchor() // devremove.go: dial on the device that has the route now
	}
	if err := t.anchorDevice(ctx); err != nil {
		return nil, err
	}
	c := &rcConn{key: t.keys.Add(1), addr: t.connect, mem: t.pmem, mr: t.pmr, shared: true,
		recvSlots: rcPeerRecv, sendBase: rcPeerRecv * t.mtu, slotsN: rcSendSlots, nfree: rcSendSlots, slots: newSlotRegs(rcSendSlots)}
	var flags uint32
	if t.write {
		flags = rcConnWrite
		c.write, c.grants, c.asked = true, map[uint64]*wGrant{}, map[uint64]int64{}
	}
	vctx, pd, _ := t.anchor.Verbs()
	d := cm.Dialer{
		PD:         pd,
		Cap:        uverbs.QPCap{MaxSendWR: rcSendSlots, MaxRecvWR: rcPeerRecv, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: wantInline},
		Param:      &cm.ConnParam{PrivateData: rcConnectData(t.mtu, flags), RetryCount: 7, RNRRetryCount: 7},
		AckTimeout: RCAckTimeout,
		BeforeConnect: func(cn *cm.Conn) error {
			c.qp, c.cq = cn.QP(), cn.RecvCQ()
			c.inline = int(c.qp.Cap().MaxInlineData)
			for i := 0; i < rcPeerRecv; i++ {
				if err := c.postRecv(i, t.mtu); err != nil {
					return err
				}
			}
			return nil
		},
	}
	d.Timestamps = t.mediaTS // hardware receive times where the device has a clock (stamp.go)
	cn, err := d.Dial(ctx, cm.IPAddr(t.connect))
	if err != nil {
		var ce *cm.Error
		if errors.As(err, &ce) && ce.Reason == cm.RejectConsumerDefined {
			if n, ok := rcParseData(ce.PrivateData); ok {
				return nil, fmt.Errorf("ib: rc connect to %s: the subscription receives frames of at most %d bytes, this channel's mtu is %d (give the subscription's channel the same mtu)", t.connect, n, t.mtu)
			}
		}
		return nil, fmt.Errorf("ib: rc connect to %s: %w", t.connect, err)
	}
	c.conn = cn
	if c.write && rcParseFlags(cn.Remote().PrivateData)&rcConnWrite == 0 {
		// a subscription that does not take writes: this connection sends
		c.write, c.grants, c.asked = false, nil, nil
		t.m.report(fmt.Errorf("ib: rc connect to %s: the subscription does not take ib-mode=write (its driver predates it); frames go as ib-mode=send", t.connect))
	}
	c.ts = newStamper(t.m, t.mediaTS, c.cq) // before the agent polls c.cq
	t.m.watchCQ(vctx, c.cq, &c.cqEvent)
	m, cq := t.m, c.cq
	c.unwatch = func() { m.unwatchCQ(vctx, cq) }
	t.m.RC.Connected.Add(1)
	return c, nil
}

// dialLoop dials whenever the agent reports the connection lost (or none
// was made yet), every ResolveRetry until it connects, until Close.
func (t *rcTransport) dialLoop() {
	defer t.wg.Done()
	ctx := t.ctx
	for {
		select {
		case <-t.done:
			return
		case <-t.redial:
		}
		var b backoff
		if wait := time.Duration(t.lostAt.Load() + int64(LossGrace) - time.Now().UnixNano()); wait > 0 {
			b.d = wait // a connection was lost: no dial before LossGrace is over
		}
		for {
			select {
			case <-t.done:
				return
			case <-time.After(b.wait()):
			}
			if t.m.fabricDown() {
				t.m.HeldWhilePortDown.Add(1)
				continue // no CM exchange while a port is down (fabricDown)
			}
			c, err := t.dial(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				var ce *cm.Error
				refused := errors.As(err, &ce) && errors.Is(err, cm.ErrRefused)
				if refused && (ce.Reason != cm.RejectConsumerDefined || rcIsGrow(ce.PrivateData)) {
					// refused by the CM (nobody listens yet, the normal
					// wait) or asked to come again once the
					// subscription's buffers have grown
					b.reset()
					continue
				}
				// anything else (no route, no answer, a subscription
				// refusing the connection) is an error, reported, and
				// tried again after a growing wait
				t.m.ResolveErrors.Add(1)
				t.m.report(err)
				b.failed()
				continue
			}
			if !t.handOver(rcEvent{c: c, up: true}) {
				return
			}
			t.wg.Add(1)
			go t.watch(ctx, c, c.conn.ID(), true)
			break
		}
	}
}

// rcIsGrow: b is a subscription's REJECT data asking to dial again once
// it has grown its buffers (rcGrowData).
func rcIsGrow(b []byte) bool { return len(b) >= 4 && string(b[:4]) == rcGrowMagic }

// anchorDevice resolves t.connect's address once on an id of its own
// (kept until Close): it holds the device open, so the PD and the
// transport's registered buffers outlive every connection.
func (t *rcTransport) anchorDevice(ctx context.Context) error {
	if t.anchor != nil {
		return nil
	}
	ch, err := cm.NewChannel()
	if err != nil {
		return fmt.Errorf("ib: rc connect to %s: %w", t.connect, err)
	}
	id, err := ch.CreateID(cm.PortSpaceTCP, uverbs.QPTypeRC)
	if err == nil {
		err = id.Resolve(ctx, cm.Addr{}, cm.IPAddr(t.connect))
	}
	var pd *uverbs.PD
	var vctx *uverbs.Context
	if err == nil {
		vctx, pd, err = id.Verbs()
	}
	if err != nil {
		ch.Close()
		return fmt.Errorf("ib: rc connect to %s: %w", t.connect, err)
	}
	if info, err := id.Query(); err == nil {
		t.m.usePort(vctx.Device().Name, int(info.Port)) // fabricDown watches it
	}
	mem, err := uverbs.AllocMemory((rcPeerRecv+rcSendSlots)*t.mtu, uverbs.MemoryOptions{})
	if err != nil {
		ch.Close()
		return fmt.Errorf("ib: rc connection buffers: %w", err)
	}
	mr, err := pd.RegMR(mem.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		mem.Close()
		ch.Close()
		return fmt.Errorf("ib: register rc connection buffers: %w", err)
	}
	t.anchorCh, t.anchor, t.ppd, t.pmem, t.pmr = ch, id, pd, mem, mr
	return nil
}

// ---- connection buffers

// allocSend makes c's registered memory: recv receive buffers (a
// publication's own QP) then c.slotsN bounce slots, mtu bytes each.
func (c *rcConn) allocSend(pd *uverbs.PD, recv, mtu int) error {
	var err error
	c.recvSlots, c.sendBase = recv, recv*mtu
	c.head, c.tail, c.nfree = 0, 0, c.slotsN
	c.slots = newSlotRegs(c.slotsN)
	if c.mem, err = uverbs.AllocMemory((recv+c.slotsN)*mtu, uverbs.MemoryOptions{}); err != nil {
		return fmt.Errorf("ib: rc connection buffers: %w", err)
	}
	if c.mr, err = pd.RegMR(c.mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("ib: register rc connection buffers: %w", err)
	}
	return nil
}

func (c *rcConn) postRecv(i, mtu int) error {
	c.rsge[0] = c.mr.SGE(i*mtu, mtu)
	c.rwr[0] = uverbs.RecvWR{WRID: uint64(i), SGL: c.rsge[:]}
	if _, err := c.qp.PostRecv(c.rwr[:]); err != nil {
		return fmt.Errorf("ib: post receive: %w", err)
	}
	return nil
}

// release disconnects and frees everything of c (idempotent): the QP goes
// to error first so that nothing DMAs into the buffers freed after it.
func (c *rcConn) release() {
	if c.close {
		return
	}
	c.close = true
	if c.conn != nil {
		_ = c.conn.Disconnect()
	} else if c.id != nil {
		_ = c.id.Disconnect()
	}
	if c.mr != nil && !c.shared {
		_ = c.mr.Close()
	}
	if c.unwatch != nil {
		c.unwatch() // before the CQ goes with the connection
	}
	if c.conn != nil {
		_ = c.conn.Close()
	} else if c.id != nil {
		_ = c.id.Close()
	}
	if c.scq && c.cq != nil {
		_ = c.cq.Close() // after the QP on it
	}
	if c.mem != nil && !c.shared {
		_ = c.mem.Close()
	}
}

// ---- agent side

// drain applies the connections handed over since the last call.
func (t *rcTransport) drain() {
	for {
		select {
		case ev := <-t.evc:
			t.apply(ev)
		default:
			return
		}
	}
}

func (t *rcTransport) apply(ev rcEvent) {
	c := ev.c
	if ev.up {
		if c.closing.Load() {
			return // its loss follows in the channel
		}
		if c.id != nil && c.gen != t.gen {
			// accepted on shared queues rebuilt since: its peer dials again
			t.m.RC.Lost.Add(1)
			t.drop(c)
			t.freeRetired() // its QP held them
			return
		}
		if t.connect.IsValid() && t.cur != nil {
			// not expected (one dial at a time): keep the connection in use
			c.closing.Store(true)
			c.release()
			return
		}
		t.byQPN[c.qp.QPN()], t.byKey[c.key] = c, c
		if old := t.byAddr[c.addr]; old != nil && old != c {
			t.drop(old)
		}
		t.byAddr[c.addr] = c
		if t.connect.IsValid() {
			t.cur = c
		}
		return
	}
	t.drop(c)
}

// drop forgets and frees c; a publication dials again.
func (t *rcTransport) drop(c *rcConn) {
	c.closing.Store(true)
	if t.connect.IsValid() && !c.removalSeen && c.deviceRemoved() {
		// the logs were registered on the removed device's PD: again on
		// the next one's (devremove.go); also when the agent's own loss
		// dropped c before the watcher's DEVICE_REMOVAL came
		c.removalSeen = true
		t.m.DeviceRemovals.Add(1)
		_ = t.deregisterAll()
	}
	if c.dropped {
		return // a loss the agent found and the watcher's both came
	}
	c.dropped = true
	if t.byKey[c.key] == c {
		delete(t.byKey, c.key)
		delete(t.byQPN, c.qp.QPN())
	}
	if t.byAddr[c.addr] == c {
		delete(t.byAddr, c.addr)
	}
	if t.cur == c {
		t.cur = nil
		// its receive completions not yet delivered name buffers the next
		// connection reposts
		t.pend, t.pendAt = t.pend[:0], 0
	}
	if c.id != nil {
		t.live.Add(-1)
		t.ungrantAll(c) // write.go: no write lands in an image after this
	}
	// The shared CQ may still hold this QP's completions: they find no
	// connection by key or QPN and are skipped.
	switch {
	case t.closed || c.peerClosed.Load() || c.deviceRemoved():
		// closing; or the peer's DREQ came, so the link works; or the
		// device is gone and no CM MAD can go out on it
		c.release()
	default:
		// a loss: the QP stops now (a local verb, no CM MAD: nothing it
		// still has posted runs against the buffers the next connection
		// reuses); the disconnect waits LossGrace and every port up, as
		// a link going down fails sends before its port reads down
		if c.qp != nil {
			_ = c.qp.ToErr()
		}
		c.parkedAt = time.Now().UnixNano()
		t.parked = append(t.parked, c)
		if t.connect.IsValid() {
			t.lostAt.Store(c.parkedAt)
		}
	}
	// its QP is in the error state or gone: the device reads no
	// registered log for it any more
	c.slots.freeAll()
	if t.connect.IsValid() && t.cur == nil && !t.closed {
		select {
		case t.redial <- struct{}{}:
		default:
		}
	}
}

// fail is the agent's own discovery of a lost connection (a completion in
// error, a failed post).
func (t *rcTransport) fail(c *rcConn, cause string) {
	if c.closing.CompareAndSwap(false, true) {
		t.m.RC.Lost.Add(1)
		t.reportLoss(c, cause)
	}
	t.drop(c)
}

// poll reads one batch of cq: send completions free slots of their
// connection, receive completions are kept for Recv. own is the
// connection cq belongs to (nil: the subscription's shared CQ).
func (t *rcTransport) poll(cq *uverbs.CQ, own *rcConn) error {
	if t.pendAt > 0 {
		t.pend = t.pend[:copy(t.pend, t.pend[t.pendAt:])]
		t.pendAt = 0
	}
	if cq == t.cq && t.sharedFailed {
		return errCQFailed // Recv rebuilds the shared queues first
	}
	var n int
	var err error
	switch {
	case t.failPoll.Load() && t.failPoll.CompareAndSwap(true, false):
		err = errInjected
	case cq == t.cq && t.cqEvent.Load():
		err = errCQEvent
	case cq == t.cq && t.srqEvent.Load():
		err = errSRQEvent
	case own != nil && own.cqEvent.Load():
		err = errCQEvent
	default:
		n, err = cq.Poll(t.wcs[:])
	}
	t.polled = n
	if err != nil {
		if own != nil {
			// the connection's own CQ: the connection goes, and the
			// next dial makes a new QP and CQ
			t.m.RC.CQErrors.Add(1)
			t.m.CQRebuilds.Add(1)
			t.fail(own, "poll its CQ: "+err.Error())
		} else {
			t.sharedFailure("poll the shared CQ", err)
		}
		return fmt.Errorf("ib: rc poll: %w", err)
	}
	for i := range t.wcs[:n] {
		w := &t.wcs[i]
		if w.WRID&rcSendWRID == 0 {
			t.pend = append(t.pend, *w)
			if own == nil {
				if t.posted--; t.posted == 0 && w.Status == uverbs.WCSuccess {
					t.m.RC.SRQEmpty.Add(1) // the SRQ's last buffer (rqempty.go)
				}
			}
			continue
		}
		c := t.byKey[uint32(w.WRID>>16)]
		if w.Status != uverbs.WCSuccess {
			t.countErr(w.Status, &t.m.SendErrors)
			if c != nil {
				t.fail(c, "send completion "+w.Status.String())
			}
			continue
		}
		if c == nil {
			continue // a dropped connection's late completion
		}
		k := int(w.WRID & 0xffff)
		freed := (k + 1 - c.tail + c.slotsN) % c.slotsN
		if freed == 0 {
			freed = c.slotsN
		}
		for j := 0; j < freed; j++ { // a send queue completes in order
			c.slots.free((c.tail + j) % c.slotsN)
		}
		c.nfree += freed
		c.tail = (k + 1) % c.slotsN
		c.stallAt = 0
	}
	return nil
}

func (t *rcTransport) countErr(s uverbs.WCStatus, n *atomic.Int64) {
	if s == uverbs.WCWRFlushErr {
		t.m.RC.Flushed.Add(1)
	} else {
		n.Add(1)
	}
}

// Send posts datagrams on the connection as one work-request list (one
// doorbell) per postBatch, each as UD's Send does it: from a registered
// publication log without a copy while its in-flight bound allows, inline
// when small, else copied into the connection's bounce slot; one work
// request in signalEvery is signalled, and the last of a list when a
// registered log's bytes would otherwise wait for a later one. A full
// send queue (after one poll of completions) is a short send; a lost
// connection drops the rest and counts them, as an unconnected UDP path
// loses them.
func (t *rcTransport) Send(dest netip.AddrPort, datagrams [][]byte) (int, error) {
	t.drain()
	var c *rcConn
	if t.connect.IsValid() && (!dest.IsValid() || dest == t.connect) {
		c = t.cur
	} else {
		c = t.byAddr[dest]
	}
	if c == nil || t.sharedFailed {
		// no connection (yet, or any more, or its shared queues failed and
		// the next Recv drops it): lost as on an unconnected UDP path
		t.m.RC.Dropped.Add(int64(len(datagrams)))
		return len(datagrams), nil
	}
	if t.movedTo(t.regPD()) {
		// the publication's anchor is on another device than the logs'
		// registrations: its device was removed, and no drop of a
		// connection saw the removal (the agent's own loss can drop one
		// before the watcher's DEVICE_REMOVAL, which then finds nothing
		// to drop); sends naming the old PD's keys would fail with local
		// QP operation errors on every new connection
		t.m.DeviceRemovals.Add(1)
	}
	if t.regsPending {
		t.registerPending(t.regPD(), t.m)
	}
	if c.write && t.connect.IsValid() {
		return t.sendWrite(c, datagrams) // write.go
	}
	sent := 0
	for sent < len(datagrams) {
		if c.nfree == 0 {
			if err := t.poll(c.cq, c); err != nil || c.closing.Load() {
				// the connection is gone: lost as on an unconnected path
				t.m.RC.Dropped.Add(int64(len(datagrams) - sent))
				return len(datagrams), nil
			}
			if c.nfree == 0 {
				if t.stalled(c) {
					t.m.RC.Dropped.Add(int64(len(datagrams) - sent))
					return len(datagrams), nil
				}
				return sent, nil // short send: the driver resumes here next duty
			}
		}
		k := 0
		var tooBig error
		for k < postBatch && k < c.nfree && sent+k < len(datagrams) {
			d := datagrams[sent+k]
			if len(d) > t.mtu {
				tooBig = fmt.Errorf("ib: frame of %d bytes to %s is above the channel mtu %d", len(d), dest, t.mtu)
				break
			}
			t.prepare(c, k, d)
			k++
		}
		if k > 0 {
			n, err := t.post(c, k)
			sent += n
			if err != nil {
				// the QP left RTS: the connection is gone
				t.fail(c, "post send: "+err.Error())
				t.m.RC.Dropped.Add(int64(len(datagrams) - sent))
				return len(datagrams), nil
			}
		}
		if tooBig != nil {
			return sent, tooBig
		}
	}
	return sent, nil
}

// regPD is the PD the transport's logs are registered with: the
// subscription's, or the publication's anchor's (it outlives every
// connection).
func (t *rcTransport) regPD() *uverbs.PD {
	if t.connect.IsValid() {
		return t.ppd
	}
	return t.pd
}

// prepare fills work request k of c's next list with d, in send slot
// c.head+k.
func (t *rcTransport) prepare(c *rcConn, k int, d []byte) {
	slot := (c.head + k) % c.slotsN
	wr := &c.swr[k]
	*wr = uverbs.SendWR{WRID: rcSendWRID | uint64(c.key)<<16 | uint64(slot), Opcode: uverbs.WRSend}
	t.m.fillSend(wr, c.ssge[k:k+1], d, slot, c.inline, &t.regions, &c.slots, c.mem.Bytes(), c.mr, c.sendBase+slot*t.mtu)
}

// post posts c's k prepared work requests with one doorbell and takes
// their slots; those the provider refused give theirs back.
func (t *rcTransport) post(c *rcConn, k int) (int, error) {
	n, err := c.slots.post(c.qp, c.swr[:k])
	for j := n; j < k; j++ {
		c.slots.free((c.head + j) % c.slotsN)
	}
	c.head = (c.head + n) % c.slotsN
	c.nfree -= n
	return n, err
}

// RegisterMemory implements driver.MemoryRegistrar as the UD transport
// does: b is registered with the transport's PD at the first Send that
// has a connection (a publication's PD comes with its first resolved
// address and then outlives every connection, so a reconnect keeps the
// registration).
func (t *rcTransport) RegisterMemory(b []byte, maxInFlight int) (func() error, error) {
	r, err := t.add(b, maxInFlight)
	if err != nil {
		return nil, err
	}
	return func() error { return t.unregister(r) }, nil
}

// unregister is the release func of RegisterMemory: wait for the sends
// reading r (polling the connection's CQ, or the shared one), then
// deregister it. As on UD, deregistering after the wait timed out is safe
// for memory: the device fails those sends instead.
func (t *rcTransport) unregister(r *memReg) error {
	if r.released {
		return nil
	}
	r.released = true
	var err error
	if r.inFlight > 0 {
		// the sends are on the connections' own CQs
		err = quiesceWith(r, func() error {
			if t.connect.IsValid() {
				if c := t.cur; c != nil {
					return t.poll(c.cq, c)
				}
				return nil
			}
			for _, c := range t.byKey {
				if err := t.poll(c.cq, c); err != nil {
					return err
				}
			}
			return nil
		})
	}
	err = errors.Join(err, t.remove(r))
	for _, c := range t.byKey {
		c.slots.forget(r)
	}
	if t.cur != nil {
		t.cur.slots.forget(r)
	}
	return err
}

func (t *rcTransport) Recv(maxN int, fn driver.RecvFunc) (int, error) {
	t.releaseParked(false)
	if t.relisten {
		return 0, t.listenAgain() // devremove.go
	}
	if g := cm.DeviceRemovals(); g != t.removalsSeen {
		t.removalsSeen = g
		if t.lid != nil && t.lid.DeviceRemoved() {
			t.subDeviceGone() // devremove.go
			return 0, nil
		}
	}
	if t.sharedFailed {
		return 0, t.rebuildShared()
	}
	t.drain()
	if len(t.grantsDue) > 0 {
		t.sendGrantsDue() // write.go
	}
	cq, own := t.cq, (*rcConn)(nil)
	if t.connect.IsValid() {
		if t.cur == nil {
			return 0, nil
		}
		cq, own = t.cur.cq, t.cur
	} else if w := int(t.wantMTU.Load()); w > t.mtu {
		if err := t.grow(w); err != nil {
			return 0, nil // reported; grown at a later Recv
		}
		cq = t.cq
	}
	if t.pendAt == len(t.pend) {
		t.pend, t.pendAt = t.pend[:0], 0
		if err := t.poll(cq, own); err != nil {
			return 0, err
		}
		// the shared CQ is polled until empty (or pend full) before any
		// buffer is reposted: so an SRQ the device emptied shows as
		// every posted buffer completed (rqempty.go)
		for own == nil && t.polled == len(t.wcs) && cap(t.pend)-len(t.pend) >= len(t.wcs) {
			if err := t.poll(cq, nil); err != nil {
				return 0, err
			}
		}
	}
	n := 0
	for n < maxN && t.pendAt < len(t.pend) {
		w := t.pend[t.pendAt]
		t.pendAt++
		i := int(w.WRID)
		if t.connect.IsValid() {
			c := t.cur
			if c == nil || w.Status != uverbs.WCSuccess {
				if w.Status != uverbs.WCSuccess {
					t.countErr(w.Status, &t.m.RecvErrors)
					if c != nil {
						t.fail(c, "receive completion "+w.Status.String())
					}
				}
				continue
			}
			if b := c.mem.Bytes()[i*t.mtu : i*t.mtu+int(w.ByteLen)]; c.write && len(b) >= 4 && string(b[:4]) == rcGrantMagic {
				t.onGrant(c, b) // write.go
			} else {
				fn(t, b, t.connect, c.ts.stamp(w.Timestamp))
				n++
			}
			if c.close {
				continue // fn's reply found the connection lost
			}
			if err := c.postRecv(i, t.mtu); err != nil {
				t.fail(c, "repost a receive: "+err.Error())
			}
			continue
		}
		// subscription: an SRQ buffer; a completion in error (its QP
		// lost) returns the buffer too
		c := t.byQPN[w.QPN]
		if c == nil && w.Status == uverbs.WCSuccess {
			t.drain() // handed over after this Recv began
			c = t.byQPN[w.QPN]
		}
		switch {
		case w.Status != uverbs.WCSuccess:
			t.countErr(w.Status, &t.m.RecvErrors)
			if c != nil {
				t.fail(c, "receive completion "+w.Status.String())
			}
		case c == nil:
			t.m.Unresolved.Add(1)
		case w.Opcode == uverbs.WCRecvRDMAWithImm:
			// ib-mode=write: frames placed in an image (write.go)
			if buf, err := t.placed(c, w.Imm); err != nil {
				t.m.RC.BadPlacements.Add(1)
				t.fail(c, err.Error())
			} else {
				fn(t, buf, c.addr, t.ts.stamp(w.Timestamp))
				n++
			}
		default:
			b := t.mem.Bytes()[i*t.mtu : i*t.mtu+int(w.ByteLen)]
			if c.write && len(b) >= 4 && string(b[:4]) == rcAskMagic {
				t.onAsk(c, b) // write.go
				break
			}
			fn(t, b, c.addr, t.ts.stamp(w.Timestamp))
			n++
		}
		if err := t.postSRQ(i); err != nil {
			t.sharedFailure("post to the shared receive queue", err)
			return n, err
		}
	}
	if n == 0 && !t.connect.IsValid() {
		if t.idleCalls++; t.idleCalls&1023 == 0 {
			t.m.readDeviceCounters(time.Now().UnixNano()) // rqempty.go
		}
	}
	return n, nil
}

func (t *rcTransport) Reconnect(dest netip.AddrPort) error {
	if dest == t.connect {
		return nil
	}
	return fmt.Errorf("ib: rc reconnect to %s is not implemented (the publication's endpoint is %s)", dest, t.connect)
}

func (t *rcTransport) SocketRcvbuf() (int, error) {
	if t.connect.IsValid() {
		return rcPeerRecv * t.mtu, nil
	}
	return t.ring * t.mtu, nil
}

func (t *rcTransport) LocalAddr() string { return t.local }

func (t *rcTransport) Binding() string { return string(uri.MediaIB) }

// Close disconnects every connection, stops the goroutines and frees
// everything.
func (t *rcTransport) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	t.cancel()
	t.wg.Wait()
	t.drain()
	for _, c := range t.byKey {
		t.drop(c)
	}
	if t.cur != nil {
		t.drop(t.cur)
	}
	t.releaseParked(true)
	var errs []error
	// the driver's logs before the PD they are registered with (the
	// anchor's, the listener's); no QP reads them any more
	for len(t.regs) > 0 {
		errs = append(errs, t.unregister(t.regs[0]))
	}
	t.retire()
	for _, q := range t.retired {
		errs = append(errs, q.close())
	}
	t.retired = nil
	if t.pmr != nil {
		errs = append(errs, t.pmr.Close())
	}
	if t.pmem != nil {
		errs = append(errs, t.pmem.Close())
	}
	// the ids that hold the device open go last: closing them may close
	// the device's PD
	if t.lid != nil {
		errs = append(errs, t.lid.Close())
	}
	if t.ch != nil {
		errs = append(errs, t.ch.Close())
	}
	if t.anchor != nil {
		errs = append(errs, t.anchor.Close(), t.anchorCh.Close())
	}
	return errors.Join(errs...)
}
