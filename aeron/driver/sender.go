package driver

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// Sender timings of the C driver (aeron_network_publication.h,
// aeron_retransmit_handler.h).
const (
	setupTimeoutNs          = 100_000_000 // AERON_NETWORK_PUBLICATION_SETUP_TIMEOUT_NS
	heartbeatTimeoutNs      = 100_000_000 // AERON_NETWORK_PUBLICATION_HEARTBEAT_TIMEOUT_NS
	retransmitUnicastLinger = 10_000_000  // AERON_RETRANSMIT_UNICAST_LINGER
	maxDatagramsPerSendDuty = 16
	controlPollPerDuty      = 16
)

// networkPublication is a publication on a network medium
// (aeron_network_publication.c): its log, and the sender's duty over it
// (SETUP until a status message arrives, data within the flow-control
// limit, heartbeats, retransmits from NAKs, EOS). Owned by the conductor
// goroutine, which runs the sender duty too (SHARED-style scheduling).
type networkPublication struct {
	regID               int64
	sessionID, streamID int32
	channel             string
	exclusive           bool
	params              ipcParams
	state               pubState
	refCount            int

	t    Transport
	dest netip.AddrPort
	fc   flowControl // unicast max until addNetworkPublication picks the channel's

	log                 *logbuffer.LogBuffer
	logFile             string
	logLength           int64
	termLength          int64
	positionBitsToShift int
	initialTermID       int32
	termWindow          int64

	pubLmtID, pubPosID, sndPosID, sndLmtID int32
	pubLmt, pubPos, sndPos, sndLmt         *atomic.Int64

	senderPosition  int64
	senderLimit     int64
	cleanPosition   int64
	tripLimit       int64
	lastSendNs      int64
	lastSetupNs     int64
	lastSMNs        int64
	shouldSendSetup bool
	hasReceivers    bool
	connected       bool
	endOfStream     bool
	lingerDeadline  int64
	drainSince      int64

	rtx       retransmitHandler // one action for unicast; addNetworkPublication gives multicast a pool
	group     bool              // group semantics (multicast): the SETUP says so
	ttl       int32             // multicast ttl=, in SETUP
	sendBatch [][]byte
	ctl       [protocol.SetupHeaderLength]byte
	hb        [protocol.DataHeaderLength]byte
	recvFn    RecvFunc
	c         *conductor
}

func newNetworkPublication(c *conductor, cl *clientSession, regID int64, streamID int32, channel string, exclusive bool,
	params ipcParams, t Transport, dest netip.AddrPort) (*networkPublication, error) {
	log, path, err := c.createPublicationLog(regID, params.termLength)
	if err != nil {
		return nil, err
	}
	window := c.cfg.PublicationTermWindow
	if window <= 0 || window > params.termLength/2 {
		window = params.termLength / 2
	}
	p := &networkPublication{regID: regID, sessionID: params.sessionID, streamID: streamID, channel: channel, exclusive: exclusive,
		params: params, t: t, dest: dest, log: log, logFile: path, logLength: int64(len(log.Bytes())), termLength: int64(params.termLength),
		positionBitsToShift: logbuffer.PositionBitsToShift(int32(params.termLength)), initialTermID: rand.Int32(),
		termWindow: int64(window), pubLmtID: -1, pubPosID: -1, sndPosID: -1, sndLmtID: -1, shouldSendSetup: true, c: c,
		sendBatch: make([][]byte, 0, maxDatagramsPerSendDuty), fc: &maxFlowControl{multiple: unicastFlowControlRetransmitMultiple},
		rtx: newRetransmitHandler(false)}
	p.recvFn = p.onControl
	if params.hasPosition {
		p.initialTermID = params.initialTermID
	}
	m := log.Metadata()
	start := c.initPublicationMetadata(m, regID, p.sessionID, streamID, p.initialTermID, p.termWindow, p.positionBitsToShift, params)
	p.senderPosition, p.senderLimit, p.cleanPosition, p.tripLimit = start, start, start, start
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
	} {
		if err := alloc(a.typeID, a.name, a.dst); err != nil {
			p.close(c)
			return nil, err
		}
	}
	c.counters.SetOwnerID(p.pubLmtID, cl.id)
	p.pubPos, p.pubLmt = c.counters.Value(p.pubPosID), c.counters.Value(p.pubLmtID)
	p.sndPos, p.sndLmt = c.counters.Value(p.sndPosID), c.counters.Value(p.sndLmtID)
	for _, v := range []*atomic.Int64{p.pubPos, p.pubLmt, p.sndPos, p.sndLmt} {
		v.Store(start)
	}
	p.lastSetupNs = c.nowNs - setupTimeoutNs
	c.sys[sysBytesMapped].Add(p.logLength)
	return p, nil
}

func (p *networkPublication) producerPosition() int64 {
	raw := p.log.Metadata().RawTailActive()
	off := min(raw&0xFFFF_FFFF, p.termLength)
	return logbuffer.ComputeTermBeginPosition(logbuffer.TermID(raw), p.positionBitsToShift, p.initialTermID) + off
}

// update is the conductor side (aeron_network_publication_update_pub_pos_and_lmt
// and on_time_event): limits, cleaning, connection timeout, lifecycle.
func (p *networkPublication) update(c *conductor) int {
	work := 0
	switch p.state {
	case pubDone:
		return 0
	case pubLinger:
		work += p.send(c)
		if c.nowNs >= p.lingerDeadline {
			p.close(c)
		}
		return work
	}
	work += p.send(c)
	p.pubPos.Store(p.producerPosition())
	if p.connected && c.nowNs-p.lastSMNs > c.cfg.PublicationConnTimeout.Nanoseconds() {
		p.connected = false
		p.log.Metadata().SetIsConnected(false)
		fmt.Fprintf(c.log, "publication %d: no status message for %v, not connected\n", p.regID, c.cfg.PublicationConnTimeout)
	}
	if p.connected {
		if limit := p.senderPosition + p.termWindow; limit >= p.tripLimit && p.state == pubActive {
			p.clean(p.senderPosition - p.termLength)
			p.pubLmt.Store(limit)
			p.tripLimit = limit + p.termWindow/8
			work++
		}
	} else if lmt := p.pubLmt.Load(); lmt > p.senderPosition {
		p.pubLmt.Store(p.senderPosition)
		p.tripLimit = p.senderPosition
	}
	if p.state == pubDraining {
		// Drained once everything written was sent, or nobody listens
		// (after the unblock timeout nothing will make progress).
		if p.senderPosition >= p.producerPosition() || !p.connected ||
			c.nowNs-p.drainSince > c.cfg.PublicationUnblockTimeout.Nanoseconds() {
			p.state = pubLinger
			p.endOfStream = true
			p.lingerDeadline = c.nowNs + p.params.linger
			p.lastSendNs = c.nowNs - heartbeatTimeoutNs // send the EOS heartbeat now
			work++
		}
	}
	return work
}

func (p *networkPublication) clean(position int64) {
	for position > p.cleanPosition {
		idx := logbuffer.IndexByPosition(p.cleanPosition, p.positionBitsToShift)
		term := p.log.Term(idx)
		off := p.cleanPosition & (p.termLength - 1)
		n := min(position-p.cleanPosition, p.termLength-off)
		clear(term[off : off+n])
		p.cleanPosition += n
	}
}

// send is the sender duty for this publication (aeron_network_publication_send):
// control frames first, then SETUP, data within the sender limit, heartbeat.
func (p *networkPublication) send(c *conductor) int {
	work, _ := p.t.Recv(controlPollPerDuty, p.recvFn)
	if p.shouldSendSetup && c.nowNs-p.lastSetupNs >= setupTimeoutNs {
		p.sendSetup(c)
		work++
	}
	sent := 0
	if p.hasReceivers && !p.endOfStream {
		sent = p.sendData(c)
		work += sent
	}
	if sent == 0 && p.hasReceivers && c.nowNs-p.lastSendNs >= heartbeatTimeoutNs {
		p.sendHeartbeat(c)
		work++
	}
	if sent == 0 {
		p.flowControlIdle(c)
	}
	p.rtx.processTimeouts(c.nowNs)
	return work
}

func (p *networkPublication) sendSetup(c *conductor) {
	termID := logbuffer.ComputeTermIDFromPosition(p.senderPosition, p.positionBitsToShift, p.initialTermID)
	s := protocol.Setup{TermOffset: logbuffer.ComputeTermOffsetFromPosition(p.senderPosition, p.positionBitsToShift),
		SessionID: p.sessionID, StreamID: p.streamID, InitialTermID: p.initialTermID, ActiveTermID: termID,
		TermLength: int32(p.termLength), MTU: int32(p.params.mtu), TTL: p.ttl}
	if p.group {
		s.Flags = protocol.SetupFlagGroup
	}
	n, _ := s.Encode(p.ctl[:])
	p.sendOne(c, p.ctl[:n])
	p.setSenderLimit(p.fc.onSetup(c.nowNs, p.senderLimit))
	p.lastSetupNs = c.nowNs
	p.lastSendNs = c.nowNs
}

func (p *networkPublication) sendHeartbeat(c *conductor) {
	h := protocol.DataHeader{FrameHeader: protocol.FrameHeader{Type: protocol.TypeData, Flags: protocol.FlagsUnfragmented},
		TermOffset: logbuffer.ComputeTermOffsetFromPosition(p.senderPosition, p.positionBitsToShift),
		SessionID:  p.sessionID, StreamID: p.streamID,
		TermID: logbuffer.ComputeTermIDFromPosition(p.senderPosition, p.positionBitsToShift, p.initialTermID)}
	if p.endOfStream {
		h.Flags = protocol.FlagsHeartbeatEOS
	}
	n, _ := h.Encode(p.hb[:])
	p.sendOne(c, p.hb[:n])
	p.lastSendNs = c.nowNs
}

func (p *networkPublication) sendOne(c *conductor, b []byte) {
	p.sendBatch = append(p.sendBatch[:0], b)
	if _, err := p.t.Send(p.dest, p.sendBatch); err != nil {
		c.sys[sysErrors].Add(1)
	} else {
		c.sys[sysBytesSent].Add(int64(len(b)))
	}
	p.sendBatch[0] = nil
}

// sendData sends up to maxDatagramsPerSendDuty datagrams of whole frames
// from the sender position, within the sender limit
// (aeron_network_publication_send_data).
func (p *networkPublication) sendData(c *conductor) int {
	sent := 0
	for sent < maxDatagramsPerSendDuty {
		avail := p.senderLimit - p.senderPosition
		if avail <= 0 {
			break
		}
		idx := logbuffer.IndexByPosition(p.senderPosition, p.positionBitsToShift)
		off := int32(p.senderPosition & (p.termLength - 1))
		n, pad := logbuffer.ScanForAvailability(p.log.Term(idx), off, int32(min(avail, int64(p.params.mtu))))
		if n <= 0 {
			break
		}
		p.sendOne(c, p.log.Term(idx)[off:off+n])
		p.senderPosition += int64(n + pad)
		sent++
	}
	if sent > 0 {
		p.sndPos.Store(p.senderPosition)
		p.lastSendNs = c.nowNs
	}
	return sent
}

// onControl handles a frame from a receiver (aeron_send_channel_endpoint
// on_status_message / on_nak / on_rttm). Malformed frames are dropped and
// counted.
func (p *networkPublication) onControl(_ Transport, buf []byte, from netip.AddrPort, _ int64) {
	c := p.c
	var fh protocol.FrameHeader
	if err := fh.Decode(buf); err != nil || fh.Version != protocol.CurrentVersion || int(fh.FrameLength) > len(buf) {
		c.sys[sysInvalidPackets].Add(1)
		return
	}
	switch fh.Type {
	case protocol.TypeStatusMessage:
		var sm protocol.StatusMessage
		if sm.Decode(buf) != nil {
			c.sys[sysInvalidPackets].Add(1)
			return
		}
		if sm.SessionID != p.sessionID || sm.StreamID != p.streamID {
			return
		}
		c.sys[sysStatusMessagesReceived].Add(1)
		if sm.Flags&protocol.SMFlagSetup != 0 {
			p.fc.onTriggerSendSetup(&sm)
			p.shouldSendSetup = true
			p.lastSetupNs = c.nowNs - setupTimeoutNs
			return
		}
		p.onStatusMessage(c, &sm)
	case protocol.TypeNak:
		var nak protocol.Nak
		if nak.Decode(buf) != nil {
			c.sys[sysInvalidPackets].Add(1)
			return
		}
		if nak.SessionID != p.sessionID || nak.StreamID != p.streamID {
			return
		}
		c.sys[sysNaksReceived].Add(1)
		p.onNak(c, nak.TermID, nak.TermOffset, nak.Length)
	case protocol.TypeRTTM:
		var r protocol.RTTMeasurement
		if r.Decode(buf) != nil {
			c.sys[sysInvalidPackets].Add(1)
			return
		}
		if r.SessionID != p.sessionID || r.StreamID != p.streamID || r.Flags&protocol.RTTMFlagReply == 0 {
			return
		}
		reply := protocol.RTTMeasurement{SessionID: p.sessionID, StreamID: p.streamID, EchoTimestamp: r.EchoTimestamp, ReceiverID: r.ReceiverID}
		n, _ := reply.Encode(p.ctl[:])
		p.sendOne(c, p.ctl[:n])
	case protocol.TypeError, protocol.TypeResponseSetup:
		// not acted on yet (response channels and image rejection)
	default:
		c.sys[sysInvalidPackets].Add(1)
	}
}

// onNak resends the requested range at once, then lingers on it so that
// duplicate NAKs are absorbed (aeron_retransmit_handler_on_nak with no
// retransmit delay; see retransmitHandler).
func (p *networkPublication) onNak(c *conductor, termID, termOffset, length int32) {
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
	length = int32(min(p.fc.maxRetransmissionLength(int64(termOffset), int64(length), p.termLength, p.receiverWindow(c)), p.senderPosition-pos))
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

func (p *networkPublication) startDraining(c *conductor) {
	p.state = pubDraining
	p.drainSince = c.nowNs
	p.log.Metadata().SetEndOfStreamPosition(p.producerPosition())
}

func (p *networkPublication) close(c *conductor) {
	if p.state == pubDone {
		return
	}
	if p.fc != nil {
		p.fc.close(c)
	}
	for _, id := range []int32{p.pubLmtID, p.pubPosID, p.sndPosID, p.sndLmtID} {
		if id >= 0 {
			_ = c.counters.Free(id)
		}
	}
	if p.t != nil {
		_ = p.t.Close()
	}
	if p.log != nil {
		p.log.Metadata().SetIsConnected(false)
		c.sys[sysBytesMapped].Add(-p.logLength)
		_ = p.log.Close()
		_ = os.Remove(p.logFile)
	}
	p.state = pubDone
}
