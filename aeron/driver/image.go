package driver

import (
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
)

// imageState is the image lifecycle (aeron_publication_image_state_t).
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
	// sendResponseSetup: the SETUP asked for a response channel
	// (SEND_RESPONSE), fixed at creation; responseSession is the session
	// of the response publication answering it (responseSessionNone when
	// none, or once it connected), sent as RSP_SETUP with every status
	// message (conductor writes, receiver reads)
	sendResponseSetup bool
	responseSession   atomic.Int64
	// revoked: the publication was revoked (an EOS heartbeat with the
	// REVOKED flag); set by the receiver, read by the conductor
	revoked atomic.Bool

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
	// subs: the subscribers (conductor); their position counters are
	// republished as they come and go, so that the receiver's window
	// checks see consumption as it happens rather than as of the
	// conductor's last cycle
	subs    subscribable
	cleaned atomic.Int64 // clean position
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
	// revokeGrant ends the transport's grant of the terms to the peer
	// (ImageGranter), nil without one
	revokeGrant func()
	ctl         [protocol.StatusMessageGroupTagLength]byte
	rttm        [protocol.RTTMHeaderLength]byte
}

// imageSparse: an image's log is sparse as the earliest subscription on
// the endpoint that matches it says (sparse=, else the driver's
// AERON_TERM_BUFFER_SPARSE_FILE), as aeron_driver_conductor_is_oldest_subscription_sparse.
func (e *receiveEndpoint) imageSparse(c *conductor, streamID, sessionID int32) bool {
	sparse, oldest := c.cfg.TermBufferSparseFile, int64(math.MaxInt64)
	for _, s := range e.subs {
		if s.matches(streamID, sessionID) && s.regID < oldest {
			sparse, oldest = s.sparse, s.regID
		}
	}
	return sparse
}

func newPublicationImage(c *conductor, e *receiveEndpoint, s *protocol.Setup, from netip.AddrPort) (*publicationImage, error) {
	regID := c.rb.NextCorrelationID()
	path := filepath.Join(c.cfg.Dir, "images", strconv.FormatInt(regID, 10)+".logbuffer")
	sparse := e.imageSparse(c, s.StreamID, s.SessionID)
	log, err := c.createLog(path, int(s.TermLength), sparse)
	if err != nil {
		return nil, err
	}
	im := &publicationImage{e: e, regID: regID, sessionID: s.SessionID, streamID: s.StreamID, source: from,
		sourceIdentity: from.String(), log: log, logFile: path, logLength: int64(len(log.Bytes())),
		termLength: int64(s.TermLength), positionBitsToShift: logbuffer.PositionBitsToShift(s.TermLength),
		initialTermID: s.InitialTermID, receiverID: e.receiverID, hwmID: -1, rcvPosID: -1, lossEntry: -1}
	im.subs.image = cnc.ImageReady{CorrelationID: regID, SessionID: s.SessionID, StreamID: s.StreamID, LogFile: path, SourceIdentity: im.sourceIdentity}
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
	im.sendResponseSetup = s.Flags&protocol.SetupFlagSendResponse != 0
	im.responseSession.Store(responseSessionNone)
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
	if err := im.subs.link(c, s, im.joinPosition()); err != nil {
		c.recordError(cnc.ErrorCodeGenericError, err.Error())
	}
}

func (im *publicationImage) removeSubscriber(c *conductor, s *subLink) { im.subs.unlink(c, s) }

// minSubscriberPosition is the consumption position SMs report: the
// slowest subscriber not resting (untethered ones set aside long enough
// no longer count); without such subscribers the image is consumed as it
// is rebuilt.
func (im *publicationImage) minSubscriberPosition() int64 {
	if pos := im.subs.slowest(math.MaxInt64); pos != math.MaxInt64 {
		return pos
	}
	return im.rebuildPosition
}

// checkUntethered runs the untethered state machine over the image's
// subscribers (aeron_publication_image_check_untethered_subscriptions):
// the window limit trails the fastest subscriber by three quarters of the
// receiver window, and a subscriber rejoins at the join position.
func (im *publicationImage) checkUntethered(c *conductor) {
	limit := im.subs.fastest(0) - im.window + im.window/4
	im.subs.checkUntethered(c, "image "+strconv.FormatInt(im.regID, 10), limit, im.untethered, im.joinPosition)
}

// joinPosition is aeron_publication_image_join_position: rcv-pos, or the
// slowest subscriber not resting if it is behind, so that a late
// subscriber reads what the others still may.
func (im *publicationImage) joinPosition() int64 { return im.subs.slowest(im.rcvPos.Load()) }

// acceptingSubscriptions is aeron_publication_image_is_accepting_subscriptions:
// a new subscription joins an image that some subscriber still reads, while
// it is active or draining with data not yet read.
func (im *publicationImage) acceptingSubscriptions() bool {
	return im.subs.working() && (im.state == imageActive || (im.state == imageDraining && !im.drained()))
}

// drained is aeron_publication_image_is_drained: every subscriber not
// resting read up to rcv-pos.
func (im *publicationImage) drained() bool { return im.subs.reached(im.rcvPos.Load()) }

// consumedNow is the receiver's minimum subscriber position: rcv-pos
// without subscribers, as minSubscriberPosition is the conductor's.
func (im *publicationImage) consumedNow() int64 { return im.subs.slowestCounted(im.rcvPos.Load()) }

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
			if h.Flags&protocol.FlagRevoked != 0 {
				// the rest of the stream is not to be read
				// (aeron_publication_image_insert_packet)
				im.log.Metadata().SetIsPublicationRevoked(true)
				im.revoked.Store(true)
				r.sys[sysImagesRevoked].Add(1)
			}
			im.eosPosition.Store(pos)
		}
		if pos > im.hwmPosition {
			im.hwmPosition = pos
			im.hwm.Store(pos)
		}
		return
	}
	end := pos + int64(len(buf))
	term := im.log.Term(logbuffer.IndexByPosition(pos, im.positionBitsToShift))
	if placed := shm.SameStart(buf, term[h.TermOffset:]); !placed {
		if end <= im.rcvPos.Load() || pos < consumed {
			r.sys[sysFlowControlUnderRuns].Add(1)
			return
		}
		if end > consumed+im.termLength-im.termLength/4 || end > im.cleaned.Load()+2*im.termLength {
			r.sys[sysFlowControlOverRuns].Add(1)
			return
		}
	}
	// else the frames are in the term already, placed there by the
	// publisher (ImageGranter) and readable: a subscriber may have read
	// past pos before this call, and what remains is to account for them
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
	if len(im.subs.positions) > 0 && c.nowNs-im.lastTetherCheckNs >= c.cfg.TimerInterval.Nanoseconds() {
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
	if im.revoked.Load() {
		// revoked: no drain, whatever is unread (C's ACTIVE to DRAINING
		// to LINGER at once); the receiver sends the EOS status message
		fmt.Fprintf(c.log, "image %d: session %d stream %d revoked by its publisher\n", im.regID, im.sessionID, im.streamID)
		im.sendingEOS.Store(true)
		im.close(c)
		return 1
	}
	switch im.state {
	case imageActive:
		endOfStream := eos != math.MaxInt64 && im.rebuildPosition >= im.hwm.Load()
		silent := c.nowNs-im.lastPacketNs.Load() > c.cfg.ImageLivenessTimeout.Nanoseconds()
		read := im.subs.working()
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
	if im.revoked.Load() {
		return 0 // nothing of a revoked stream is asked for again
	}
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
	if rs := im.responseSession.Load(); rs >= math.MinInt32 && rs <= math.MaxInt32 {
		// the requester learns which session answers it
		// (aeron_publication_image_send_pending_status_message)
		rsp := protocol.ResponseSetup{SessionID: im.sessionID, StreamID: im.streamID, ResponseSessionID: int32(rs)}
		n, _ := rsp.Encode(im.ctl[:])
		im.sendControl(r, im.ctl[:n])
	}
}

// close makes the image unavailable to its subscribers and has the
// receiver drop it; the log and the counters the receiver writes go once
// it has.
func (im *publicationImage) close(c *conductor) {
	if im.state == imageDone {
		return
	}
	im.state = imageDone
	im.subs.release(c)
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

// rejectImage is REJECT_IMAGE (aeron_driver_conductor_on_invalidate_image):
// the network image stops taking data and answers its publication with
// ERR frames instead of status messages, so the publication learns it was
// rejected and the image ends at its liveness timeout.
func (c *conductor) rejectImage(correlationID int64, cmd cnc.RejectImageCommand) error {
	if len(cmd.Reason) > protocol.ErrorMaxTextLength {
		return fail(cnc.ErrorCodeGenericError, "Invalidation reason_text must be %d bytes or less", protocol.ErrorMaxTextLength)
	}
	for _, e := range c.endpoints {
		for _, im := range e.images {
			if im.regID != cmd.ImageCorrelationID {
				continue
			}
			ef := protocol.ErrorFrame{SessionID: im.sessionID, StreamID: im.streamID, ReceiverID: im.receiverID,
				ErrorCode: cnc.ErrorCodeImageRejected, Message: []byte(cmd.Reason)}
			if e.hasGroupTag {
				ef.Flags, ef.GroupTag = protocol.ErrorFlagGroupTag, e.groupTag
			}
			frame := make([]byte, ef.EncodedLength())
			if _, err := ef.Encode(frame); err != nil {
				return fail(cnc.ErrorCodeGenericError, "reject image %d: %v", cmd.ImageCorrelationID, err)
			}
			c.receiverProxy.offer(func() { im.rejected = frame })
			c.sys[sysImagesRejected].Add(1)
			fmt.Fprintf(c.log, "image %d (session %d stream %d) rejected: %s\n", im.regID, im.sessionID, im.streamID, cmd.Reason)
			c.transmit(cnc.RspOnOperationSuccess, cnc.AppendID(c.buf[:0], correlationID))
			return nil
		}
	}
	for _, p := range c.pubs {
		if p.regID == cmd.ImageCorrelationID {
			p.reject(c, cmd.Reason)
			c.sys[sysImagesRejected].Add(1)
			fmt.Fprintf(c.log, "IPC publication %d (session %d stream %d) rejected: %s\n", p.regID, p.sessionID, p.streamID, cmd.Reason)
			c.transmit(cnc.RspOnOperationSuccess, cnc.AppendID(c.buf[:0], correlationID))
			return nil
		}
	}
	return fail(cnc.ErrorCodeGenericError, "Unable to resolve image for correlationId=%d", cmd.ImageCorrelationID)
}
