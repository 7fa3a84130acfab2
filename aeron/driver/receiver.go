package driver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
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
// of the sessions arriving on it. Owned by the conductor goroutine, which
// runs the receiver duty.
type receiveEndpoint struct {
	key string // canonical bind address
	t   Transport
	// control is where a multicast endpoint sends status messages and
	// NAKs (the control group); invalid for unicast, which answers the
	// source of the data.
	control netip.AddrPort
	// groupTag goes into every status message when hasGroupTag (gtag=
	// or AERON_RECEIVER_GROUP_TAG), for tagged flow control.
	groupTag    int64
	hasGroupTag bool
	// reliable false: gaps are filled with padding, never NAKed
	// (reliable= or AERON_RELIABLE_STREAM)
	reliable bool
	// group semantics (group=, multicast by default): NAKs after the
	// optimal multicast backoff instead of the unicast delay
	group          int8 // group=: 1 true, 0 false, -1 infer
	multicastDelay optimalDelay
	subs           []*subLink
	images         []*publicationImage
	c              *conductor
	recvFn         RecvFunc
	// setup elicitation: last time an SM with the SETUP flag went to a
	// session (aeron pending setup entries)
	pendingSetup map[[2]int32]int64
	ctl          [protocol.NakHeaderLength + 16]byte
	batch        [][]byte
}

func newReceiveEndpoint(c *conductor, key string, t Transport) *receiveEndpoint {
	e := &receiveEndpoint{key: key, t: t, c: c, pendingSetup: map[[2]int32]int64{}, batch: make([][]byte, 1)}
	e.recvFn = e.onDatagram
	return e
}

func (e *receiveEndpoint) interested(streamID, sessionID int32) bool {
	for _, s := range e.subs {
		if s.streamID == streamID && (!s.hasSession || s.sessionID == sessionID) {
			return true
		}
	}
	return false
}

func (e *receiveEndpoint) image(sessionID, streamID int32) *publicationImage {
	for _, im := range e.images {
		if im.sessionID == sessionID && im.streamID == streamID && im.state == imageActive {
			return im
		}
	}
	return nil
}

func (e *receiveEndpoint) sendTo(dest netip.AddrPort, b []byte) {
	if e.control.IsValid() {
		dest = e.control
	}
	e.batch[0] = b
	if _, err := e.t.Send(dest, e.batch); err != nil {
		e.c.sys[sysErrors].Add(1)
	}
	e.batch[0] = nil
}

// onDatagram is the receive path (aeron_receive_channel_endpoint_dispatch,
// aeron_data_packet_dispatcher): anything malformed is dropped and counted
// as an invalid packet.
func (e *receiveEndpoint) onDatagram(_ Transport, buf []byte, from netip.AddrPort, _ int64) {
	c := e.c
	c.sys[sysBytesReceived].Add(int64(len(buf)))
	f, err := protocol.NextFrame(buf, 0)
	if err != nil {
		c.sys[sysInvalidPackets].Add(1)
		return
	}
	switch f.Header.Type {
	case protocol.TypeData, protocol.TypePad:
		var h protocol.DataHeader
		if h.Decode(buf) != nil || (f.Header.FrameLength != 0 && len(buf)&(logbuffer.FrameAlignment-1) != 0 && len(buf) != int(f.Header.FrameLength)) {
			c.sys[sysInvalidPackets].Add(1)
			return
		}
		im := e.image(h.SessionID, h.StreamID)
		if im == nil {
			if e.interested(h.StreamID, h.SessionID) {
				e.elicitSetup(h.SessionID, h.StreamID, from)
			}
			return
		}
		im.onData(c, &h, buf, from)
	case protocol.TypeSetup:
		var s protocol.Setup
		if s.Decode(buf) != nil {
			c.sys[sysInvalidPackets].Add(1)
			return
		}
		e.onSetup(&s, from)
	case protocol.TypeRTTM:
		// RTT measurement is only requested by congestion control (cc=cubic),
		// which ibgo does not offer yet; replies are ignored.
	default:
		c.sys[sysInvalidPackets].Add(1)
	}
}

func (e *receiveEndpoint) elicitSetup(sessionID, streamID int32, from netip.AddrPort) {
	k := [2]int32{sessionID, streamID}
	if last, ok := e.pendingSetup[k]; ok && e.c.nowNs-last < pendingSetupTimeoutNs/10 {
		return
	}
	if len(e.pendingSetup) >= maxPendingSetupEndpoints {
		clear(e.pendingSetup)
	}
	e.pendingSetup[k] = e.c.nowNs
	sm := protocol.StatusMessage{FrameHeader: protocol.FrameHeader{Flags: protocol.SMFlagSetup}, SessionID: sessionID, StreamID: streamID}
	n, _ := sm.Encode(e.ctl[:])
	e.sendTo(from, e.ctl[:n])
	e.c.sys[sysStatusMessagesSent].Add(1)
}

func (e *receiveEndpoint) onSetup(s *protocol.Setup, from netip.AddrPort) {
	c := e.c
	if e.image(s.SessionID, s.StreamID) != nil || !e.interested(s.StreamID, s.SessionID) {
		return
	}
	if logbuffer.CheckTermLength(int64(s.TermLength)) != nil || s.MTU < protocol.DataHeaderLength || s.MTU > 65504 ||
		s.TermOffset < 0 || s.TermOffset > s.TermLength || s.TermOffset&(logbuffer.FrameAlignment-1) != 0 {
		c.sys[sysInvalidPackets].Add(1)
		return
	}
	im, err := newPublicationImage(c, e, s, from)
	if err != nil {
		c.recordError(cnc.ErrorCodeGenericError, fmt.Sprintf("image for session %d stream %d from %s: %v", s.SessionID, s.StreamID, from, err))
		return
	}
	im.group = e.imageGroup(s.Flags)
	delete(e.pendingSetup, [2]int32{s.SessionID, s.StreamID})
	e.images = append(e.images, im)
	for _, sub := range e.subs {
		if sub.streamID == s.StreamID && (!sub.hasSession || sub.sessionID == s.SessionID) {
			im.addSubscriber(c, sub)
		}
	}
	im.sendStatus(c) // answer at once: this is what connects the publication
}

// poll is the receiver duty for the endpoint: read datagrams, then per
// image the loss detector, status messages and liveness.
func (e *receiveEndpoint) poll(c *conductor) int {
	work, _ := e.t.Recv(receivePollPerDuty, e.recvFn)
	for i := 0; i < len(e.images); i++ {
		im := e.images[i]
		work += im.duty(c)
		if im.state == imageDone {
			e.images = append(e.images[:i], e.images[i+1:]...)
			i--
		}
	}
	return work
}

func (e *receiveEndpoint) close(c *conductor) {
	for _, im := range e.images {
		im.close(c)
	}
	e.images = nil
	_ = e.t.Close()
}

type imageState int

const (
	imageActive imageState = iota
	imageDone
)

// publicationImage is the receiving side of one remote publication
// (aeron_publication_image.c): the rebuilt log, rcv-hwm and rcv-pos, the
// subscriber positions, the loss detector and the status messages.
type publicationImage struct {
	e                   *receiveEndpoint
	regID               int64
	sessionID, streamID int32
	state               imageState
	source              netip.AddrPort
	sourceIdentity      string

	log                 *logbuffer.LogBuffer
	logFile             string
	logLength           int64
	termLength          int64
	positionBitsToShift int
	initialTermID       int32
	window              int64
	receiverID          int64

	hwmID, rcvPosID int32
	hwm, rcvPos     *atomic.Int64
	subscribers     []*subscriberPosition

	hwmPosition     int64
	rebuildPosition int64
	cleanPosition   int64
	lastPacketNs    int64
	lastSMNs        int64
	lastSMPosition  int64
	eosPosition     int64 // math.MaxInt64 until an EOS heartbeat
	eosSMsLeft      int

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
	group                  bool // group semantics: multicast NAK backoff
	ctl                    [protocol.StatusMessageGroupTagLength]byte
}

func newPublicationImage(c *conductor, e *receiveEndpoint, s *protocol.Setup, from netip.AddrPort) (*publicationImage, error) {
	regID := c.rb.NextCorrelationID()
	path := filepath.Join(c.cfg.Dir, "images", strconv.FormatInt(regID, 10)+".logbuffer")
	log, err := logbuffer.Create(path, s.TermLength, int32(c.cfg.FilePageSize))
	if err != nil {
		return nil, fail(cnc.ErrorCodeStorageSpace, "cannot create log %s: %v", path, err)
	}
	im := &publicationImage{e: e, regID: regID, sessionID: s.SessionID, streamID: s.StreamID, source: from,
		sourceIdentity: from.String(), log: log, logFile: path, logLength: int64(len(log.Bytes())),
		termLength: int64(s.TermLength), positionBitsToShift: logbuffer.PositionBitsToShift(s.TermLength),
		initialTermID: s.InitialTermID, receiverID: rand.Int64(), hwmID: -1, rcvPosID: -1, eosPosition: math.MaxInt64, lossEntry: -1}
	im.window = min(im.termLength/2, int64(c.cfg.InitialWindowLength))
	im.onGap = im.recordGap
	m := log.Metadata()
	m.SetCorrelationID(regID)
	m.SetInitialTermID(s.InitialTermID)
	m.SetMTULength(s.MTU)
	m.SetEndOfStreamPosition(math.MaxInt64)
	m.StoreDefaultDataHeader(s.SessionID, s.StreamID, s.InitialTermID)
	m.SetReceiverWindowLength(int32(im.window))
	join := logbuffer.ComputePosition(s.ActiveTermID, s.TermOffset, im.positionBitsToShift, s.InitialTermID)
	im.hwmPosition, im.rebuildPosition, im.cleanPosition, im.lastSMPosition = join, join, join, join
	channel := "aeron:udp?endpoint=" + e.key
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
	im.lastPacketNs, im.lastSMNs = c.nowNs, c.nowNs
	c.sys[sysBytesMapped].Add(im.logLength)
	fmt.Fprintf(c.log, "image %d: session %d stream %d from %s at position %d\n", regID, s.SessionID, s.StreamID, from, join)
	return im, nil
}

func (im *publicationImage) addSubscriber(c *conductor, s *subLink) {
	join := im.rebuildPosition
	key := streamKey(c.keyBuf, s.regID, im.sessionID, im.streamID, s.channel)
	id, err := c.counters.Allocate(cnc.TypeSubscriberPosition, key, streamLabel("sub-pos", s.regID, im.sessionID, im.streamID, s.channel, "@"+strconv.FormatInt(join, 10)))
	if err != nil {
		c.recordError(cnc.ErrorCodeGenericError, err.Error())
		return
	}
	c.counters.SetRegistrationID(id, s.regID)
	c.counters.SetOwnerID(id, s.client.id)
	c.counters.SetReferenceID(id, im.regID)
	sp := &subscriberPosition{sub: s, id: id, pos: c.counters.Value(id)}
	sp.pos.Store(join)
	im.subscribers = append(im.subscribers, sp)
	c.transmit(cnc.RspOnAvailableImage, cnc.AppendImageReady(c.buf[:0], cnc.ImageReady{
		CorrelationID: im.regID, SessionID: im.sessionID, StreamID: im.streamID, SubscriptionRegistrationID: s.regID,
		SubscriberPositionID: id, LogFile: im.logFile, SourceIdentity: im.sourceIdentity}))
}

func (im *publicationImage) removeSubscriber(c *conductor, s *subLink) {
	for i, sp := range im.subscribers {
		if sp.sub == s {
			_ = c.counters.Free(sp.id)
			im.subscribers = append(im.subscribers[:i], im.subscribers[i+1:]...)
			return
		}
	}
}

// minSubscriberPosition is the consumption position SMs report; without
// subscribers the image is consumed as it is rebuilt.
func (im *publicationImage) minSubscriberPosition() int64 {
	if len(im.subscribers) == 0 {
		return im.rebuildPosition
	}
	pos := int64(math.MaxInt64)
	for _, sp := range im.subscribers {
		pos = min(pos, sp.pos.Load())
	}
	return pos
}

// onData inserts a datagram of frames at its position unless it falls
// outside the window (aeron_publication_image_insert_packet).
func (im *publicationImage) onData(c *conductor, h *protocol.DataHeader, buf []byte, from netip.AddrPort) {
	if h.TermOffset < 0 || int64(h.TermOffset) >= im.termLength || h.TermOffset&(logbuffer.FrameAlignment-1) != 0 ||
		int64(h.TermOffset)+int64(len(buf)) > im.termLength {
		c.sys[sysInvalidPackets].Add(1)
		return
	}
	im.lastPacketNs = c.nowNs
	im.source = from
	pos := logbuffer.ComputePosition(h.TermID, h.TermOffset, im.positionBitsToShift, im.initialTermID)
	if h.IsHeartbeat() {
		c.sys[sysHeartbeatsReceived].Add(1)
		if h.IsEndOfStream() && im.eosPosition == math.MaxInt64 && pos >= im.rebuildPosition {
			im.eosPosition = pos
		}
		if pos > im.hwmPosition && pos <= im.minSubscriberPosition()+im.termLength {
			im.hwmPosition = pos
			im.hwm.Store(pos)
		}
		return
	}
	end := pos + int64(len(buf))
	consumed := im.minSubscriberPosition()
	if end <= im.rebuildPosition || pos < consumed {
		c.sys[sysFlowControlUnderRuns].Add(1)
		return
	}
	if end > consumed+im.termLength-im.termLength/4 || end > im.cleanPosition+2*im.termLength {
		c.sys[sysFlowControlOverRuns].Add(1)
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
		c.sys[sysInvalidPackets].Add(1)
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

// duty: rebuild tracking with the gap scanner and NAK timer, cleaning,
// status messages and liveness.
func (im *publicationImage) duty(c *conductor) int {
	work := 0
	// Advance the rebuild position over contiguous frames, across terms.
	for im.rebuildPosition < im.hwmPosition {
		termID := logbuffer.ComputeTermIDFromPosition(im.rebuildPosition, im.positionBitsToShift, im.initialTermID)
		off := logbuffer.ComputeTermOffsetFromPosition(im.rebuildPosition, im.positionBitsToShift)
		termBegin := im.rebuildPosition - int64(off)
		limit := int32(min(im.hwmPosition-termBegin, im.termLength))
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
	if im.rebuildPosition >= im.hwmPosition {
		im.gapActive = false
	}
	im.rcvPos.Store(im.rebuildPosition)
	consumed := im.minSubscriberPosition()
	im.clean(consumed - im.termLength)
	if im.eosPosition != math.MaxInt64 && im.rebuildPosition >= im.eosPosition {
		im.log.Metadata().SetEndOfStreamPosition(im.eosPosition)
	}
	if c.nowNs-im.lastSMNs >= c.cfg.StatusMessageTimeout.Nanoseconds() || consumed-im.lastSMPosition >= im.window/4 {
		im.sendStatus(c)
		work++
	}
	// End of the image: the publisher went away (liveness) or every
	// subscriber consumed the end of stream.
	if c.nowNs-im.lastPacketNs > c.cfg.ImageLivenessTimeout.Nanoseconds() ||
		(im.eosPosition != math.MaxInt64 && consumed >= im.eosPosition) {
		im.close(c)
		work++
	}
	return work
}

// onLoss is the unicast loss detector: a new gap is NAKed after the
// unicast delay, an unchanged one re-NAKed after delay x retry ratio.
func (im *publicationImage) onLoss(c *conductor) int {
	if !im.gapActive || im.gapTermID != im.scanTermID || im.gapOffset != im.scanOffset {
		im.gapActive, im.gapTermID, im.gapOffset, im.gapLength = true, im.scanTermID, im.scanOffset, im.scanLength
		im.gapDeadline = c.nowNs + im.nakDelay(false)
		im.reportLoss(c)
		return 0
	}
	im.gapLength = im.scanLength
	if c.nowNs < im.gapDeadline {
		return 0
	}
	if !im.e.reliable {
		im.fillGap(c)
		im.gapActive = false
		return 1
	}
	nak := protocol.Nak{SessionID: im.sessionID, StreamID: im.streamID, TermID: im.gapTermID, TermOffset: im.gapOffset, Length: im.gapLength}
	n, _ := nak.Encode(im.ctl[:])
	im.e.sendTo(im.source, im.ctl[:n])
	c.sys[sysNaksSent].Add(1)
	im.gapDeadline = c.nowNs + im.nakDelay(true)
	return 1
}

func (im *publicationImage) reportLoss(c *conductor) {
	if c.lossReport == nil {
		return
	}
	if im.lossEntry < 0 {
		off, err := c.lossReport.CreateEntry(int64(im.scanLength), c.nowMs, im.sessionID, im.streamID, "aeron:udp?endpoint="+im.e.key, im.sourceIdentity)
		if err == nil {
			im.lossEntry = off
		}
		return
	}
	c.lossReport.RecordObservation(im.lossEntry, int64(im.scanLength), c.nowMs)
}

// clean zeroes the partition behind consumption so a reused term starts
// empty (aeron_publication_image_clean_buffer_to); the first word of each
// range goes last.
func (im *publicationImage) clean(position int64) {
	for position > im.cleanPosition {
		idx := logbuffer.IndexByPosition(im.cleanPosition, im.positionBitsToShift)
		term := im.log.Term(idx)
		off := im.cleanPosition & (im.termLength - 1)
		n := min(position-im.cleanPosition, im.termLength-off)
		if n > 8 {
			clear(term[off+8 : off+n])
		}
		shm.StoreInt64(term, int(off), 0)
		im.cleanPosition += n
	}
}

func (im *publicationImage) sendStatus(c *conductor) {
	pos := im.minSubscriberPosition()
	sm := protocol.StatusMessage{SessionID: im.sessionID, StreamID: im.streamID,
		ConsumptionTermID:     logbuffer.ComputeTermIDFromPosition(pos, im.positionBitsToShift, im.initialTermID),
		ConsumptionTermOffset: logbuffer.ComputeTermOffsetFromPosition(pos, im.positionBitsToShift),
		ReceiverWindow:        int32(im.window), ReceiverID: im.receiverID,
		GroupTag: im.e.groupTag, HasGroupTag: im.e.hasGroupTag}
	n, _ := sm.Encode(im.ctl[:])
	im.e.sendTo(im.source, im.ctl[:n])
	c.sys[sysStatusMessagesSent].Add(1)
	im.lastSMNs, im.lastSMPosition = c.nowNs, pos
}

func (im *publicationImage) close(c *conductor) {
	if im.state == imageDone {
		return
	}
	if im.log != nil {
		// Tell the sender this receiver is going away.
		sm := protocol.StatusMessage{FrameHeader: protocol.FrameHeader{Flags: protocol.SMFlagEOS}, SessionID: im.sessionID, StreamID: im.streamID,
			ReceiverID: im.receiverID, GroupTag: im.e.groupTag, HasGroupTag: im.e.hasGroupTag}
		n, _ := sm.Encode(im.ctl[:])
		im.e.sendTo(im.source, im.ctl[:n])
	}
	for _, sp := range im.subscribers {
		c.transmit(cnc.RspOnUnavailableImage, cnc.AppendImageUnavailable(c.buf[:0], cnc.ImageUnavailable{
			CorrelationID: im.regID, SubscriptionRegistrationID: sp.sub.regID, StreamID: im.streamID, Channel: sp.sub.channel}))
		_ = c.counters.Free(sp.id)
	}
	im.subscribers = nil
	for _, id := range []int32{im.hwmID, im.rcvPosID} {
		if id >= 0 {
			_ = c.counters.Free(id)
		}
	}
	if im.log != nil {
		c.sys[sysBytesMapped].Add(-im.logLength)
		_ = im.log.Close()
		_ = os.Remove(im.logFile)
	}
	im.state = imageDone
	fmt.Fprintf(c.log, "image %d: session %d stream %d unavailable\n", im.regID, im.sessionID, im.streamID)
}
