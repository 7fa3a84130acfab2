package driver

import (
	"errors"
	"syscall"

	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
)

// networkPublication is a publication on a network medium
// (aeron_network_publication.c): its log, and the sender's duty over it
// (SETUP until a status message arrives, data within the flow-control
// limit, heartbeats, retransmits from NAKs, EOS). The conductor owns its
// lifecycle, limits and cleaning (update); the sender agent owns the send
// duty (send and what it calls). What both touch is atomic.
type networkPublication struct {
	regID               int64
	sessionID, streamID int32
	channel             string
	// canonical names the send endpoint (canonicalSendChannel): what
	// non-exclusive publications of a stream are matched by
	canonical string
	exclusive bool
	params    ipcParams
	state     pubState
	refCount  int
	// isResponse: a response publication (control-mode=response, fixed
	// before the sender has it); it sends only to respDest, the sender
	// of the first status message asking for SETUP (the sender's)
	isResponse bool
	respDest   netip.AddrPort
	// revoked: a client removed it with the revoke flag; set by the
	// conductor, read by the sender (the heartbeats' REVOKED flag)
	revoked atomic.Bool
	// responseConnected: the conductor was told this publication has a
	// receiver (onResponseConnected), once (the sender's)
	responseConnected bool

	// ep is the send channel endpoint the publication sends through
	// (shared, sendendpoint.go)
	ep *sendEndpoint
	// unregister releases the log's registration with the endpoint's
	// device (MemoryRegistrar); nil when the transport copies every
	// frame. The sender's: it registers and releases the log, since the
	// transport may be in use for other publications meanwhile.
	unregister func() error
	dest       netip.AddrPort
	media      uri.Media
	// fc is unicast max until addNetworkPublication picks the channel's
	// strategy, before the sender gets the publication; then the sender's.
	fc flowControl

	// aeron-spy: subscribers (conductor), tethered or not; the sender
	// reads the positions of those not resting for
	// spies-simulate-connection
	spies subscribable

	log                 *logbuffer.LogBuffer
	logFile             string
	logLength           int64
	termLength          int64
	positionBitsToShift int
	initialTermID       int32
	termWindow          int64

	pubLmtID, pubPosID, sndPosID, sndLmtID, sndBPEID int32
	pubLmt, pubPos, sndPos, sndLmt, sndBPE           *atomic.Int64

	// conductor
	handed        bool
	cleanPosition int64
	tripLimit     int64
	// when the publication entered its state (time_of_last_activity_ns
	// of DRAINING and LINGER)
	stateSinceNs int64
	// the non-exclusive publication's watch over snd-pos for a claim
	// never committed
	blocked blockedCheck
	hw      logbuffer.HeaderWriter
	// last untethered spy check (every timer interval)
	lastTetherCheckNs int64
	// the conductor's last view of hasReceivers, to log its changes
	wasLive bool

	// shared: the sender derives hasReceivers from its receiver liveness
	// tracker and requiredReceivers from the flow control strategy; the
	// conductor derives connected from both and the spies, and sets
	// endOfStream once the sender caught up with a closed publication;
	// receivedUnicastEOS says the one unicast receiver went away (an SM
	// with the EOS flag), which ends the linger; released says the sender
	// dropped the publication.
	hasReceivers       atomic.Bool
	requiredReceivers  atomic.Bool
	connected          atomic.Bool
	endOfStream        atomic.Bool
	receivedUnicastEOS atomic.Bool
	released           atomic.Bool

	// sender (senderPosition is published through snd-pos)
	senderPosition int64
	senderLimit    int64
	// trackSenderLimits: the next time the sender finds the flow control
	// limit in its way counts as a back-pressure event (snd-bpe and system
	// counter 18), once until data goes again
	trackSenderLimits bool
	lastSendNs        int64 // the last data or heartbeat, never a SETUP
	lastSetupNs       int64
	shouldSendSetup   bool
	eosSent           bool
	// receivers: receiver id -> last status message (the C driver's
	// receiver_liveness_tracker); a receiver leaves with an EOS SM or
	// after connTimeoutNs without one
	receivers     map[int64]int64
	connTimeoutNs int64
	// hasInitialConnection: a status message came once; heartbeats go
	// from then on, receivers or not, so that a receiver that timed out
	// can elicit a SETUP again
	hasInitialConnection bool
	// AERON_SPIES_SIMULATE_CONNECTION, fixed at creation
	simulateConnection bool

	rtx       retransmitHandler // one action for unicast; addNetworkPublication gives multicast a pool
	group     bool              // group semantics (multicast): the SETUP says so
	ttl       int32             // multicast ttl=, in SETUP
	rcvWindow int64             // the receiver window retransmit lengths are capped in
	sendBatch [][]byte
	// sendAdvance[i] is how far datagram i of sendBatch moves the sender
	// position (its frames and a trailing term padding)
	sendAdvance [maxDatagramsPerSendDuty]int64
	ctl         [protocol.SetupHeaderLength]byte
	hb          [protocol.DataHeaderLength]byte
	s           *sender
}

// handToSender gives the publication to the sender agent (its endpoint
// is the sender's already).
func (p *networkPublication) handToSender(c *conductor) {
	p.handed = true
	snd := c.snd
	c.senderProxy.offer(func() { snd.onAddPublication(p) })
}

// registerLog registers the publication's log with the transport's device
// so that frames go out straight from the term buffers (MemoryRegistrar).
//
// A posted send must never read bytes the conductor has cleaned since
// (the publisher writes only cleaned bytes, so cleaning is the one
// hazard). clean() zeroes position x only once snd-pos > x + termLength.
// A send is posted from position x >= S - termLength/2 - maxMessage >= S -
// 5/8 termLength (a retransmit, onNak's bound; fresh data has x = S) when
// the sender position is S, so it is safe until the sender advances 3/8
// termLength past S. While it is outstanding, the transport posts at most
// max(maxInFlight, mtu) <= termLength/8 bytes from the log (mtu <=
// termLength/8 is checked by addNetworkPublication); the sender advances
// by what it posts plus padding, and at most one padding frame (<
// maxMessage + headers, about termLength/8) fits in any span shorter than
// a term. So the sender moves at most about termLength/4 < 3/8 termLength
// before the send completes. (A spy-simulated jump of the sender position
// happens only after the connection timeout without status messages, long
// after a datagram send completed.)
func (p *networkPublication) registerLog(s *sender, r MemoryRegistrar) {
	rel, err := r.RegisterMemory(p.log.Bytes(), int(p.termLength/16))
	if err != nil {
		if s.report != nil {
			s.report(cnc.ErrorCodeGenericError, fmt.Sprintf("%s: term buffers not registered, frames are copied: %v", p.channel, err))
		}
		return
	}
	p.unregister = rel
}

func newNetworkPublication(c *conductor, cl *clientSession, regID int64, streamID int32, channel string, exclusive bool,
	params ipcParams, dest netip.AddrPort) (*networkPublication, error) {
	log, path, err := c.createPublicationLog(regID, params.termLength, params.sparse)
	if err != nil {
		return nil, err
	}
	window := params.termWindow(c.cfg.PublicationTermWindow)
	p := &networkPublication{regID: regID, sessionID: params.sessionID, streamID: streamID, channel: channel, exclusive: exclusive,
		params: params, dest: dest, log: log, logFile: path, logLength: int64(len(log.Bytes())), termLength: int64(params.termLength),
		positionBitsToShift: logbuffer.PositionBitsToShift(int32(params.termLength)), initialTermID: rand.Int32(),
		termWindow: int64(window), pubLmtID: -1, pubPosID: -1, sndPosID: -1, sndLmtID: -1, sndBPEID: -1, shouldSendSetup: true, trackSenderLimits: true,
		simulateConnection: params.ssc,
		receivers:          map[int64]int64{}, connTimeoutNs: c.cfg.PublicationConnTimeout.Nanoseconds(),
		sendBatch: make([][]byte, 0, maxDatagramsPerSendDuty),
		fc:        &maxFlowControl{multiple: unicastFlowControlRetransmitMultiple}, rtx: newRetransmitHandler(false, 1),
		rcvWindow: min(int64(params.termLength)/2, int64(c.cfg.InitialWindowLength))}
	// spies read the publication's own log; C passes "aeron:ipc" as the
	// source identity
	p.spies.image = cnc.ImageReady{CorrelationID: regID, SessionID: p.sessionID, StreamID: streamID, LogFile: path, SourceIdentity: "aeron:ipc"}
	if params.hasPosition {
		p.initialTermID = params.initialTermID
	}
	m := log.Metadata()
	start := c.initPublicationMetadata(m, regID, p.sessionID, streamID, p.initialTermID, p.termWindow, p.positionBitsToShift, params)
	p.senderPosition, p.senderLimit, p.cleanPosition, p.tripLimit = start, start, start, start
	p.blocked = blockedCheck{lastPos: start, lastMoved: c.nowNs}
	if p.hw, err = logbuffer.NewHeaderWriter(m.DefaultFrameHeader()); err != nil {
		p.close(c)
		return nil, err
	}
	key := streamKey(c.keyBuf, regID, p.sessionID, streamID, channel)
	alloc := func(typeID int32, name string, dst *int32) error {
		id, err := c.counters.Allocate(typeID, key, streamLabel(name, regID, p.sessionID, streamID, channel, ""))
		if err != nil {
			return fail(cnc.ErrorCodeGenericError, "%v", err)
		}
		c.counters.SetRegistrationID(id, regID)
		*dst = id
		return nil
	}
	for _, a := range []struct {
		typeID int32
		name   string
		dst    *int32
	}{
		{cnc.TypePublisherPosition, "pub-pos (sampled)", &p.pubPosID},
		{cnc.TypePublisherLimit, "pub-lmt", &p.pubLmtID},
		{cnc.TypeSenderPosition, "snd-pos", &p.sndPosID},
		{cnc.TypeSenderLimit, "snd-lmt", &p.sndLmtID},
		{cnc.TypeSenderBPE, "snd-bpe", &p.sndBPEID},
	} {
		if err := alloc(a.typeID, a.name, a.dst); err != nil {
			p.close(c)
			return nil, err
		}
	}
	c.counters.SetOwnerID(p.pubLmtID, cl.id)
	p.pubPos, p.pubLmt = c.counters.Value(p.pubPosID), c.counters.Value(p.pubLmtID)
	p.sndPos, p.sndLmt, p.sndBPE = c.counters.Value(p.sndPosID), c.counters.Value(p.sndLmtID), c.counters.Value(p.sndBPEID)
	for _, v := range []*atomic.Int64{p.pubPos, p.pubLmt, p.sndPos, p.sndLmt} {
		v.Store(start)
	}
	c.sys[sysBytesMapped].Add(p.logLength)
	return p, nil
}

func (p *networkPublication) producerPosition() int64 {
	raw := p.log.Metadata().RawTailActive()
	off := min(raw&0xFFFF_FFFF, p.termLength)
	return logbuffer.ComputeTermBeginPosition(logbuffer.TermID(raw), p.positionBitsToShift, p.initialTermID) + off
}

// update is the conductor side (aeron_network_publication_update_pub_pos_and_lmt
// and on_time_event): limits, cleaning and the lifecycle. The sender
// position is read from snd-pos, which the sender publishes.
func (p *networkPublication) update(c *conductor) int {
	switch p.state {
	case pubActive:
		return p.updateActive(c)
	case pubDraining:
		return p.updateDraining(c)
	case pubLinger:
		return p.updateLinger(c)
	}
	return 0
}

// hasSubscribers is aeron_network_publication_has_subscribers: live
// receivers that satisfy the flow control strategy, or spies that simulate
// a connection.
func (p *networkPublication) hasSubscribers() bool {
	return (p.hasReceivers.Load() && p.requiredReceivers.Load()) || (p.simulateConnection && p.spies.working())
}

// setConnected is aeron_network_publication_update_connected_status;
// only the conductor calls it.
func (p *networkPublication) setConnected(v bool) {
	if p.connected.Load() != v {
		p.connected.Store(v)
		p.log.Metadata().SetIsConnected(v)
	}
}

// updateActive: the limit follows the slowest of the sender and the spies
// that are not resting (spies alone count when they simulate a
// connection); a non-exclusive publication is unblocked when a client
// abandoned a claim.
func (p *networkPublication) updateActive(c *conductor) int {
	if p.revoked.Load() {
		return p.revokeNow(c)
	}
	work := 0
	senderPosition := p.sndPos.Load()
	producer := p.producerPosition()
	p.pubPos.Store(producer)
	if live := p.hasReceivers.Load(); live != p.wasLive {
		p.wasLive = live
		if !live {
			fmt.Fprintf(c.log, "publication %d: no receiver sent a status message for %v, not connected\n", p.regID, c.cfg.PublicationConnTimeout)
		}
	}
	if len(p.spies.positions) > 0 && c.nowNs-p.lastTetherCheckNs >= c.cfg.TimerInterval.Nanoseconds() {
		p.lastTetherCheckNs = c.nowNs
		p.checkUntetheredSpies(c, senderPosition)
	}
	if p.hasSubscribers() {
		p.setConnected(true)
		minConsumer := p.spies.slowest(senderPosition)
		if limit := minConsumer + p.termWindow; limit >= p.tripLimit {
			p.clean(minConsumer - p.termLength)
			p.pubLmt.Store(limit)
			p.tripLimit = limit + p.termWindow/8
			work++
		}
	} else {
		p.setConnected(false)
		if lmt := p.pubLmt.Load(); lmt > senderPosition {
			p.pubLmt.Store(senderPosition)
			p.tripLimit = senderPosition
			work++
		}
	}
	if !p.exclusive && p.blocked.due(c.nowNs, c.cfg.PublicationUnblockTimeout.Nanoseconds(),
		possiblyBlocked(p.log, p.positionBitsToShift, producer, senderPosition), senderPosition) {
		if unblockLog(p.log, &p.hw, p.termLength, p.positionBitsToShift, senderPosition) {
			c.sys[sysUnblockedPublications].Add(1)
			fmt.Fprintf(c.log, "publication %d: unblocked an abandoned claim at position %d\n", p.regID, senderPosition)
			work++
		}
	}
	return work
}

// updateDraining: the last client let go. The publication stays here while
// the sender is behind the producer and receivers are live (an abandoned
// claim is unblocked first); once the sender caught up it signals end of
// stream. It lingers when the spies read everything too; if it got there
// with bytes unsent (every receiver went away), that is counted and logged.
func (p *networkPublication) updateDraining(c *conductor) int {
	producer := p.producerPosition()
	p.pubPos.Store(producer)
	sender := p.sndPos.Load()
	if producer > sender {
		if unblockLog(p.log, &p.hw, p.termLength, p.positionBitsToShift, sender) {
			c.sys[sysUnblockedPublications].Add(1)
			return 1
		}
		if p.hasReceivers.Load() {
			return 0
		}
	} else {
		p.endOfStream.Store(true)
	}
	if !p.spiesFinished(producer) {
		return 0
	}
	if sender < producer && p.simulateConnection && p.spies.working() {
		// the spies stand in for receivers and read everything: the
		// sender moves snd-pos up to them at its next duty, and then
		// signals end of stream
		return 0
	}
	p.endSpies(c)
	p.state, p.stateSinceNs = pubLinger, c.nowNs
	if sender < producer {
		c.publicationEndedShort(p.regID, p.sessionID, p.streamID, p.channel, sender, producer,
			fmt.Sprintf("no receiver sent a status message for %v", c.cfg.PublicationConnTimeout))
	}
	return 1
}

// updateLinger: EOS heartbeats go out for the linger, which ends early when
// the unicast receiver said it has gone.
func (p *networkPublication) updateLinger(c *conductor) int {
	if p.refCount <= 0 && (p.receivedUnicastEOS.Load() || c.nowNs > p.stateSinceNs+p.params.linger) {
		p.close(c)
		return 1
	}
	return 0
}

// clean zeroes the log one term behind the slowest of the sender and the
// spies (aeron_network_publication_clean_buffer).
func (p *networkPublication) clean(position int64) {
	p.cleanPosition = cleanLog(p.log, p.cleanPosition, position, p.termLength, p.positionBitsToShift)
}

// send is the sender duty for this publication (aeron_network_publication_send):
// control frames first, then SETUP, data within the sender limit, heartbeat.
func (p *networkPublication) send(c *sender) int {
	work := 0
	if p.shouldSendSetup && c.nowNs-p.lastSetupNs >= setupTimeoutNs {
		p.sendSetup(c)
		work++
	}
	sent := 0
	hasReceivers, eos := p.hasReceivers.Load(), p.endOfStream.Load()
	if !hasReceivers && p.simulateConnection && p.spies.hasCounted.Load() {
		// Spies stand in for receivers: the sender position follows the
		// fastest spy (aeron_network_publication_max_spy_position).
		if pos := p.spies.fastestCounted(p.senderPosition); pos > p.senderPosition {
			p.senderPosition = pos
			p.sndPos.Store(pos)
			work++
		}
	}
	if hasReceivers {
		sent = p.sendData(c)
		work += sent
	}
	if eos && !p.eosSent {
		p.eosSent = true
		p.lastSendNs = c.nowNs - heartbeatTimeoutNs // the EOS heartbeat goes now
	}
	if sent == 0 && p.hasInitialConnection && c.nowNs-p.lastSendNs >= heartbeatTimeoutNs {
		p.sendHeartbeat(c)
		work++
	}
	if sent == 0 {
		p.flowControlIdle(c)
		p.expireReceivers(c.nowNs)
	}
	p.rtx.processTimeouts(c.nowNs)
	return work
}

func (p *networkPublication) sendSetup(c *sender) {
	termID := logbuffer.ComputeTermIDFromPosition(p.senderPosition, p.positionBitsToShift, p.initialTermID)
	s := protocol.Setup{TermOffset: logbuffer.ComputeTermOffsetFromPosition(p.senderPosition, p.positionBitsToShift),
		SessionID: p.sessionID, StreamID: p.streamID, InitialTermID: p.initialTermID, ActiveTermID: termID,
		TermLength: int32(p.termLength), MTU: int32(p.params.mtu), TTL: p.ttl}
	if p.group {
		s.Flags = protocol.SetupFlagGroup
	}
	if !p.isResponse && p.params.responseCorrelationID != -1 {
		s.Flags |= protocol.SetupFlagSendResponse // a request publication
	}
	n, _ := s.Encode(p.ctl[:])
	p.sendOne(c, p.ctl[:n])
	p.setSenderLimit(p.fc.onSetup(c.nowNs, p.senderLimit))
	// Only the SETUP timer: a SETUP is not data, and the heartbeat timer
	// counts from the last data or heartbeat, as the C driver's
	// time_of_last_data_or_heartbeat_ns, which
	// aeron_network_publication_setup_message_check leaves alone. So the
	// first duty after the first status message with nothing to send
	// sends a heartbeat, as the C sender does.
	p.lastSetupNs = c.nowNs
}

func (p *networkPublication) sendHeartbeat(c *sender) {
	h := protocol.DataHeader{FrameHeader: protocol.FrameHeader{Type: protocol.TypeData, Flags: protocol.FlagsUnfragmented},
		TermOffset: logbuffer.ComputeTermOffsetFromPosition(p.senderPosition, p.positionBitsToShift),
		SessionID:  p.sessionID, StreamID: p.streamID,
		TermID: logbuffer.ComputeTermIDFromPosition(p.senderPosition, p.positionBitsToShift, p.initialTermID)}
	if p.revoked.Load() {
		// receivers drop the rest of the stream
		// (aeron_network_publication_heartbeat_message_check)
		h.Flags = protocol.FlagsHeartbeatEOS | protocol.FlagRevoked
	} else if p.params.signalEOS && p.endOfStream.Load() {
		// eos=false: the stream ends without telling receivers, whose
		// images then end at the liveness timeout
		// (aeron_network_publication_heartbeat_message_check)
		h.Flags = protocol.FlagsHeartbeatEOS
	}
	n, _ := h.Encode(p.hb[:])
	p.sendOne(c, p.hb[:n])
	c.sys[sysHeartbeatsSent].Add(1)
	p.lastSendNs = c.nowNs
}

func (p *networkPublication) sendOne(c *sender, b []byte) {
	if mdc := p.ep.mdc; mdc != nil {
		// every destination gets every frame (aeron_udp_destination_tracker_send)
		for i := range mdc.dests {
			p.sendTo(c, mdc.dests[i].addr, b)
		}
		return
	}
	if dest := p.unicastDest(); dest.IsValid() {
		p.sendTo(c, dest, b)
	}
}

// stamp writes the send time into the first frame of each datagram, in
// the log, where channel-snd-ts-offset says (aeron_send_channel_apply_timestamps).
func (p *networkPublication) stamp(batch [][]byte) {
	if off := p.ep.sndTS; tsEnabled(off) {
		now := time.Now().UnixNano()
		for _, b := range batch {
			setTimestamp(b, off, now)
		}
	}
}

// unicastDest is where a publication that is not multi-destination-cast
// sends: the endpoint's address, or, for a response publication, the
// response subscription it learnt (none before: nothing is sent,
// aeron_network_publication_do_send).
func (p *networkPublication) unicastDest() netip.AddrPort {
	if p.isResponse {
		return p.respDest
	}
	return p.ep.sendDest
}

func (p *networkPublication) sendTo(c *sender, dest netip.AddrPort, b []byte) {
	p.sendBatch = append(p.sendBatch[:0], b)
	p.stamp(p.sendBatch)
	if _, err := p.ep.t.Send(dest, p.sendBatch); err != nil {
		p.sendFailed(c, dest, err)
	} else {
		c.sys[sysBytesSent].Add(int64(len(b)))
	}
	p.sendBatch[0] = nil
}

// sendFailed counts a failed send and records it in the distinct error
// log, as the C sender does (a link down: "network is unreachable"); the
// log keeps one entry per distinct text, with its count.
func (p *networkPublication) sendFailed(c *sender, dest netip.AddrPort, err error) {
	if c.report == nil {
		c.sys[sysErrors].Add(1)
		return
	}
	c.report(cnc.ErrorCodeGenericError, fmt.Sprintf("%s: send to %s: %v", p.channel, dest, sendCause(err)))
}

// sendCause is what a failed send's log entry says: the errno where there
// is one ("network is unreachable"), so that one cause is one distinct
// entry however the medium's text numbers the datagrams and their sizes
// (a long outage would fill the log with near-copies); else the error.
func sendCause(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// sendData sends up to maxDatagramsPerSendDuty datagrams of whole frames
// from the sender position, within the sender limit, in one Send (one
// sendmmsg on udp) per destination (aeron_network_publication_send_data).
// The position advances past what the transport took: a short send (full
// socket buffer) leaves the rest for the next duty cycle and counts in
// short sends; an error counts and skips the batch, which receivers then
// recover by NAK as they would a loss.
func (p *networkPublication) sendData(c *sender) int {
	batch := p.sendBatch[:0]
	pos := p.senderPosition
	limited := false
	for len(batch) < maxDatagramsPerSendDuty {
		avail := p.senderLimit - pos
		if avail <= 0 {
			limited = len(batch) == 0
			break
		}
		idx := logbuffer.IndexByPosition(pos, p.positionBitsToShift)
		off := int32(pos & (p.termLength - 1))
		n, pad := logbuffer.ScanForAvailability(p.log.Term(idx), off, int32(min(avail, int64(p.params.mtu))))
		if n < 0 {
			limited = true // the next frame does not fit the window
		}
		if n <= 0 {
			break
		}
		p.sendAdvance[len(batch)] = int64(n + pad)
		batch = append(batch, p.log.Term(idx)[off:off+n])
		pos += int64(n + pad)
	}
	if limited && p.trackSenderLimits {
		// back-pressured by flow control (aeron_network_publication_send_data)
		p.sndBPE.Add(1)
		c.sys[sysSenderFlowControlLimits].Add(1)
		p.trackSenderLimits = false
	}
	if len(batch) == 0 {
		return 0
	}
	sent := len(batch)
	if mdc := p.ep.mdc; mdc != nil {
		// every destination gets every frame (aeron_udp_destination_tracker_send)
		for i := range mdc.dests {
			p.sendFrames(c, mdc.dests[i].addr, batch)
		}
	} else {
		if dest := p.unicastDest(); dest.IsValid() {
			sent = p.sendFrames(c, dest, batch)
		}
	}
	for i := range sent {
		p.senderPosition += p.sendAdvance[i]
	}
	clear(batch)
	if sent > 0 {
		p.sndPos.Store(p.senderPosition)
		p.lastSendNs = c.nowNs
		p.trackSenderLimits = true
	}
	return sent
}

// sendFrames sends batch to dest and returns how many datagrams the
// sender may count as gone: all of them after an error (counted), fewer
// on a short send (counted).
func (p *networkPublication) sendFrames(c *sender, dest netip.AddrPort, batch [][]byte) int {
	p.stamp(batch)
	n, err := p.ep.t.Send(dest, batch)
	for _, b := range batch[:n] {
		c.sys[sysBytesSent].Add(int64(len(b)))
	}
	if err != nil {
		p.sendFailed(c, dest, err)
		return len(batch)
	}
	if n < len(batch) {
		c.sys[sysShortSends].Add(1)
	}
	return n
}

// onStatus handles a status message the endpoint dispatched to this
// publication (aeron_network_publication_on_status_message, and
// trigger_send_setup_frame for one asking for SETUP).
func (p *networkPublication) onStatus(c *sender, sm *protocol.StatusMessage) {
	if sm.Flags&protocol.SMFlagSetup != 0 {
		if p.endOfStream.Load() {
			return // a finished stream is not set up again (aeron_network_publication_trigger_send_setup_frame)
		}
		p.fc.onTriggerSendSetup(sm)
		p.shouldSendSetup = true
		p.lastSetupNs = c.nowNs - setupTimeoutNs
		return
	}
	p.onStatusMessage(c, sm)
}

// onErrorFrame: a receiver rejected its image of this publication and
// sends ERR frames instead of status messages
// (aeron_network_publication_on_error): flow control stops waiting for
// it, it leaves the receivers, and, if it was one, the conductor logs it
// and tells clients (ON_PUBLICATION_ERROR).
func (p *networkPublication) onErrorFrame(c *sender, ef *protocol.ErrorFrame, from netip.AddrPort, destRegID int64) {
	p.fc.onError(ef.ReceiverID)
	if _, ok := p.receivers[ef.ReceiverID]; !ok {
		return
	}
	delete(p.receivers, ef.ReceiverID)
	p.hasReceivers.Store(len(p.receivers) > 0)
	if c.toConductor == nil {
		return
	}
	pe := cnc.PublicationError{RegistrationID: p.regID, DestinationRegistrationID: destRegID, SessionID: ef.SessionID,
		StreamID: ef.StreamID, ReceiverID: ef.ReceiverID, GroupTag: -1, ErrorCode: ef.ErrorCode, Message: string(ef.Message), Source: from}
	if ef.Flags&protocol.ErrorFlagGroupTag != 0 {
		pe.GroupTag = ef.GroupTag
	}
	cd := c.conductor
	c.toConductor.tryOffer(func() { cd.onPublicationError(pe) })
}

// onRTTM answers a receiver's RTT measurement request
// (aeron_network_publication_on_rttm): to its sender on a
// multi-destination-cast channel, to the endpoint otherwise.
func (p *networkPublication) onRTTM(c *sender, r *protocol.RTTMeasurement, from netip.AddrPort) {
	reply := protocol.RTTMeasurement{SessionID: p.sessionID, StreamID: p.streamID, EchoTimestamp: r.EchoTimestamp, ReceiverID: r.ReceiverID}
	n, _ := reply.Encode(p.ctl[:])
	if p.ep.mdc != nil {
		p.sendTo(c, from, p.ctl[:n])
	} else {
		p.sendOne(c, p.ctl[:n])
	}
}

// onNak resends the requested range at once, then lingers on it so that
// duplicate NAKs are absorbed (aeron_retransmit_handler_on_nak with no
// retransmit delay; see retransmitHandler).
func (p *networkPublication) onNak(c *sender, termID, termOffset, length int32) {
	if length <= 0 || termOffset < 0 || int64(termOffset) >= p.termLength || termOffset&(logbuffer.FrameAlignment-1) != 0 {
		return
	}
	a, overflow := p.rtx.claim(termID, termOffset)
	if a == nil {
		if overflow {
			c.sys[sysRetransmitOverflow].Add(1)
		}
		return // inside a range resent and lingering, or no action free
	}
	pos := logbuffer.ComputePosition(termID, termOffset, p.positionBitsToShift, p.initialTermID)
	maxMsg := int64(protocol.ComputeMaxMessageLength(int(p.termLength)))
	if pos >= p.senderPosition || pos < p.senderPosition-p.termLength/2-maxMsg {
		p.rtx.linger(a, termID, termOffset, 0, c.nowNs) // nothing resent: free at the next timeout pass
		return
	}
	length = int32(min(p.fc.maxRetransmissionLength(int64(termOffset), int64(length), p.termLength, p.rcvWindow), p.senderPosition-pos))
	term := p.log.Term(logbuffer.IndexByTerm(p.initialTermID, termID))
	off, end := termOffset, termOffset+length
	for off < end {
		n, pad := logbuffer.ScanForAvailability(term, off, min(end-off, int32(p.params.mtu)))
		if n <= 0 {
			break
		}
		p.sendOne(c, term[off:off+n])
		c.sys[sysRetransmittedBytes].Add(int64(n))
		off += n + pad
	}
	p.rtx.linger(a, termID, termOffset, length, c.nowNs+retransmitUnicastLinger)
	c.sys[sysRetransmitsSent].Add(1)
}

// startDraining: the last client let go (the DECREF of
// aeron_network_publication.c). Nothing more can be claimed: pub-lmt and
// the end of stream move to the producer position; a sender already there
// signals end of stream at once.
func (p *networkPublication) startDraining(c *conductor) {
	producer := p.producerPosition()
	p.pubLmt.Store(producer)
	p.log.Metadata().SetEndOfStreamPosition(producer)
	if p.revoked.Load() {
		return // stays ACTIVE: its next update revokes it (C)
	}
	if p.sndPos.Load() >= producer {
		p.endOfStream.Store(true)
	}
	p.state, p.stateSinceNs = pubDraining, c.nowNs
}

// revoke marks the publication revoked, in its log's metadata for the
// clients (the REVOKE event of aeron_network_publication.c).
func (p *networkPublication) revoke() {
	p.revoked.Store(true)
	p.log.Metadata().SetIsPublicationRevoked(true)
}

// revokeNow ends a revoked publication without draining
// (aeron_network_publication_on_time_event, ACTIVE and revoked): the
// limit and the end of stream go to the producer position, it is no
// longer connected, the spies lose their image, and it lingers while its
// heartbeats say EOS and REVOKED; counted in system counter 40.
func (p *networkPublication) revokeNow(c *conductor) int {
	c.endRevoked(p.pubLmt, p.log, p.producerPosition(), p.regID, p.sessionID, p.streamID)
	p.setConnected(false)
	p.endOfStream.Store(true)
	p.endSpies(c)
	p.state, p.stateSinceNs = pubLinger, c.nowNs
	return 1
}

// close takes the publication from the sender and frees its counters; its
// transport and log go once the sender has let go of them.
func (p *networkPublication) close(c *conductor) {
	if p.state == pubDone {
		return
	}
	p.state = pubDone
	p.endSpies(c)
	if p.log != nil {
		p.connected.Store(false)
		p.log.Metadata().SetIsConnected(false)
	}
	free := func() {
		if p.log != nil {
			c.freeLog(p.log, p.logFile, p.logLength)
		}
		for _, id := range []int32{p.pubLmtID, p.pubPosID, p.sndPosID, p.sndLmtID, p.sndBPEID} {
			if id >= 0 {
				_ = c.counters.Free(id)
			}
		}
		if p.fc != nil {
			p.fc.close(c) // fc-receivers, written by the sender until now
		}
	}
	if !p.handed { // never given to the sender
		free()
	} else {
		snd := c.snd
		c.senderProxy.offer(func() { snd.onRemovePublication(p) })
		c.awaitRelease(&p.released, free)
	}
	if p.ep != nil {
		// after the publication's removal in the sender's queue, so the
		// endpoint outlives the publication there
		p.ep.release(c)
	}
}

// addSpy gives spy subscription s an image of the publication's own log,
// joining at the sender position (aeron_driver_conductor_link_subscribable
// with aeron_network_publication_join_position; source identity "aeron:ipc"
// as the C driver passes).
func (p *networkPublication) addSpy(c *conductor, s *subLink) {
	if err := p.spies.link(c, s, p.joinPosition()); err != nil {
		c.recordError(cnc.ErrorCodeGenericError, err.Error())
		return
	}
	if p.simulateConnection && p.state == pubActive {
		p.setConnected(true)
	}
}

// acceptingSubscriptions is aeron_network_publication_is_accepting_subscriptions:
// a spy joins while the publication is active, or draining with spies still
// reading and data not yet sent.
func (p *networkPublication) acceptingSubscriptions() bool {
	return p.state == pubActive ||
		(p.state == pubDraining && p.spies.working() && p.producerPosition() > p.sndPos.Load())
}

// joinPosition is aeron_network_publication_join_position: the sender
// position, or the slowest spy not resting if it is behind.
func (p *networkPublication) joinPosition() int64 { return p.spies.slowest(p.sndPos.Load()) }

func (p *networkPublication) removeSpy(c *conductor, s *subLink) {
	if p.spies.unlink(c, s) {
		p.spyUnconnected()
	}
}

// spiesFinished says every spy not resting read all that was published
// (aeron_network_publication_spies_finished_consuming).
func (p *networkPublication) spiesFinished(end int64) bool { return p.spies.reached(end) }

// endSpies makes the publication's image unavailable to its spies
// (aeron_driver_conductor_cleanup_spies).
func (p *networkPublication) endSpies(c *conductor) { p.spies.release(c) }

// spyUnconnected drops the connection the last simulating spy made.
func (p *networkPublication) spyUnconnected() {
	if p.simulateConnection && p.state == pubActive {
		p.setConnected(p.hasSubscribers())
	}
}

// checkUntetheredSpies runs the untethered state machine over the spies
// (aeron_network_publication_check_untethered_subscriptions): the window
// limit trails the sender position, and a spy rejoins at the sender
// position. A resting spy stops holding the publication back.
func (p *networkPublication) checkUntetheredSpies(c *conductor, senderPosition int64) {
	limit := senderPosition - p.termWindow + p.termWindow/4
	p.spies.checkUntethered(c, "publication "+strconv.FormatInt(p.regID, 10), limit, p.params.untethered(), p.joinPosition)
}
