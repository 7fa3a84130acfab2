package driver

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// Receiver timings of the C driver (aeron_driver_context.c, aeron_loss_detector.h).
const (
	nakUnicastDelayNs        = 100_000 // AERON_NAK_UNICAST_DELAY_DEFAULT_NS
	nakUnicastRetryRatio     = 100     // AERON_NAK_UNICAST_RETRY_DELAY_RATIO_DEFAULT
	pendingSetupTimeoutNs    = 1_000_000_000
	receivePollPerDuty       = 32
	imageEOSStatusMessages   = 5
	maxPendingSetupEndpoints = 64
)

// receiveEndpoint is a bound receive socket shared by the subscriptions of
// one unicast endpoint (aeron_receive_channel_endpoint.c) and the images
// of the sessions arriving on it. The conductor creates and closes it and
// keeps the subscriptions and images it owns (subs, images); the receiver
// agent reads its transport and keeps its own view (rsubs, rimages), which
// the conductor changes only through the receiver's command queue.
type receiveEndpoint struct {
	key string // canonical bind address
	t   Transport
	// the rcv-channel counter and, with a transport of its own (not a
	// multi-destination subscription), rcv-local-sockaddr (conductor)
	statusID, localAddrID int32

	// fixed by the conductor before the receiver gets the endpoint:
	// control is where a multicast endpoint sends status messages and
	// NAKs (the control group; invalid for unicast, which answers the
	// source of the data); groupTag goes into every status message when
	// hasGroupTag (gtag= or AERON_RECEIVER_GROUP_TAG), for tagged flow
	// control; reliable false fills gaps with padding instead of NAKing
	// them (reliable=, AERON_RELIABLE_STREAM); group is group= (1 true,
	// 0 false, -1 infer) and multicastDelay the NAK backoff of images
	// with group semantics.
	control netip.AddrPort
	// explicitControl: control= on a unicast subscription (dynamic
	// multi-destination-cast); the receiver registers with the
	// publication there until it has an image
	explicitControl bool
	// multicast: a multicast endpoint, with its channel's ttl= (0 when
	// not given), against which a SETUP's ttl is checked
	multicast    bool
	multicastTTL int32
	receiverID   int64
	// the channel that created the endpoint, its receiver window
	// (rcv-wnd or AERON_RCV_INITIAL_WINDOW_LENGTH) and socket buffer
	// lengths (0: not set); fixed at creation
	channel            string
	rcvWnd             int64
	soRcvbuf, soSndbuf int
	// mediaTSOffset: where media-rcv-ts-offset puts the medium's receive
	// timestamp in a data frame (mediaTimestampOffset); -1 nowhere
	mediaTSOffset  int
	lastControlNs  map[int32]int64 // stream -> last registration SM
	groupTag       int64
	hasGroupTag    bool
	reliable       bool
	group          int8
	multicastDelay optimalDelay
	// the unicast NAK delay and retry delay (nak-delay=, AERON_NAK_UNICAST_DELAY
	// x AERON_NAK_UNICAST_RETRY_DELAY_RATIO)
	nakDelayNs, nakRetryNs int64
	// the untethered-subscription timeouts of its images, from the
	// channel that created the endpoint or AERON_UNTETHERED_*
	untethered untetheredTimeouts
	// mds: a multi-destination subscription (control-mode=manual): t is
	// nil and each receive destination the client adds brings its own
	// transport (dests, the conductor's list; rdests, the receiver's)
	mds bool
	// livenessNs: a multi-destination subscription's image stops sending
	// control frames to a connection silent this long (the image liveness
	// timeout, aeron_publication_image_connection_is_alive)
	livenessNs int64
	// cc is the congestion control of the endpoint's images (cc=, fixed
	// at creation): "static" or "cubic"
	cc string

	// conductor
	subs         []*subLink
	images       []*publicationImage
	closed       bool
	dests        []*rcvDestination
	closingDests []*rcvDestination

	// receiver; of a subLink the receiver reads only the fields fixed at
	// creation (streamID, sessionID, hasSession)
	rsubs   []*subLink
	rimages []*publicationImage
	rdests  []*rcvDestination
	recvFn  RecvFunc
	r       *receiver
	// setup elicitation: last time an SM with the SETUP flag went to a
	// session (aeron pending setup entries)
	pendingSetup map[[2]int32]int64
	// image creation asked of the conductor, and when
	creating map[[2]int32]int64
	ctl      [protocol.NakHeaderLength + 16]byte
	batch    [][]byte

	released atomic.Bool // the receiver dropped the endpoint and closed t
}

func newReceiveEndpoint(key string, t Transport) *receiveEndpoint {
	// one receiver id per endpoint, as the C driver's endpoint->receiver_id:
	// a multi-destination-cast sender tracks receivers by it
	e := &receiveEndpoint{key: key, t: t, statusID: -1, localAddrID: -1, receiverID: rand.Int64(), pendingSetup: map[[2]int32]int64{}, lastControlNs: map[int32]int64{}, creating: map[[2]int32]int64{}, batch: make([][]byte, 1), mediaTSOffset: -1}
	e.recvFn = e.onDatagram
	return e
}

// receiver is the receiver agent (aeron_driver_receiver.c): it reads the
// endpoints' datagrams into images and sends the status messages and NAKs
// the conductor schedules. Owned by the goroutine that runs it.
type receiver struct {
	cmds        *proxy
	toConductor *proxy
	c           *conductor // target of toConductor commands only
	endpoints   []*receiveEndpoint
	sys         []*atomic.Int64
	nowNs       int64
	cycle       cycleTracker
}

// doWork is one receiver duty cycle (aeron_driver_receiver_do_work).
func (r *receiver) doWork() int {
	r.nowNs = time.Now().UnixNano()
	work := r.cmds.drain()
	for _, e := range r.endpoints {
		work += e.poll(r)
	}
	r.cycle.record(r.nowNs)
	return work
}

func (r *receiver) onAddEndpoint(e *receiveEndpoint) {
	e.r = r
	r.endpoints = append(r.endpoints, e)
}

// onRemoveEndpoint drops the endpoint and closes its transport; the
// conductor has removed its images before (commands run in order).
func (r *receiver) onRemoveEndpoint(e *receiveEndpoint) {
	for i, x := range r.endpoints {
		if x == e {
			r.endpoints = append(r.endpoints[:i], r.endpoints[i+1:]...)
			break
		}
	}
	for _, im := range e.rimages {
		im.released.Store(true)
	}
	e.rimages = nil
	if e.t != nil {
		_ = e.t.Close()
	}
	for _, d := range e.rdests {
		_ = d.t.Close()
		d.released.Store(true)
	}
	e.rdests = nil
	e.released.Store(true)
}

func (r *receiver) onAddSubscription(e *receiveEndpoint, s *subLink) {
	e.rsubs = append(e.rsubs, s)
}

func (r *receiver) onRemoveSubscription(e *receiveEndpoint, s *subLink) {
	for i, x := range e.rsubs {
		if x == s {
			e.rsubs = append(e.rsubs[:i], e.rsubs[i+1:]...)
			return
		}
	}
}

// onAddImage starts receiving into a new image and answers its SETUP with
// the status message the conductor scheduled: this is what connects the
// publication.
func (r *receiver) onAddImage(e *receiveEndpoint, im *publicationImage) {
	delete(e.creating, [2]int32{im.sessionID, im.streamID})
	delete(e.pendingSetup, [2]int32{im.sessionID, im.streamID})
	e.rimages = append(e.rimages, im)
	im.sendPending(r)
}

// onRemoveImage stops receiving into the image and tells the sender this
// receiver is going away (an SM with the EOS flag).
func (r *receiver) onRemoveImage(e *receiveEndpoint, im *publicationImage) {
	for i, x := range e.rimages {
		if x == im {
			e.rimages = append(e.rimages[:i], e.rimages[i+1:]...)
			sm := protocol.StatusMessage{FrameHeader: protocol.FrameHeader{Flags: protocol.SMFlagEOS}, SessionID: im.sessionID, StreamID: im.streamID,
				ReceiverID: im.receiverID, GroupTag: e.groupTag, HasGroupTag: e.hasGroupTag}
			n, _ := sm.Encode(im.ctl[:])
			im.sendControl(r, im.ctl[:n])
			break
		}
	}
	im.released.Store(true)
}

// interested is the receiver's view: a subscription wants this stream and
// session.
func (e *receiveEndpoint) interested(streamID, sessionID int32) bool {
	for _, s := range e.rsubs {
		if s.streamID == streamID && (!s.hasSession || s.sessionID == sessionID) {
			return true
		}
	}
	return false
}

// conductorInterested is the same question over the conductor's list.
func (e *receiveEndpoint) conductorInterested(streamID, sessionID int32) bool {
	for _, s := range e.subs {
		if s.streamID == streamID && (!s.hasSession || s.sessionID == sessionID) {
			return true
		}
	}
	return false
}

func (e *receiveEndpoint) image(sessionID, streamID int32) *publicationImage {
	for _, im := range e.rimages {
		if im.sessionID == sessionID && im.streamID == streamID {
			return im
		}
	}
	return nil
}

// sendTo sends a control frame to dest through via (the endpoint's own
// transport when nil; a multi-destination subscription answers through
// the destination the frame came in on), or to the control address.
func (e *receiveEndpoint) sendTo(r *receiver, via Transport, dest netip.AddrPort, b []byte) {
	if e.control.IsValid() {
		dest = e.control
	}
	if via == nil {
		via = e.t
	}
	if via == nil {
		return
	}
	e.batch[0] = b
	if _, err := via.Send(dest, e.batch); err != nil {
		r.sys[sysErrors].Add(1)
	}
	e.batch[0] = nil
}

// onDatagram is the receive path (aeron_receive_channel_endpoint_dispatch,
// aeron_data_packet_dispatcher): anything malformed is dropped and counted
// as an invalid packet.
func (e *receiveEndpoint) onDatagram(t Transport, buf []byte, from netip.AddrPort, mediaTimestampNs int64) {
	r := e.r
	r.sys[sysBytesReceived].Add(int64(len(buf)))
	f, err := protocol.NextFrame(buf, 0)
	if err != nil {
		r.sys[sysInvalidPackets].Add(1)
		return
	}
	switch f.Header.Type {
	case protocol.TypeData, protocol.TypePad:
		var h protocol.DataHeader
		if h.Decode(buf) != nil || (f.Header.FrameLength != 0 && len(buf)&(logbuffer.FrameAlignment-1) != 0 && len(buf) != int(f.Header.FrameLength)) {
			r.sys[sysInvalidPackets].Add(1)
			return
		}
		im := e.image(h.SessionID, h.StreamID)
		if im == nil {
			// a frame with the EOS flag (a closed publication's linger)
			// never brings the session back (aeron_data_packet_dispatcher_on_data)
			if h.Flags&protocol.FlagEOS == 0 && e.interested(h.StreamID, h.SessionID) {
				e.elicitSetup(t, h.SessionID, h.StreamID, from)
			}
			return
		}
		if mediaTimestampNs != 0 && e.mediaTSOffset != -1 {
			setTimestamp(buf, e.mediaTSOffset, mediaTimestampNs)
		}
		im.onData(r, t, &h, buf, from)
	case protocol.TypeSetup:
		var s protocol.Setup
		if s.Decode(buf) != nil {
			r.sys[sysInvalidPackets].Add(1)
			return
		}
		e.onSetup(t, &s, from)
	case protocol.TypeRTTM:
		var m protocol.RTTMeasurement
		if m.Decode(buf) != nil {
			r.sys[sysInvalidPackets].Add(1)
			return
		}
		// a sender's reply to the RTT measurement of an image's
		// congestion control (aeron_publication_image_on_rttm); requests
		// from senders are not answered (no sender asks)
		if im := e.image(m.SessionID, m.StreamID); im != nil && m.Flags&protocol.RTTMFlagReply == 0 && m.ReceiverID == im.receiverID {
			im.cc.onRTTM(r.nowNs, r.nowNs-m.EchoTimestamp-m.ReceptionDelta)
		}
	default:
		r.sys[sysInvalidPackets].Add(1)
	}
}

// mediaTSReserved is the media-rcv-ts-offset=reserved offset: the data
// header's reserved value (AERON_UDP_CHANNEL_RESERVED_VALUE_OFFSET).
const mediaTSReserved = math.MinInt32

// setTimestamp writes ts into the first frame of a received datagram, if
// that frame begins a message (aeron_timestamps_set_timestamp: DATA, begin
// flag, not a heartbeat): into its reserved value, or at offset into its
// payload when both the datagram and the frame have room for 8 bytes
// there. Other frames of the datagram keep what the publisher wrote.
func setTimestamp(buf []byte, offset int, ts int64) {
	var fh protocol.FrameHeader
	if len(buf) < protocol.DataHeaderLength || fh.Decode(buf) != nil || fh.Type != protocol.TypeData ||
		fh.Flags&protocol.FlagBegin == 0 || fh.FrameLength == 0 {
		return
	}
	if offset == mediaTSReserved {
		binary.LittleEndian.PutUint64(buf[24:], uint64(ts))
		return
	}
	at := protocol.DataHeaderLength + offset
	if at+8 <= min(int(fh.FrameLength), len(buf)) {
		binary.LittleEndian.PutUint64(buf[at:], uint64(ts))
	}
}

func (e *receiveEndpoint) elicitSetup(t Transport, sessionID, streamID int32, from netip.AddrPort) {
	r := e.r
	k := [2]int32{sessionID, streamID}
	if last, ok := e.pendingSetup[k]; ok && r.nowNs-last < pendingSetupTimeoutNs/10 {
		return
	}
	if len(e.pendingSetup) >= maxPendingSetupEndpoints {
		clear(e.pendingSetup)
	}
	e.pendingSetup[k] = r.nowNs
	sm := protocol.StatusMessage{FrameHeader: protocol.FrameHeader{Flags: protocol.SMFlagSetup}, SessionID: sessionID, StreamID: streamID, ReceiverID: e.receiverID}
	n, _ := sm.Encode(e.ctl[:])
	e.sendTo(r, t, from, e.ctl[:n])
	r.sys[sysStatusMessagesSent].Add(1)
}

// onSetup asks the conductor for an image of a new session
// (aeron_driver_conductor_proxy_on_create_publication_image_cmd), once per
// pending-setup timeout while the request is outstanding.
func (e *receiveEndpoint) onSetup(t Transport, s *protocol.Setup, from netip.AddrPort) {
	r := e.r
	if im := e.image(s.SessionID, s.StreamID); im != nil {
		if e.mds {
			im.connection(t, from, r.nowNs) // the same session on another destination
		}
		return
	}
	if !e.interested(s.StreamID, s.SessionID) {
		return
	}
	if logbuffer.CheckTermLength(int64(s.TermLength)) != nil || s.MTU < protocol.DataHeaderLength || s.MTU > 65504 ||
		s.TermOffset < 0 || s.TermOffset > s.TermLength || s.TermOffset&(logbuffer.FrameAlignment-1) != 0 {
		r.sys[sysInvalidPackets].Add(1)
		return
	}
	k := [2]int32{s.SessionID, s.StreamID}
	if at, ok := e.creating[k]; ok && r.nowNs-at < pendingSetupTimeoutNs {
		return
	}
	if len(e.creating) >= maxPendingSetupEndpoints {
		clear(e.creating)
	}
	if e.multicast && e.multicastTTL < s.TTL {
		// the publisher's ttl is larger than ours: our status messages and
		// NAKs may not reach it (aeron_data_packet_dispatcher_on_setup)
		r.sys[sysPossibleTTLAsymmetry].Add(1)
	}
	setup, c := *s, r.c
	// Never wait on a full conductor queue (the conductor may be waiting
	// on the receiver's): the next SETUP asks again.
	if r.toConductor.tryOffer(func() { c.onCreateImage(e, &setup, from, t) }) {
		e.creating[k] = r.nowNs
	}
}

// poll is the receiver duty for the endpoint: read datagrams, then send
// what the conductor scheduled for each image.
func (e *receiveEndpoint) poll(r *receiver) int {
	work := 0
	if e.t != nil {
		work, _ = e.t.Recv(receivePollPerDuty, e.recvFn)
	}
	for _, d := range e.rdests {
		n, _ := d.t.Recv(receivePollPerDuty, e.recvFn)
		work += n
	}
	if e.explicitControl {
		work += e.registerWithControl(r)
	}
	for _, im := range e.rimages {
		work += im.sendPending(r)
		work += im.initiateRTTM(r)
	}
	return work
}

// onCreateImage is the conductor's side of a SETUP for a new session
// (aeron_driver_conductor_on_create_publication_image): map the log,
// allocate the counters, tell the subscribers, hand the image to the
// receiver.
func (c *conductor) onCreateImage(e *receiveEndpoint, s *protocol.Setup, from netip.AddrPort, t Transport) {
	if e.closed || !e.conductorInterested(s.StreamID, s.SessionID) {
		return
	}
	for _, im := range e.images {
		if im.state != imageDone && im.sessionID == s.SessionID && im.streamID == s.StreamID {
			return
		}
	}
	im, err := newPublicationImage(c, e, s, from)
	if err != nil {
		c.recordError(cnc.ErrorCodeGenericError, fmt.Sprintf("image for session %d stream %d from %s: %v", s.SessionID, s.StreamID, from, err))
		return
	}
	if e.mds {
		// the receiver owns the connections once it has the image
		im.conns = []imageConnection{{t: t, source: from, lastNs: c.nowNs}}
	}
	e.images = append(e.images, im)
	for _, sub := range e.subs {
		if sub.streamID == s.StreamID && (!sub.hasSession || sub.sessionID == s.SessionID) {
			im.addSubscriber(c, sub)
		}
	}
	im.handed = true
	r := c.recv
	c.receiverProxy.offer(func() { r.onAddImage(e, im) })
}

// close takes the endpoint's images away and has the receiver drop it.
func (e *receiveEndpoint) close(c *conductor) {
	if e.closed {
		return
	}
	e.closed = true
	for _, im := range e.images {
		im.close(c)
	}
	e.images = nil
	r := c.recv
	c.receiverProxy.offer(func() { r.onRemoveEndpoint(e) })
	c.closingEndpoints[e.key] = e
	if e.statusID >= 0 {
		c.counters.Value(e.statusID).Store(channelStatusClosing)
	}
	c.awaitRelease(&e.released, func() {
		if c.closingEndpoints[e.key] == e {
			delete(c.closingEndpoints, e.key)
		}
		e.freeCounters(c)
	})
}

// allocateCounters: rcv-channel, labelled with the bound address, and
// rcv-local-sockaddr for an endpoint with a transport of its own
// (aeron_driver_conductor_get_or_add_receive_channel_endpoint and
// aeron_receive_destination_create).
func (e *receiveEndpoint) allocateCounters(c *conductor, regID int64) error {
	local := ""
	if e.t != nil {
		local = e.t.LocalAddr()
	}
	var err error
	if e.statusID, err = allocateChannelStatus(c, cnc.TypeReceiveChannelStatus, "rcv-channel", e.channel, local, regID); err != nil {
		return err
	}
	if e.t != nil {
		if e.localAddrID, err = allocateLocalSockaddr(c, "rcv-local-sockaddr", e.statusID, local, regID); err != nil {
			return err
		}
	}
	c.counters.Value(e.statusID).Store(channelStatusActive)
	return nil
}

func (e *receiveEndpoint) freeCounters(c *conductor) {
	for _, id := range []int32{e.statusID, e.localAddrID} {
		if id >= 0 {
			_ = c.counters.Free(id)
		}
	}
	e.statusID, e.localAddrID = -1, -1
}

type imageState int

const (
	imageActive   imageState = iota
	imageDraining            // ended: subscribers read to rcv-pos, EOS SMs go out
	imageDone
)

// publicationImage is the receiving side of one remote publication
// (aeron_publication_image.c): the rebuilt log, rcv-hwm and rcv-pos, the
// subscriber positions, the loss detector and the status messages. As in
// the C driver the receiver inserts packets and sends what is scheduled;
// the conductor tracks the rebuild (gaps, NAK timing, when an SM is due),
// the subscribers and the lifecycle. What both touch is atomic.
type publicationImage struct {
	e                   *receiveEndpoint
	regID               int64
	sessionID, streamID int32
	sourceIdentity      string
	// rejected is the ERR frame the image sends instead of status
	// messages once a client rejected it (REJECT_IMAGE); nil before.
	// The receiver's.
	rejected []byte

	log                 *logbuffer.LogBuffer
	logFile             string
	logLength           int64
	termLength          int64
	positionBitsToShift int
	initialTermID       int32
	window              int64 // the receiver window of the last scheduled SM (conductor)
	receiverID          int64
	cc                  congestionControl
	lossOccurred        bool // conductor: the loss detector activated a new gap

	hwmID, rcvPosID int32
	hwm, rcvPos     *atomic.Int64 // rcv-hwm written by the receiver, rcv-pos by the conductor

	// conductor
	state           imageState
	handed          bool
	subscribers     []*subscriberPosition
	rebuildPosition int64
	cleanPosition   int64
	lastSMNs        int64
	lastSMPosition  int64
	// loss detector (aeron_loss_detector.c, static unicast delay)
	gapActive              bool
	gapTermID, gapOffset   int32
	gapLength              int32
	gapDeadline            int64
	scanTermID, scanOffset int32
	scanLength             int32
	scanFound              bool
	onGap                  logbuffer.GapHandler
	lossEntry              int
	group                  bool // group semantics: multicast NAK backoff (fixed at creation)
	untethered             untetheredTimeouts
	lastTetherCheckNs      int64

	stateSinceNs int64
	endedShort   bool // counted as ended without end of stream

	// shared
	lastPacketNs atomic.Int64
	eosPosition  atomic.Int64 // math.MaxInt64 until an EOS heartbeat
	// sendingEOS: the image is draining, its status messages carry the
	// EOS flag (is_sending_eos_sm)
	sendingEOS atomic.Bool
	// the subscriber position counters, replaced by the conductor as
	// subscribers come and go, so that the receiver's window checks see
	// consumption as it happens rather than as of the conductor's last cycle
	subPositions atomic.Pointer[[]*atomic.Int64]
	cleaned      atomic.Int64 // clean position
	// The status message and NAK the receiver is to send, published
	// between begin and end change numbers so that the receiver reads a
	// consistent set (aeron_publication_image's begin/end_sm_change and
	// begin/end_loss_change).
	smBegin, smEnd         atomic.Int64
	smPosition             atomic.Int64
	smWindow               atomic.Int64
	lossBegin, lossEnd     atomic.Int64
	lossTermID, lossOffset atomic.Int32
	lossLength             atomic.Int32
	released               atomic.Bool

	// receiver
	source netip.AddrPort
	// conns are the destinations of a multi-destination subscription the
	// session arrives on (aeron_publication_image_connection_t): status
	// messages and NAKs go to each
	conns           []imageConnection
	hwmPosition     int64
	smSent, nakSent int64
	ctl             [protocol.StatusMessageGroupTagLength]byte
	rttm            [protocol.RTTMHeaderLength]byte
}

// imageSparse: an image's log is sparse as the earliest subscription on
// the endpoint that matches it says (sparse=, else the driver's
// AERON_TERM_BUFFER_SPARSE_FILE), as aeron_driver_conductor_is_oldest_subscription_sparse.
func (e *receiveEndpoint) imageSparse(c *conductor, streamID, sessionID int32) bool {
	sparse, oldest := c.cfg.TermBufferSparseFile, int64(math.MaxInt64)
	for _, s := range e.subs {
		if s.streamID == streamID && (!s.hasSession || s.sessionID == sessionID) && s.regID < oldest {
			sparse, oldest = s.sparse, s.regID
		}
	}
	return sparse
}

func newPublicationImage(c *conductor, e *receiveEndpoint, s *protocol.Setup, from netip.AddrPort) (*publicationImage, error) {
	regID := c.rb.NextCorrelationID()
	path := filepath.Join(c.cfg.Dir, "images", strconv.FormatInt(regID, 10)+".logbuffer")
	if err := c.checkStorage(int(s.TermLength)); err != nil {
		return nil, err
	}
	log, err := logbuffer.Create(path, s.TermLength, int32(c.cfg.FilePageSize))
	if err != nil {
		return nil, fail(cnc.ErrorCodeStorageSpace, "cannot create log %s: %v", path, err)
	}
	sparse := e.imageSparse(c, s.StreamID, s.SessionID)
	if !sparse {
		c.faultIn(log)
	}
	im := &publicationImage{e: e, regID: regID, sessionID: s.SessionID, streamID: s.StreamID, source: from,
		sourceIdentity: from.String(), log: log, logFile: path, logLength: int64(len(log.Bytes())),
		termLength: int64(s.TermLength), positionBitsToShift: logbuffer.PositionBitsToShift(s.TermLength),
		initialTermID: s.InitialTermID, receiverID: e.receiverID, hwmID: -1, rcvPosID: -1, lossEntry: -1}
	im.eosPosition.Store(math.MaxInt64)
	// the congestion control's initial window: for static, half a term at
	// most, else the endpoint channel's rcv-wnd
	if im.cc, err = c.newCongestionControl(im, s.MTU); err != nil {
		im.close(c)
		return nil, err
	}
	im.window = im.cc.initialWindow()
	im.onGap = im.recordGap
	im.group = e.imageGroup(s.Flags)
	im.untethered = e.untethered
	m := log.Metadata()
	m.SetCorrelationID(regID)
	m.SetInitialTermID(s.InitialTermID)
	m.SetMTULength(s.MTU)
	m.SetSparse(sparse)
	m.SetEndOfStreamPosition(math.MaxInt64)
	m.StoreDefaultDataHeader(s.SessionID, s.StreamID, s.InitialTermID)
	m.SetReceiverWindowLength(int32(im.window))
	join := logbuffer.ComputePosition(s.ActiveTermID, s.TermOffset, im.positionBitsToShift, s.InitialTermID)
	im.hwmPosition, im.rebuildPosition, im.cleanPosition, im.lastSMPosition = join, join, join, join
	im.cleaned.Store(join)
	channel := e.imageChannel(s.StreamID, s.SessionID)
	key := streamKey(c.keyBuf, regID, s.SessionID, s.StreamID, channel)
	for _, a := range []struct {
		typeID int32
		name   string
		dst    *int32
	}{{cnc.TypeReceiverHWM, "rcv-hwm", &im.hwmID}, {cnc.TypeReceiverPosition, "rcv-pos", &im.rcvPosID}} {
		id, err := c.counters.Allocate(a.typeID, key, streamLabel(a.name, regID, s.SessionID, s.StreamID, channel, ""))
		if err != nil {
			im.close(c)
			return nil, err
		}
		c.counters.SetRegistrationID(id, regID)
		*a.dst = id
	}
	im.hwm, im.rcvPos = c.counters.Value(im.hwmID), c.counters.Value(im.rcvPosID)
	im.hwm.Store(join)
	im.rcvPos.Store(join)
	im.lastPacketNs.Store(c.nowNs)
	c.sys[sysBytesMapped].Add(im.logLength)
	im.scheduleStatus(c, join) // the receiver answers the SETUP with it
	fmt.Fprintf(c.log, "image %d: session %d stream %d from %s at position %d\n", regID, s.SessionID, s.StreamID, from, join)
	return im, nil
}

func (im *publicationImage) addSubscriber(c *conductor, s *subLink) {
	join := im.joinPosition()
	key := streamKey(c.keyBuf, s.regID, im.sessionID, im.streamID, s.channel)
	id, err := c.counters.Allocate(cnc.TypeSubscriberPosition, key, streamLabel("sub-pos", s.regID, im.sessionID, im.streamID, s.channel, "@"+strconv.FormatInt(join, 10)))
	if err != nil {
		c.recordError(cnc.ErrorCodeGenericError, err.Error())
		return
	}
	c.counters.SetRegistrationID(id, s.regID)
	c.counters.SetOwnerID(id, s.client.id)
	c.counters.SetReferenceID(id, im.regID)
	sp := &subscriberPosition{sub: s, id: id, pos: c.counters.Value(id), lastUpdateNs: c.nowNs}
	sp.pos.Store(join)
	im.subscribers = append(im.subscribers, sp)
	im.publishSubscribers()
	c.transmit(cnc.RspOnAvailableImage, cnc.AppendImageReady(c.buf[:0], cnc.ImageReady{
		CorrelationID: im.regID, SessionID: im.sessionID, StreamID: im.streamID, SubscriptionRegistrationID: s.regID,
		SubscriberPositionID: id, LogFile: im.logFile, SourceIdentity: im.sourceIdentity}))
}

func (im *publicationImage) removeSubscriber(c *conductor, s *subLink) {
	for i, sp := range im.subscribers {
		if sp.sub == s {
			_ = c.counters.Free(sp.id)
			im.subscribers = append(im.subscribers[:i], im.subscribers[i+1:]...)
			im.publishSubscribers()
			return
		}
	}
}

// minSubscriberPosition is the consumption position SMs report: the
// slowest subscriber not resting (untethered ones set aside long enough
// no longer count); without such subscribers the image is consumed as it
// is rebuilt.
func (im *publicationImage) minSubscriberPosition() int64 {
	pos := int64(math.MaxInt64)
	for _, sp := range im.subscribers {
		if sp.state != tetherResting {
			pos = min(pos, sp.pos.Load())
		}
	}
	if pos == math.MaxInt64 {
		return im.rebuildPosition
	}
	return pos
}

// publishSubscribers gives the receiver the positions of the subscribers
// that count (not resting).
func (im *publicationImage) publishSubscribers() {
	ps := make([]*atomic.Int64, 0, len(im.subscribers))
	for _, sp := range im.subscribers {
		if sp.state != tetherResting {
			ps = append(ps, sp.pos)
		}
	}
	im.subPositions.Store(&ps)
}

// checkUntethered runs the untethered state machine over the image's
// subscribers (aeron_publication_image_check_untethered_subscriptions):
// the window limit trails the fastest subscriber by three quarters of the
// receiver window, and a subscriber rejoins at the join position, the
// slowest of rcv-pos and the subscribers that count
// (aeron_publication_image_join_position).
func (im *publicationImage) checkUntethered(c *conductor) {
	maxPos := int64(0)
	for _, sp := range im.subscribers {
		if sp.state != tetherResting {
			maxPos = max(maxPos, sp.pos.Load())
		}
	}
	limit := maxPos - im.window + im.window/4
	changed := checkTether(c.nowNs, im.subscribers, limit, im.untethered,
		func(sp *subscriberPosition) {
			c.imageGone(im.regID, im.streamID, sp)
			fmt.Fprintf(c.log, "image %d: untethered subscription %d set aside (linger)\n", im.regID, sp.sub.regID)
		},
		func(sp *subscriberPosition) {
			join := im.joinPosition()
			sp.pos.Store(join)
			c.transmit(cnc.RspOnAvailableImage, cnc.AppendImageReady(c.buf[:0], cnc.ImageReady{
				CorrelationID: im.regID, SessionID: im.sessionID, StreamID: im.streamID, SubscriptionRegistrationID: sp.sub.regID,
				SubscriberPositionID: sp.id, LogFile: im.logFile, SourceIdentity: im.sourceIdentity}))
			fmt.Fprintf(c.log, "image %d: untethered subscription %d rejoins at %d\n", im.regID, sp.sub.regID, join)
		})
	if changed {
		im.publishSubscribers()
	}
}

// joinPosition is aeron_publication_image_join_position: rcv-pos, or the
// slowest subscriber not resting if it is behind, so that a late
// subscriber reads what the others still may.
func (im *publicationImage) joinPosition() int64 { return slowest(im.subscribers, im.rcvPos.Load()) }

// acceptingSubscriptions is aeron_publication_image_is_accepting_subscriptions:
// a new subscription joins an image that some subscriber still reads, while
// it is active or draining with data not yet read.
func (im *publicationImage) acceptingSubscriptions() bool {
	return working(im.subscribers) && (im.state == imageActive || (im.state == imageDraining && !im.drained()))
}

// drained is aeron_publication_image_is_drained: every subscriber not
// resting read up to rcv-pos.
func (im *publicationImage) drained() bool { return reached(im.subscribers, im.rcvPos.Load()) }

// consumedNow is the receiver's minimum subscriber position: rcv-pos
// without subscribers, as minSubscriberPosition is the conductor's.
func (im *publicationImage) consumedNow() int64 {
	ps := im.subPositions.Load()
	if ps == nil || len(*ps) == 0 {
		return im.rcvPos.Load()
	}
	pos := int64(math.MaxInt64)
	for _, p := range *ps {
		pos = min(pos, p.Load())
	}
	return pos
}

// onData inserts a datagram of frames at its position unless it falls
// outside the window (aeron_publication_image_insert_packet). Receiver.
func (im *publicationImage) onData(r *receiver, t Transport, h *protocol.DataHeader, buf []byte, from netip.AddrPort) {
	if im.rejected != nil {
		// a client rejected the image: nothing more goes in, so it ends
		// at the liveness timeout (aeron_publication_image_insert_packet)
		return
	}
	if h.TermOffset < 0 || int64(h.TermOffset) >= im.termLength || h.TermOffset&(logbuffer.FrameAlignment-1) != 0 ||
		int64(h.TermOffset)+int64(len(buf)) > im.termLength {
		r.sys[sysInvalidPackets].Add(1)
		return
	}
	im.lastPacketNs.Store(r.nowNs)
	if im.e.mds {
		im.connection(t, from, r.nowNs)
	} else {
		im.source = from
	}
	pos := logbuffer.ComputePosition(h.TermID, h.TermOffset, im.positionBitsToShift, im.initialTermID)
	consumed := im.consumedNow()
	if h.IsHeartbeat() {
		r.sys[sysHeartbeatsReceived].Add(1)
		if pos > consumed+im.termLength {
			// beyond the window: dropped whole, its EOS too, so that an end
			// of stream past data this receiver overran is never taken as
			// a clean end (aeron_publication_image_insert_packet)
			r.sys[sysFlowControlOverRuns].Add(1)
			return
		}
		if h.IsEndOfStream() && im.eosPosition.Load() == math.MaxInt64 && pos >= im.rcvPos.Load() {
			im.eosPosition.Store(pos)
		}
		if pos > im.hwmPosition {
			im.hwmPosition = pos
			im.hwm.Store(pos)
		}
		return
	}
	end := pos + int64(len(buf))
	if end <= im.rcvPos.Load() || pos < consumed {
		r.sys[sysFlowControlUnderRuns].Add(1)
		return
	}
	if end > consumed+im.termLength-im.termLength/4 || end > im.cleaned.Load()+2*im.termLength {
		r.sys[sysFlowControlOverRuns].Add(1)
		return
	}
	term := im.log.Term(logbuffer.IndexByPosition(pos, im.positionBitsToShift))
	// A datagram is whole frames as the sender scanned them; a PAD
	// travels as its header, which fills frame_length bytes in the term.
	pkt := buf
	if h.Type == protocol.TypePad && len(buf) == protocol.DataHeaderLength {
		end = pos + int64(protocol.Align(int(h.FrameLength), logbuffer.FrameAlignment))
	}
	if err := logbuffer.Insert(term, h.TermOffset, pkt); err != nil {
		r.sys[sysInvalidPackets].Add(1)
		return
	}
	if end > im.hwmPosition {
		im.hwmPosition = end
		im.hwm.Store(end)
	}
}

func (im *publicationImage) recordGap(termID, termOffset, length int32) {
	im.scanFound, im.scanTermID, im.scanOffset, im.scanLength = true, termID, termOffset, length
}

// trackRebuild is the conductor's duty for the image
// (aeron_publication_image_track_rebuild and on_time_event): rebuild
// tracking with the gap scanner and NAK timer, cleaning, when a status
// message is due, and liveness.
func (im *publicationImage) trackRebuild(c *conductor) int {
	work := 0
	hwm := im.hwm.Load()
	// Advance the rebuild position over contiguous frames, across terms.
	for im.rebuildPosition < hwm {
		termID := logbuffer.ComputeTermIDFromPosition(im.rebuildPosition, im.positionBitsToShift, im.initialTermID)
		off := logbuffer.ComputeTermOffsetFromPosition(im.rebuildPosition, im.positionBitsToShift)
		termBegin := im.rebuildPosition - int64(off)
		limit := int32(min(hwm-termBegin, im.termLength))
		im.scanFound = false
		term := im.log.Term(logbuffer.IndexByPosition(im.rebuildPosition, im.positionBitsToShift))
		next := logbuffer.ScanForGap(term, termID, off, limit, im.onGap)
		if next > off {
			im.rebuildPosition = termBegin + int64(next)
			work++
		}
		if im.scanFound {
			work += im.onLoss(c)
			break
		}
		if next == off {
			break
		}
	}
	if im.rebuildPosition >= hwm {
		im.gapActive = false
	}
	im.rcvPos.Store(im.rebuildPosition)
	if len(im.subscribers) > 0 && c.nowNs-im.lastTetherCheckNs >= c.cfg.TimerInterval.Nanoseconds() {
		im.lastTetherCheckNs = c.nowNs
		im.checkUntethered(c)
	}
	consumed := im.minSubscriberPosition()
	im.clean(consumed - im.termLength)
	eos := im.eosPosition.Load()
	if eos != math.MaxInt64 && im.rebuildPosition >= eos {
		im.log.Metadata().SetEndOfStreamPosition(eos)
	}
	// the congestion control's window
	// (aeron_publication_image_track_rebuild): an SM goes when it says
	// so, when the window changed, when consumption moved a quarter
	// window, and at least every status message timeout
	window, force := im.cc.onTrackRebuild(c.nowNs, consumed, im.lastSMPosition, im.lossOccurred)
	im.lossOccurred = false
	if force || window != im.window || c.nowNs-im.lastSMNs >= c.cfg.StatusMessageTimeout.Nanoseconds() || consumed-im.lastSMPosition >= window/4 {
		im.window = window
		im.scheduleStatus(c, consumed)
		work++
	}
	return work + im.onTimeEvent(c, eos)
}

// onTimeEvent is the image's lifecycle (aeron_publication_image_on_time_event).
// ACTIVE ends on the end of stream rebuilt up to rcv-hwm, on the liveness
// timeout (the publisher went silent: counted and logged, since the stream
// ended without its end) or when no subscriber counts any more. DRAINING
// keeps the image, still receiving, until every subscriber read up to
// rcv-pos and EOS status messages went out for 5 SM timeouts; then the
// subscribers get ON_UNAVAILABLE_IMAGE and the receiver lets it go.
func (im *publicationImage) onTimeEvent(c *conductor, eos int64) int {
	switch im.state {
	case imageActive:
		endOfStream := eos != math.MaxInt64 && im.rebuildPosition >= im.hwm.Load()
		silent := c.nowNs-im.lastPacketNs.Load() > c.cfg.ImageLivenessTimeout.Nanoseconds()
		read := working(im.subscribers)
		if !endOfStream && !silent && read {
			return 0
		}
		im.state, im.stateSinceNs = imageDraining, c.nowNs
		im.sendingEOS.Store(true)
		if silent && !endOfStream && read {
			c.imageEndedShort(im, fmt.Sprintf("no packet from the publisher for %v", c.cfg.ImageLivenessTimeout))
		}
		fmt.Fprintf(c.log, "image %d: session %d stream %d draining (end of stream %v, publisher silent %v, subscribers %v)\n",
			im.regID, im.sessionID, im.streamID, endOfStream, silent, read)
		return 1
	case imageDraining:
		if im.drained() && c.nowNs-im.stateSinceNs > imageEOSStatusMessages*c.cfg.StatusMessageTimeout.Nanoseconds() {
			im.close(c)
			return 1
		}
	}
	return 0
}

// onLoss is the unicast loss detector: a new gap is NAKed after the
// unicast delay, an unchanged one re-NAKed after delay x retry ratio. The
// receiver sends the NAK.
func (im *publicationImage) onLoss(c *conductor) int {
	if !im.gapActive || im.gapTermID != im.scanTermID || im.gapOffset != im.scanOffset {
		im.gapActive, im.gapTermID, im.gapOffset, im.gapLength = true, im.scanTermID, im.scanOffset, im.scanLength
		im.gapDeadline = c.nowNs + im.nakDelay(false)
		im.lossOccurred = true
		im.reportLoss(c)
		return 0
	}
	im.gapLength = im.scanLength
	if c.nowNs < im.gapDeadline {
		return 0
	}
	n := im.lossEnd.Load() + 1
	im.lossBegin.Store(n)
	im.lossTermID.Store(im.gapTermID)
	im.lossOffset.Store(im.gapOffset)
	im.lossLength.Store(im.gapLength)
	im.lossEnd.Store(n)
	im.gapDeadline = c.nowNs + im.nakDelay(true)
	return 1
}

func (im *publicationImage) reportLoss(c *conductor) {
	if c.lossReport == nil {
		return
	}
	if im.lossEntry < 0 {
		off, err := c.lossReport.CreateEntry(int64(im.scanLength), c.nowMs, im.sessionID, im.streamID, im.e.imageChannel(im.streamID, im.sessionID), im.sourceIdentity)
		if err == nil {
			im.lossEntry = off
		}
		return
	}
	c.lossReport.RecordObservation(im.lossEntry, int64(im.scanLength), c.nowMs)
}

// clean zeroes the partition behind consumption so a reused term starts
// empty (aeron_publication_image_clean_buffer_to).
func (im *publicationImage) clean(position int64) {
	if position <= im.cleanPosition {
		return
	}
	im.cleanPosition = cleanLog(im.log, im.cleanPosition, position, im.termLength, im.positionBitsToShift)
	im.cleaned.Store(im.cleanPosition)
}

// scheduleStatus has the receiver send a status message at pos.
func (im *publicationImage) scheduleStatus(c *conductor, pos int64) {
	n := im.smEnd.Load() + 1
	im.smBegin.Store(n)
	im.smPosition.Store(pos)
	im.smWindow.Store(im.window)
	im.smEnd.Store(n)
	im.lastSMNs, im.lastSMPosition = c.nowNs, pos
}

// sendPending sends the status message and NAK the conductor scheduled
// (aeron_publication_image_send_pending_status_message and
// send_pending_loss). Receiver.
func (im *publicationImage) sendPending(r *receiver) int {
	work := 0
	if end := im.smEnd.Load(); end != im.smSent {
		pos, window := im.smPosition.Load(), im.smWindow.Load()
		if im.smBegin.Load() == end {
			im.sendStatus(r, pos, window)
			im.smSent = end
			work++
		}
	}
	if end := im.lossEnd.Load(); end != im.nakSent {
		termID, off, length := im.lossTermID.Load(), im.lossOffset.Load(), im.lossLength.Load()
		if im.lossBegin.Load() == end && !im.e.reliable {
			// reliable=false: the receiver, which writes the term, fills
			// the gap with padding instead (send_pending_loss's else)
			im.fillGap(r, termID, off, length)
			im.nakSent = end
			work++
		} else if im.lossBegin.Load() == end {
			nak := protocol.Nak{SessionID: im.sessionID, StreamID: im.streamID, TermID: termID, TermOffset: off, Length: length}
			n, _ := nak.Encode(im.ctl[:])
			im.sendControl(r, im.ctl[:n])
			r.sys[sysNaksSent].Add(1)
			im.nakSent = end
			work++
		}
	}
	return work
}

func (im *publicationImage) sendStatus(r *receiver, pos, window int64) {
	if im.rejected != nil {
		// an ERR frame instead of the status message, at the same times
		// (aeron_publication_image_send_pending_status_message)
		im.sendControl(r, im.rejected)
		r.sys[sysErrorFramesSent].Add(1)
		return
	}
	var flags uint8
	if im.sendingEOS.Load() {
		flags = protocol.SMFlagEOS
	}
	sm := protocol.StatusMessage{FrameHeader: protocol.FrameHeader{Flags: flags}, SessionID: im.sessionID, StreamID: im.streamID,
		ConsumptionTermID:     logbuffer.ComputeTermIDFromPosition(pos, im.positionBitsToShift, im.initialTermID),
		ConsumptionTermOffset: logbuffer.ComputeTermOffsetFromPosition(pos, im.positionBitsToShift),
		ReceiverWindow:        int32(window), ReceiverID: im.receiverID,
		GroupTag: im.e.groupTag, HasGroupTag: im.e.hasGroupTag}
	n, _ := sm.Encode(im.ctl[:])
	im.sendControl(r, im.ctl[:n])
	r.sys[sysStatusMessagesSent].Add(1)
}

// close makes the image unavailable to its subscribers and has the
// receiver drop it; the log and the counters the receiver writes go once
// it has.
func (im *publicationImage) close(c *conductor) {
	if im.state == imageDone {
		return
	}
	im.state = imageDone
	c.releaseSubscribers(im.regID, im.streamID, im.subscribers)
	im.subscribers = nil
	im.publishSubscribers()
	free := func() {
		if im.log != nil {
			c.freeLog(im.log, im.logFile, im.logLength)
		}
		for _, id := range []int32{im.hwmID, im.rcvPosID} {
			if id >= 0 {
				_ = c.counters.Free(id)
			}
		}
		if im.cc != nil {
			im.cc.close(c)
		}
	}
	if im.handed {
		e, r := im.e, c.recv
		c.receiverProxy.offer(func() { r.onRemoveImage(e, im) })
		c.awaitRelease(&im.released, free)
	} else {
		free()
	}
	fmt.Fprintf(c.log, "image %d: session %d stream %d unavailable\n", im.regID, im.sessionID, im.streamID)
}

// registerWithControl sends, for each subscribed stream without an image,
// a status message asking for SETUP to the control address, every
// controlSetupIntervalNs: a dynamic multi-destination-cast publication adds
// this endpoint as a destination on it (the C receiver's pending setups
// with a control address).
func (e *receiveEndpoint) registerWithControl(r *receiver) int {
	work := 0
	for _, s := range e.rsubs {
		if e.hasImageOf(s.streamID) {
			continue
		}
		if last, ok := e.lastControlNs[s.streamID]; ok && r.nowNs-last < controlSetupIntervalNs {
			continue
		}
		e.lastControlNs[s.streamID] = r.nowNs
		var session int32
		if s.hasSession {
			session = s.sessionID
		}
		sm := protocol.StatusMessage{FrameHeader: protocol.FrameHeader{Flags: protocol.SMFlagSetup}, SessionID: session, StreamID: s.streamID, ReceiverID: e.receiverID}
		n, _ := sm.Encode(e.ctl[:])
		e.sendTo(r, nil, e.control, e.ctl[:n])
		r.sys[sysStatusMessagesSent].Add(1)
		work++
	}
	return work
}

func (e *receiveEndpoint) hasImageOf(streamID int32) bool {
	for _, im := range e.rimages {
		if im.streamID == streamID {
			return true
		}
	}
	return false
}

// rejectImage is REJECT_IMAGE (aeron_driver_conductor_on_invalidate_image):
