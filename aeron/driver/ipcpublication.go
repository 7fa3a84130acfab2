package driver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/uri"
)

type pubState int

const (
	pubActive   pubState = iota
	pubDraining          // no publisher left: subscribers read to the end
	pubLinger            // drained: images kept until the linger ends
	pubDone
)

type ipcParams struct {
	termLength, mtu int
	linger          int64 // ns
	// sparse= (AERON_TERM_BUFFER_SPARSE_FILE): the log's pages are not
	// faulted in at creation; eos= (true): a network publication's
	// heartbeats carry the EOS flag once drained; ssc=
	// (AERON_SPIES_SIMULATE_CONNECTION); pubWnd: pub-wnd= (0: the
	// driver's term window)
	sparse, signalEOS, ssc bool
	pubWnd                 int
	// untethered-window-limit-timeout, untethered-linger-timeout (1.53;
	// defaults to the window limit timeout as 1.48 behaves),
	// untethered-resting-timeout, in ns
	untetheredWindowLimit, untetheredLinger, untetheredResting int64
	sessionID                                                  int32
	hasSession                                                 bool
	termLenSet                                                 bool
	mtuSet                                                     bool
	// init-term-id, term-id, term-offset: start at a position
	hasPosition                    bool
	initialTermID, termID, termOff int32
	// responseCorrelationID is response-correlation-id= (-1 without): on
	// a request publication the response subscription's registration id,
	// on a response publication (control-mode=response) the request
	// image's correlation id
	responseCorrelationID int64
	// isResponse: control-mode=response (the log's metadata says it)
	isResponse bool
	// entityTag is the second element of tags= (-1 without): a network
	// publication others name with session-id=tag:<entityTag>;
	// sessionTag is such a reference (hasSessionTag), resolved by the
	// conductor (applySessionTag)
	entityTag     int64
	sessionTag    int64
	hasSessionTag bool
}

func parseIPCParams(u *uri.ChannelURI, cfg Config) (ipcParams, error) {
	p := ipcParams{termLength: cfg.IPCTermBufferLength, mtu: cfg.IPCMTULength, linger: cfg.PublicationLingerTimeout.Nanoseconds(),
		sparse: cfg.TermBufferSparseFile, signalEOS: true, ssc: cfg.SpiesSimulateConnection, responseCorrelationID: -1, entityTag: -1}
	if v, ok := u.Int(uri.KeyResponseCorrelationID); ok {
		p.responseCorrelationID = v
	}
	p.isResponse = responseMode(u)
	if _, tag, err := channelTags(u); err != nil {
		return p, err
	} else {
		p.entityTag = tag
	}
	if v, ok := u.Get(uri.KeySessionID); ok {
		if t, isTag := strings.CutPrefix(v, "tag:"); isTag {
			n, err := strconv.ParseInt(t, 10, 64)
			if err != nil {
				return p, fail(cnc.ErrorCodeInvalidChannel, "could not parse session-id=%s as int64_t in URI due to: %v", v, err)
			}
			p.sessionTag, p.hasSessionTag = n, true
		}
	}
	if v, ok := u.Bool(uri.KeySparse); ok {
		p.sparse = v
	}
	if v, ok := u.Bool(uri.KeyEOS); ok {
		p.signalEOS = v
	}
	if v, ok := u.Bool(uri.KeySpiesSimulateConnection); ok {
		p.ssc = v
	}
	t := parseUntethered(u, cfg)
	p.untetheredWindowLimit, p.untetheredLinger, p.untetheredResting = t.windowLimit, t.linger, t.resting
	if v, ok := u.Size(uri.KeyTermLength); ok {
		p.termLength, p.termLenSet = int(v), true
	}
	if v, ok := u.Size(uri.KeyMTU); ok {
		p.mtu, p.mtuSet = int(v), true
	}
	if v, ok := u.Duration(uri.KeyLinger); ok {
		p.linger = v
	}
	if v, ok := u.Int(uri.KeySessionID); ok {
		p.sessionID, p.hasSession = int32(v), true
	}
	if v, ok := u.Int(uri.KeyInitialTermID); ok {
		t, _ := u.Int(uri.KeyTermID)
		o, _ := u.Int(uri.KeyTermOffset)
		p.hasPosition, p.initialTermID, p.termID, p.termOff = true, int32(v), int32(t), int32(o)
	}
	if err := logbuffer.CheckTermLength(int64(p.termLength)); err != nil {
		return p, fail(cnc.ErrorCodeInvalidChannel, "invalid term-length: %v", err)
	}
	if p.mtu < 64 || p.mtu%32 != 0 || p.mtu > 65504 {
		return p, fail(cnc.ErrorCodeInvalidChannel, "mtu %d is not a multiple of 32 in [64, 65504]", p.mtu)
	}
	if p.mtu > p.termLength/8 {
		return p, fail(cnc.ErrorCodeInvalidChannel, "mtu %d is greater than term-length/8 (%d)", p.mtu, p.termLength/8)
	}
	return p, p.parsePublicationWindow(u)
}

// parsePublicationWindow reads pub-wnd once the term length and MTU are
// known (aeron_uri_get_publication_window_length_param, C's messages).
func (p *ipcParams) parsePublicationWindow(u *uri.ChannelURI) error {
	v, ok := u.Size(uri.KeyPublicationWindow)
	if !ok {
		p.pubWnd = 0
		return nil
	}
	if v < int64(p.mtu) {
		return fail(cnc.ErrorCodeInvalidChannel, "pub-wnd=%d cannot be less than the mtu=%d", v, p.mtu)
	}
	if v > int64(p.termLength>>1) {
		return fail(cnc.ErrorCodeInvalidChannel, "pub-wnd=%d must not exceed half the term-length=%d", v, p.termLength)
	}
	p.pubWnd = int(v)
	return nil
}

// termWindow is the publication's window: pub-wnd, else the driver's
// (AERON_*PUBLICATION_TERM_WINDOW_LENGTH), at most half a term.
func (p *ipcParams) termWindow(driverWindow int) int {
	if p.pubWnd > 0 {
		return p.pubWnd
	}
	return ipcTermWindow(driverWindow, p.termLength)
}

// ipcPublication is an IPC publication and, for every subscription that
// matches it, the image those subscribers read: both sides share one log
// (aeron_ipc_publication.c, Java IpcPublication). Owned by the conductor.
type ipcPublication struct {
	regID               int64
	sessionID, streamID int32
	channel             string
	exclusive           bool
	params              ipcParams
	state               pubState
	refCount            int

	log                 *logbuffer.LogBuffer
	logFile             string
	logLength           int64
	termLength          int64
	positionBitsToShift int
	initialTermID       int32
	termWindow          int64
	hw                  logbuffer.HeaderWriter

	pubLmtID, pubPosID int32
	pubLmt, pubPos     *atomic.Int64
	subs               subscribable
	consumerPosition   int64
	cleanPosition      int64
	tripLimit          int64
	blocked            blockedCheck
	stateSinceNs       int64
	lastTetherCheckNs  int64
	// revoked: a client removed it with the revoke flag
	revoked bool
	// inCoolDown: a client rejected its image; it takes no subscriber
	// until coolDownExpireNs
	inCoolDown       bool
	coolDownExpireNs int64
}

// untetheredTimeouts are a publication's or image's untethered-subscription
// timeouts in ns: untethered-window-limit-timeout, untethered-linger-timeout
// (1.53; the window limit timeout when not given, as 1.48 behaves) and
// untethered-resting-timeout, from the channel or AERON_UNTETHERED_*.
type untetheredTimeouts struct{ windowLimit, linger, resting int64 }

func parseUntethered(u *uri.ChannelURI, cfg Config) untetheredTimeouts {
	t := untetheredTimeouts{windowLimit: cfg.UntetheredWindowLimit.Nanoseconds(), resting: cfg.UntetheredResting.Nanoseconds()}
	if v, ok := u.Duration(uri.KeyUntetheredWindowLimitTimeout); ok {
		t.windowLimit = v
	}
	t.linger = t.windowLimit
	if v, ok := u.Duration(uri.KeyUntetheredLingerTimeout); ok {
		t.linger = v
	}
	if v, ok := u.Duration(uri.KeyUntetheredRestingTimeout); ok {
		t.resting = v
	}
	return t
}

func (p ipcParams) untethered() untetheredTimeouts {
	return untetheredTimeouts{windowLimit: p.untetheredWindowLimit, linger: p.untetheredLinger, resting: p.untetheredResting}
}

// checkTether is the untethered-subscription state machine the C driver
// runs for IPC publications, network publications (spies) and images
// (aeron_*_check_untethered_subscriptions): an untethered subscriber at or
// below limit (three quarters of the window behind the fastest consumer)
// for the window-limit timeout is set aside (setAside tells it its image
// is unavailable) and lingers; after the linger timeout it rests, no
// longer counting for limits; after the resting timeout rejoin puts it
// back at a join position and tells it the image is available again.
// Tethered subscribers only have their time refreshed. It says whether any
// subscriber changed state.
func checkTether(nowNs int64, sps []*subscriberPosition, limit int64, t untetheredTimeouts, setAside, rejoin func(*subscriberPosition)) bool {
	changed := false
	for _, sp := range sps {
		if sp.sub.tether {
			sp.lastUpdateNs = nowNs
			continue
		}
		switch sp.state {
		case tetherActive:
			if sp.pos.Load() > limit {
				sp.lastUpdateNs = nowNs
			} else if nowNs > sp.lastUpdateNs+t.windowLimit {
				setAside(sp)
				sp.state, sp.lastUpdateNs, changed = tetherLinger, nowNs, true
			}
		case tetherLinger:
			if nowNs > sp.lastUpdateNs+t.linger {
				sp.state, sp.lastUpdateNs, changed = tetherResting, nowNs, true
			}
		case tetherResting:
			if nowNs > sp.lastUpdateNs+t.resting {
				rejoin(sp)
				sp.state, sp.lastUpdateNs, changed = tetherActive, nowNs, true
			}
		}
	}
	return changed
}

// tetherState is aeron_subscription_tether_state_t.
type tetherState int

const (
	tetherActive  tetherState = iota
	tetherLinger              // set aside: image unavailable to it
	tetherResting             // not counted; rejoins after the resting timeout
)

func newIPCPublication(c *conductor, cl *clientSession, regID int64, streamID int32, channel string, exclusive bool, params ipcParams) (*ipcPublication, error) {
	log, path, err := c.createPublicationLog(regID, params.termLength, params.sparse)
	if err != nil {
		return nil, err
	}
	p := &ipcPublication{regID: regID, sessionID: params.sessionID, streamID: streamID, channel: channel, exclusive: exclusive,
		params: params, log: log, logFile: path, logLength: int64(len(log.Bytes())), termLength: int64(params.termLength),
		positionBitsToShift: logbuffer.PositionBitsToShift(int32(params.termLength)), initialTermID: rand.Int32(),
		termWindow: int64(params.termWindow(c.cfg.IPCPublicationTermWindow)), pubLmtID: -1, pubPosID: -1}
	if params.hasPosition {
		p.initialTermID = params.initialTermID
	}
	p.subs.image = cnc.ImageReady{CorrelationID: regID, SessionID: p.sessionID, StreamID: streamID, LogFile: path, SourceIdentity: "aeron:ipc"}
	m := log.Metadata()
	start := c.initPublicationMetadata(m, regID, p.sessionID, streamID, p.initialTermID, p.termWindow, p.positionBitsToShift, params)
	p.consumerPosition, p.cleanPosition, p.tripLimit = start, start, start
	p.blocked = blockedCheck{lastPos: start, lastMoved: c.nowNs}
	if p.hw, err = logbuffer.NewHeaderWriter(m.DefaultFrameHeader()); err != nil {
		p.close(c)
		return nil, err
	}
	key := streamKey(c.keyBuf, regID, p.sessionID, streamID, channel)
	if p.pubPosID, err = c.counters.Allocate(cnc.TypePublisherPosition, key, streamLabel("pub-pos (sampled)", regID, p.sessionID, streamID, channel, "")); err != nil {
		p.close(c)
		return nil, fail(cnc.ErrorCodeGenericError, "%v", err)
	}
	c.counters.SetRegistrationID(p.pubPosID, regID)
	if p.pubLmtID, err = c.counters.Allocate(cnc.TypePublisherLimit, key, streamLabel("pub-lmt", regID, p.sessionID, streamID, channel, "")); err != nil {
		p.close(c)
		return nil, fail(cnc.ErrorCodeGenericError, "%v", err)
	}
	c.counters.SetRegistrationID(p.pubLmtID, regID)
	c.counters.SetOwnerID(p.pubLmtID, cl.id)
	p.pubPos, p.pubLmt = c.counters.Value(p.pubPosID), c.counters.Value(p.pubLmtID)
	p.pubPos.Store(start)
	p.pubLmt.Store(start)
	c.sys[sysBytesMapped].Add(p.logLength)
	return p, nil
}

func (p *ipcPublication) checkParams(params ipcParams) error {
	return checkSharedParams(p.params, p.initialTermID, params)
}

// checkSharedParams: a client that adds a publication another already has
// may name the log's parameters only as they are (the C driver's
// aeron_confirm_publication_match).
func checkSharedParams(existing ipcParams, initialTermID int32, params ipcParams) error {
	if params.termLenSet && params.termLength != existing.termLength {
		return fail(cnc.ErrorCodeInvalidChannel, "existing publication has different 'term-length': existing=%d requested=%d", existing.termLength, params.termLength)
	}
	if params.hasPosition && params.initialTermID != initialTermID {
		return fail(cnc.ErrorCodeInvalidChannel, "existing publication has different 'init-term-id': existing=%d requested=%d", initialTermID, params.initialTermID)
	}
	if params.mtuSet && params.mtu != existing.mtu {
		return fail(cnc.ErrorCodeInvalidChannel, "existing publication has different 'mtu': existing=%d requested=%d", existing.mtu, params.mtu)
	}
	if params.ssc != existing.ssc {
		return fail(cnc.ErrorCodeInvalidChannel, "existing publication has different spies simulate connection: requested=%t", params.ssc)
	}
	return nil
}

// producerPosition is the position of the active partition's tail, with
// the offset clamped to the term (a failed claim leaves it beyond).
func (p *ipcPublication) producerPosition() int64 {
	m := p.log.Metadata()
	raw := m.RawTailActive()
	off := min(raw&0xFFFF_FFFF, p.termLength)
	return logbuffer.ComputeTermBeginPosition(logbuffer.TermID(raw), p.positionBitsToShift, p.initialTermID) + off
}

// joinPosition is where a new subscriber starts
// (aeron_ipc_publication_join_position): the consumer position, or the
// slowest subscriber not resting if it is behind, so that a late subscriber
// reads what the others still may.
func (p *ipcPublication) joinPosition() int64 {
	// the consumer position is the fastest reader, sampled now rather than
	// at the last duty cycle
	return p.subs.slowest(p.subs.fastest(p.consumerPosition))
}

// checkUntethered sets aside an untethered subscriber that fell more than
// three quarters of the window behind the fastest for the window-limit
// timeout (ON_UNAVAILABLE_IMAGE), lets it rest, and after the resting
// timeout brings it back at the join position (ON_AVAILABLE_IMAGE)
// (aeron_ipc_publication_check_untethered_subscriptions).
func (p *ipcPublication) checkUntethered(c *conductor) {
	limit := p.consumerPosition - p.termWindow + p.termWindow/4
	p.subs.checkUntethered(c, "publication "+strconv.FormatInt(p.regID, 10), limit, p.params.untethered(), p.joinPosition)
}

func (p *ipcPublication) addSubscriber(c *conductor, s *subLink) {
	if err := p.subs.link(c, s, p.joinPosition()); err != nil {
		c.onError(s.regID, cnc.ErrorCodeGenericError, err.Error())
		return
	}
	p.log.Metadata().SetIsConnected(true)
}

func (p *ipcPublication) removeSubscriber(c *conductor, s *subLink) {
	p.subs.unlink(c, s)
	if len(p.subs.positions) == 0 {
		p.log.Metadata().SetIsConnected(false)
	}
}

// update is the conductor's per-cycle work for the publication
// (aeron_ipc_publication_update_pub_pos_and_lmt, check_for_blocked_publisher,
// on_time_event).
func (p *ipcPublication) update(c *conductor) int {
	switch p.state {
	case pubActive:
		return p.updateActive(c)
	case pubDraining:
		return p.updateDraining(c)
	case pubLinger:
		if p.refCount <= 0 && c.nowNs > p.stateSinceNs+p.params.linger {
			p.close(c)
			return 1
		}
	}
	return 0
}

// updateActive moves the limit after the slowest subscriber that counts and
// unblocks a non-exclusive publication whose claim a client abandoned (an
// exclusive one has a single publisher, which C never unblocks).
func (p *ipcPublication) updateActive(c *conductor) int {
	if p.revoked {
		return p.revokeNow(c)
	}
	p.checkCoolDown(c)
	work := 0
	producer := p.producerPosition()
	p.pubPos.Store(producer)
	if c.nowNs-p.lastTetherCheckNs >= c.cfg.TimerInterval.Nanoseconds() {
		p.lastTetherCheckNs = c.nowNs
		p.checkUntethered(c)
	}
	if p.subs.working() {
		minPos := p.updateConsumerPosition()
		// Move the limit only in steps of tripGain, as the C driver does:
		// a limit written every cycle would count as work and keep the
		// conductor spinning on a core the clients need.
		if limit := minPos + p.termWindow; limit >= p.tripLimit {
			p.clean(minPos - p.termLength)
			p.pubLmt.Store(limit)
			p.tripLimit = limit + p.termWindow/8
			work++
		}
		if !p.exclusive && p.blocked.due(c.nowNs, c.cfg.PublicationUnblockTimeout.Nanoseconds(),
			possiblyBlocked(p.log, p.positionBitsToShift, producer, p.consumerPosition), p.consumerPosition) {
			if unblockLog(p.log, &p.hw, p.termLength, p.positionBitsToShift, p.consumerPosition) {
				c.sys[sysUnblockedPublications].Add(1)
				fmt.Fprintf(c.log, "publication %d: unblocked an abandoned claim at position %d\n", p.regID, p.consumerPosition)
				work++
			}
		}
	} else if lmt := p.pubLmt.Load(); lmt > p.consumerPosition {
		p.tripLimit = p.consumerPosition
		p.pubLmt.Store(p.consumerPosition)
		p.clean(p.consumerPosition - p.termLength)
	}
	return work
}

// updateConsumerPosition sets the consumer position to the fastest
// subscriber that counts and returns the slowest.
func (p *ipcPublication) updateConsumerPosition() int64 {
	p.consumerPosition = p.subs.fastest(p.consumerPosition)
	return p.subs.slowest(math.MaxInt64)
}

// updateDraining waits, as C does, for every subscriber that counts to read
// to the end (an idle one too: a client that died is removed by its
// liveness timeout); a claim left uncommitted is unblocked meanwhile. Once
// drained, the subscribers get ON_UNAVAILABLE_IMAGE and the publication
// lingers.
func (p *ipcPublication) updateDraining(c *conductor) int {
	p.pubPos.Store(p.producerPosition())
	if p.drained() {
		p.endImages(c)
		p.state, p.stateSinceNs = pubLinger, c.nowNs
		return 1
	}
	if len(p.subs.positions) > 0 {
		p.updateConsumerPosition()
	}
	if unblockLog(p.log, &p.hw, p.termLength, p.positionBitsToShift, p.consumerPosition) {
		c.sys[sysUnblockedPublications].Add(1)
		return 1
	}
	return 0
}

// clean zeroes the log behind the slowest consumer, one term behind, so a
// reused partition never shows stale frames (aeron_ipc_publication_clean_buffer).
func (p *ipcPublication) clean(position int64) {
	p.cleanPosition = cleanLog(p.log, p.cleanPosition, position, p.termLength, p.positionBitsToShift)
}

// startDraining: the last client let go (the DECREF of
// aeron_ipc_publication.c): the limit and the end of stream move to the
// producer position.
func (p *ipcPublication) startDraining(c *conductor) {
	producer := p.producerPosition()
	if p.pubLmt.Load() > producer {
		p.pubLmt.Store(producer)
	}
	p.log.Metadata().SetEndOfStreamPosition(producer)
	if p.revoked {
		return // stays ACTIVE: its next update revokes it (C)
	}
	p.state, p.stateSinceNs = pubDraining, c.nowNs
}

// revoke marks the publication revoked, in its log's metadata for the
// clients (the REVOKE event of aeron_ipc_publication.c).
func (p *ipcPublication) revoke() {
	p.revoked = true
	p.log.Metadata().SetIsPublicationRevoked(true)
}

// revokeNow ends a revoked publication without draining
// (aeron_ipc_publication_on_time_event, ACTIVE and revoked): the limit and
// the end of stream go to the producer position, the subscribers lose the
// image whatever they have not read, and it lingers; counted in system
// counter 40.
func (p *ipcPublication) revokeNow(c *conductor) int {
	c.endRevoked(p.pubLmt, p.log, p.producerPosition(), p.regID, p.sessionID, p.streamID)
	p.endImages(c)
	p.state, p.stateSinceNs = pubLinger, c.nowNs
	return 1
}

// endRevoked is what a revoked publication of either kind does first: the
// limit and the end of stream go to the producer position, counted in
// system counter 40 and logged.
func (c *conductor) endRevoked(pubLmt *atomic.Int64, log *logbuffer.LogBuffer, producer, regID int64, sessionID, streamID int32) {
	pubLmt.Store(producer)
	log.Metadata().SetEndOfStreamPosition(producer)
	c.sys[sysPublicationsRevoked].Add(1)
	fmt.Fprintf(c.log, "publication %d: session %d stream %d revoked at position %d\n", regID, sessionID, streamID, producer)
}

// drained is aeron_ipc_publication_is_drained: every subscriber not
// resting read up to the producer position.
func (p *ipcPublication) drained() bool { return p.subs.reached(p.producerPosition()) }

// acceptingSubscriptions is aeron_ipc_publication_is_accepting_subscriptions:
// active, or draining with data a subscriber has not read yet.
func (p *ipcPublication) acceptingSubscriptions() bool {
	return !p.inCoolDown && (p.state == pubActive || (p.state == pubDraining && !p.drained()))
}

// ipcRejectSource is the address C's ON_PUBLICATION_ERROR gives for a
// rejected IPC image: INADDR_LOOPBACK stored without htonl, which reads
// 1.0.0.127 on a little-endian host.
var ipcRejectSource = netip.AddrPortFrom(netip.AddrFrom4([4]byte{1, 0, 0, 127}), 0)

// reject is REJECT_IMAGE of the publication's image (aeron_ipc_publication_reject):
// the clients hear of it (ON_PUBLICATION_ERROR, error log), every
// subscriber loses the image and the publication takes none for the image
// liveness timeout from the last rejection, after which they are linked
// again (checkCoolDown).
func (p *ipcPublication) reject(c *conductor, reason string) {
	c.onPublicationError(cnc.PublicationError{RegistrationID: p.regID, DestinationRegistrationID: -1, SessionID: p.sessionID,
		StreamID: p.streamID, ReceiverID: -1, GroupTag: -1, ErrorCode: cnc.ErrorCodeImageRejected, Message: reason, Source: ipcRejectSource})
	if !p.inCoolDown {
		p.log.Metadata().SetIsConnected(false)
		p.subs.release(c)
		p.inCoolDown = true
	}
	p.coolDownExpireNs = c.nowNs + c.cfg.ImageLivenessTimeout.Nanoseconds()
}

// checkCoolDown links the subscriptions again once a rejection's cool-down
// ended (aeron_ipc_publication_check_cooldown_status).
func (p *ipcPublication) checkCoolDown(c *conductor) {
	if !p.inCoolDown || p.coolDownExpireNs >= c.nowNs {
		return
	}
	p.inCoolDown = false
	for _, s := range c.subs {
		if s.readsIPC(p) {
			p.addSubscriber(c, s)
		}
	}
}

// endImages tells every subscriber the image is gone
// (ON_UNAVAILABLE_IMAGE) and frees their positions.
func (p *ipcPublication) endImages(c *conductor) {
	p.subs.release(c)
	p.log.Metadata().SetIsConnected(false)
}

// close releases the publication's counters, mapping and file.
func (p *ipcPublication) close(c *conductor) {
	if p.state == pubDone {
		return
	}
	if len(p.subs.positions) > 0 {
		p.endImages(c)
	}
	// The log goes before the counters, so that whoever sees the counters
	// freed finds the file gone and the mapped bytes down too.
	if p.log != nil {
		c.freeLog(p.log, p.logFile, p.logLength)
	}
	for _, id := range []int32{p.pubLmtID, p.pubPosID} {
		if id >= 0 {
			_ = c.counters.Free(id)
		}
	}
	p.state = pubDone
}
