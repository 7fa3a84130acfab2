package driver

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
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
	// tag is the channel tag of the channel that created it (noTag
	// without), controlMode its control-mode= and bind the address it
	// bound: what a tagged channel must agree with
	tag         int64
	controlMode string
	bind        netip.AddrPort
	// controlHost is control='s host name ("" for an address), which the
	// conductor resolves again when the endpoint has heard nothing for
	// the destination timeout (lastActivityNs, the receiver's: data,
	// SETUP, RTT measurements); resolvedControl is the conductor's view
	// of the control address, control the receiver's
	controlHost      string
	lastActivityNs   atomic.Int64
	resolvedControl  netip.AddrPort
	controlResolving bool
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
	// ts: where media-rcv-ts-offset and channel-rcv-ts-offset put the
	// medium's and the driver's receive timestamps in a data frame
	// (timestamps.go); fixed at creation
	ts             tsOffsets
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
	e := &receiveEndpoint{key: key, t: t, statusID: -1, localAddrID: -1, receiverID: rand.Int64(), pendingSetup: map[[2]int32]int64{}, lastControlNs: map[int32]int64{}, creating: map[[2]int32]int64{}, batch: make([][]byte, 1), ts: tsOffsets{tsNone, tsNone, tsNone}}
	e.recvFn = e.onDatagram
	return e
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
		if s.matches(streamID, sessionID) {
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
		// counted and in the distinct error log, as the C receiver does
		r.c.recordError(cnc.ErrorCodeGenericError, fmt.Sprintf("%s: send to %s: %v", e.channel, dest, sendCause(err)))
	}
	e.batch[0] = nil
}

// onDatagram is the receive path (aeron_receive_channel_endpoint_dispatch,
// aeron_data_packet_dispatcher): anything malformed is dropped and counted
// as an invalid packet.
func (e *receiveEndpoint) onDatagram(t Transport, buf []byte, from netip.AddrPort, mediaTimestampNs int64) {
	r := e.r
	r.sys[sysBytesReceived].Add(int64(len(buf)))
	if e.controlHost != "" {
		// what keeps a named control address from being resolved again
		// (aeron_receive_destination_update_last_activity_ns)
		e.lastActivityNs.Store(r.nowNs)
	}
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
		if mediaTimestampNs != 0 && tsEnabled(e.ts.mediaRcv) {
			setTimestamp(buf, e.ts.mediaRcv, mediaTimestampNs)
		}
		if tsEnabled(e.ts.channelRcv) {
			setTimestamp(buf, e.ts.channelRcv, time.Now().UnixNano())
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

// setTimestamp writes ts into the first frame of a received datagram, if
// that frame begins a message (aeron_timestamps_set_timestamp: DATA, begin
// flag, not a heartbeat): into its reserved value, or at offset into its
// payload when both the datagram and the frame have room for 8 bytes
// there. Other frames of the datagram keep what the publisher wrote.
func setTimestamp(buf []byte, offset int32, ts int64) {
	var fh protocol.FrameHeader
	if len(buf) < protocol.DataHeaderLength || fh.Decode(buf) != nil || fh.Type != protocol.TypeData ||
		fh.Flags&protocol.FlagBegin == 0 || fh.FrameLength == 0 {
		return
	}
	if offset == tsReserved {
		binary.LittleEndian.PutUint64(buf[24:], uint64(ts))
		return
	}
	if offset < 0 {
		return
	}
	at := protocol.DataHeaderLength + int(offset)
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
		if sub.matches(s.StreamID, s.SessionID) {
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
	for _, d := range e.dests {
		d.freeCounter(c)
	}
	for _, id := range []int32{e.statusID, e.localAddrID} {
		if id >= 0 {
			_ = c.counters.Free(id)
		}
	}
	e.statusID, e.localAddrID = -1, -1
}

// reresolveControl resolves again the host name of a subscription's
// control= when the endpoint heard nothing for the destination timeout
// (aeron_receive_channel_endpoint_check_for_re_resolution); a new address
// is where the receiver sends from then on, counted in system counter 25.
func (c *conductor) reresolveControl(e *receiveEndpoint) {
	if e.controlHost == "" || e.closed || e.controlResolving || c.nowNs-e.lastActivityNs.Load() <= reresolveAfterNs {
		return
	}
	e.controlResolving = true
	e.lastActivityNs.Store(c.nowNs) // once per timeout, as C
	c.opens.resolve(e.controlHost, func(a netip.Addr, err error) {
		e.controlResolving = false
		if e.closed {
			return
		}
		if err != nil {
			c.recordError(cnc.ErrorCodeUnknownHost, fmt.Sprintf("%s: re-resolve control: Unresolved - control=%s: %v", e.channel, e.controlHost, err))
			return
		}
		to := netip.AddrPortFrom(a, e.resolvedControl.Port())
		if to == e.resolvedControl {
			return
		}
		fmt.Fprintf(c.log, "receive endpoint %s: control %s now resolves to %s (was %s)\n", e.channel, e.controlHost, to, e.resolvedControl)
		e.resolvedControl = to
		r := c.recv
		c.receiverProxy.offer(func() {
			e.control = to
			clear(e.lastControlNs) // ask the new address for SETUP at once
			r.sys[sysResolutionChanges].Add(1)
		})
	})
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
