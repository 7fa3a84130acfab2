package driver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/sys"
)

// conductor is the driver conductor agent (aeron_driver_conductor.c): it
// serves the to-driver ring buffer, answers on the broadcast buffer, owns
// every resource and runs the timers. It is driven by one goroutine.
type conductor struct {
	cfg        Config
	cnc        *cnc.File
	rb         *cnc.ManyToOneRingBuffer
	bc         *cnc.BroadcastTransmitter
	counters   *cnc.CountersManager
	errLog     *cnc.DistinctErrorLog
	lossReport *cnc.LossReport
	media      mediaRegistry
	log        io.Writer
	// names and nameErrs are the host names looked up off the conductor
	// for the command running now (names.go); nil otherwise
	names     map[string]netip.Addr
	nameErrs  map[string]error
	terminate func()

	sys       []*atomic.Int64
	clients   map[int64]*clientSession
	pubs      []*ipcPublication
	netPubs   []*networkPublication
	endpoints map[string]*receiveEndpoint
	// send channel endpoints by canonical channel, and those closed whose
	// transport the sender has not let go of yet
	sendEndpoints        map[string]*sendEndpoint
	closingSendEndpoints map[string]*sendEndpoint
	// opens runs media Opens that may wait on the fabric off the conductor
	opens backgroundOpens
	// mediaStats publishes the media's own statistics (StatisticsReporter)
	mediaStats mediaStatistics
	// lastReResolutionNs: the last check for send endpoints to resolve again
	lastReResolutionNs int64
	pubLinks           map[int64]*pubLink
	subs               map[int64]*subLink
	counterLinks       map[int64]*counterLink
	staticCounters     map[[2]int64]int32
	nextSession        int32

	// the other agents and the queues to them (the C driver's proxies);
	// fromReceiver carries the receiver's requests to the conductor
	snd           *sender
	recv          *receiver
	senderProxy   *proxy
	receiverProxy *proxy
	fromReceiver  *proxy
	awaiting      []releasable
	// endpoints closed but not yet released by the receiver, by bind key
	closingEndpoints map[string]*receiveEndpoint
	usableSpace      func(dir string) (uint64, error) // sys.UsableSpace; tests replace it
	validator        func(token []byte) bool          // termination validator
	cycle            cycleTracker

	handler     cnc.MessageHandler
	buf, keyBuf []byte
	nowNs       int64
	nowMs       int64
	lastTimerNs int64
	lastHbMs    int64
	rbHead      int64
	rbHeadSince int64
}

type clientSession struct {
	id   int64
	hbID int32
	hb   *atomic.Int64
}

type pubLink struct {
	regID  int64
	client *clientSession
	pub    *ipcPublication
	net    *networkPublication
}

type subLink struct {
	regID int64
	// sparse= of the subscription (else AERON_TERM_BUFFER_SPARSE_FILE):
	// the image logs it is the oldest subscription of
	sparse     bool
	client     *clientSession
	streamID   int32
	channel    string
	sessionID  int32
	hasSession bool
	endpoint   string // the receive endpoint of a network subscription; "" for IPC and spies
	tether     bool   // tether=, default AERON_TETHER_SUBSCRIPTIONS
	// aeron-spy: subscriptions read network publications of this send
	// endpoint (canonicalSendChannel)
	spy          bool
	spyCanonical string
	// spyTag: an aeron-spy: channel's channel tag (noTag without), which
	// spies on every publication of the endpoint with that tag
	spyTag int64
	// awaitingResponse: a response subscription (control-mode=response)
	// that has not learnt its session from a RSP_SETUP; it matches no
	// image and the receiver does not have it yet
	awaitingResponse bool
}

type counterLink struct {
	regID  int64
	client *clientSession
	id     int32
}

func newConductor(cfg Config, f *cnc.File, loss []byte, media mediaRegistry, log io.Writer) (*conductor, error) {
	rb, err := f.ToDriver()
	if err != nil {
		return nil, err
	}
	bc, err := cnc.NewBroadcastTransmitter(f.ToClientsBuffer())
	if err != nil {
		return nil, err
	}
	cm, err := cnc.NewCountersManager(f.CountersMetadataBuffer(), f.CountersValuesBuffer(), cfg.CountersFreeToReuse.Milliseconds(), epochMs)
	if err != nil {
		return nil, err
	}
	el, err := cnc.NewDistinctErrorLog(f.ErrorLogBuffer(), epochMs)
	if err != nil {
		return nil, err
	}
	lr, err := cnc.NewLossReport(loss)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = io.Discard
	}
	c := &conductor{cfg: cfg, cnc: f, rb: rb, bc: bc, counters: cm, errLog: el, lossReport: lr, media: media, log: &syncWriter{w: log},
		clients: map[int64]*clientSession{}, endpoints: map[string]*receiveEndpoint{}, pubLinks: map[int64]*pubLink{}, subs: map[int64]*subLink{},
		counterLinks: map[int64]*counterLink{}, staticCounters: map[[2]int64]int32{}, closingEndpoints: map[string]*receiveEndpoint{},
		sendEndpoints: map[string]*sendEndpoint{}, closingSendEndpoints: map[string]*sendEndpoint{},
		nextSession: rand.Int32(), buf: make([]byte, 0, 1024), keyBuf: make([]byte, 0, cnc.MaxKeyLength)}
	for i, label := range systemCounterLabels(cfg.ThreadingMode) {
		id, err := cm.Allocate(cnc.TypeSystem, binary.LittleEndian.AppendUint32(nil, uint32(i)), label)
		if err != nil {
			return nil, fmt.Errorf("driver: system counters: %w", err)
		}
		// 1.53 gives every system counter its id as registration id;
		// clients look counter 43 up by it.
		cm.SetRegistrationID(id, int64(id))
		c.sys = append(c.sys, cm.Value(id))
	}
	// In SHARED and INVOKER modes one goroutine runs every agent, so a
	// proxy calls the other agent directly (aeron_driver_sender_proxy.c
	// and friends).
	direct := cfg.ThreadingMode == Shared || cfg.ThreadingMode == Invoker
	c.snd = &sender{cmds: newProxy(direct, c.sys[sysFailedOffersSender]), sys: c.sys,
		cycle: cycleTracker{maxCtr: c.sys[sysSenderMaxCycleTime], exceeded: c.sys[sysSenderCycleThreshold]}}
	c.snd.report = c.recordError
	c.recv = &receiver{cmds: newProxy(direct, c.sys[sysFailedOffersReceiver]), sys: c.sys, c: c,
		cycle: cycleTracker{maxCtr: c.sys[sysReceiverMaxCycleTime], exceeded: c.sys[sysReceiverCycleThreshold]}}
	c.fromReceiver = newProxy(direct, c.sys[sysFailedOffersConductor])
	c.recv.toConductor = c.fromReceiver
	c.snd.toConductor, c.snd.conductor = c.fromReceiver, c // the sender's requests share the queue
	c.senderProxy, c.receiverProxy = c.snd.cmds, c.recv.cmds
	c.cycle = cycleTracker{maxCtr: c.sys[sysConductorMaxCycleTime], exceeded: c.sys[sysConductorCycleThreshold]}
	c.sys[sysAeronVersion].Store(int64(Version))
	c.sys[sysControlProtocolVersion].Store(int64(ControlProtocolVersion))
	c.handler = c.onCommand
	c.usableSpace = sys.UsableSpace
	// aeron_driver_termination_validator_default_allow / _deny
	allow := cfg.TerminationValidator == "allow"
	c.validator = func([]byte) bool { return allow }
	if err := c.allocateMediaStatistics(media); err != nil {
		return nil, err
	}
	now := time.Now()
	c.nowNs, c.nowMs = now.UnixNano(), now.UnixMilli()
	c.lastTimerNs = c.nowNs
	c.rbHeadSince = c.nowNs
	rb.SetConsumerHeartbeatTime(c.nowMs)
	return c, nil
}

func epochMs() int64 { return time.Now().UnixMilli() }

// doWork is one duty cycle; it returns the amount of work done.
func (c *conductor) doWork() int {
	now := time.Now()
	c.nowNs, c.nowMs = now.UnixNano(), now.UnixMilli()
	if c.nowMs != c.lastHbMs {
		c.rb.SetConsumerHeartbeatTime(c.nowMs)
		c.lastHbMs = c.nowMs
	}
	work := c.fromReceiver.drain()
	work += c.opens.drain()
	n, err := c.rb.Read(c.handler, 10)
	work += n
	if err != nil {
		c.recordError(cnc.ErrorCodeGenericError, "to-driver ring buffer: "+err.Error())
	}
	for i := 0; i < len(c.pubs); i++ {
		p := c.pubs[i]
		work += p.update(c)
		if p.state == pubDone {
			c.pubs = append(c.pubs[:i], c.pubs[i+1:]...)
			i--
		}
	}
	work += c.networkWork()
	c.refreshMediaStatistics()
	c.checkReResolution()
	if c.nowNs-c.lastTimerNs >= c.cfg.TimerInterval.Nanoseconds() {
		c.lastTimerNs = c.nowNs
		work += c.onTimer()
	}
	work += c.freeReleased()
	c.cycle.record(c.nowNs)
	return work
}

// awaitRelease frees a resource once the agent that used it let go.
func (c *conductor) awaitRelease(released *atomic.Bool, free func()) {
	c.awaiting = append(c.awaiting, releasable{released: released, free: free})
}

func (c *conductor) freeReleased() int {
	work := 0
	for i := 0; i < len(c.awaiting); i++ {
		if a := c.awaiting[i]; a.released.Load() {
			a.free()
			c.awaiting = append(c.awaiting[:i], c.awaiting[i+1:]...)
			i--
			work++
		}
	}
	return work
}

// onTimer checks client liveness and a to-driver ring buffer blocked by a
// client that died mid-write.
func (c *conductor) onTimer() int {
	work := 0
	timeoutMs := c.cfg.ClientLivenessTimeout.Milliseconds()
	for _, cl := range c.clients {
		if c.nowMs > cl.hb.Load()+timeoutMs {
			fmt.Fprintf(c.log, "client %d timed out (no keepalive for %v)\n", cl.id, c.cfg.ClientLivenessTimeout)
			c.sys[sysClientTimeouts].Add(1)
			c.transmit(cnc.RspOnClientTimeout, cnc.AppendID(c.buf[:0], cl.id))
			c.releaseClient(cl)
			work++
		}
	}
	head := c.rb.ConsumerPosition()
	if head != c.rbHead || c.rb.ProducerPosition() == head {
		c.rbHead, c.rbHeadSince = head, c.nowNs
	} else if c.nowNs-c.rbHeadSince > c.cfg.ClientLivenessTimeout.Nanoseconds() {
		if c.rb.Unblock() {
			c.sys[sysUnblockedCommands].Add(1)
		}
		c.rbHeadSince = c.nowNs
	}
	return work
}

// shutdown releases the publications and clears the driver heartbeat, so
// clients see the driver gone at once and a new driver may start in the
// directory without waiting for the driver timeout.
//
// It runs once the sender and receiver goroutines have stopped: their
// queued commands run here first, and then their proxies call them
// directly, so that everything they hold is released at once.
func (c *conductor) shutdown() {
	for _, p := range []*proxy{c.senderProxy, c.receiverProxy} {
		for p.drain() > 0 {
		}
		p.direct = true
	}
	for c.fromReceiver.drain() > 0 {
	}
	c.opens.close()
	c.reportInFlightAtShutdown()
	for _, p := range c.pubs {
		p.close(c)
	}
	c.pubs = nil
	for _, p := range c.netPubs {
		p.close(c)
	}
	c.netPubs = nil
	for k, e := range c.endpoints {
		e.close(c)
		delete(c.endpoints, k)
	}
	c.freeReleased()
	c.rb.SetConsumerHeartbeatTime(0)
}

// imageGone tells sp's subscription that image regID of streamID is no
// longer available to it (ON_UNAVAILABLE_IMAGE).
func (c *conductor) imageGone(regID int64, streamID int32, sp *subscriberPosition) {
	c.transmit(cnc.RspOnUnavailableImage, cnc.AppendImageUnavailable(c.buf[:0], cnc.ImageUnavailable{
		CorrelationID: regID, SubscriptionRegistrationID: sp.sub.regID, StreamID: streamID, Channel: sp.sub.channel}))
}

func (c *conductor) transmit(typeID int32, msg []byte) {
	if err := c.bc.Transmit(typeID, msg); err != nil {
		c.recordError(cnc.ErrorCodeGenericError, "broadcast: "+err.Error())
	}
}

func (c *conductor) recordError(code int, msg string) {
	c.sys[sysErrors].Add(1)
	fmt.Fprintf(c.log, "error: %s\n", msg)
	_ = c.errLog.Record(code, msg)
}

// onError answers a command with ON_ERROR and records it in the distinct
// error log, as aeron_driver_conductor_on_error does.
func (c *conductor) onError(correlationID int64, code int32, msg string) {
	c.recordError(int(code), msg)
	c.transmit(cnc.RspOnError, cnc.AppendErrorResponse(c.buf[:0], cnc.ErrorResponse{OffendingCorrelationID: correlationID, Code: code, Message: msg}))
}

func (c *conductor) client(id int64) *clientSession {
	if cl, ok := c.clients[id]; ok {
		return cl
	}
	key := binary.LittleEndian.AppendUint64(c.keyBuf[:0], uint64(id))
	hbID, err := c.counters.Allocate(cnc.TypeClientHeartbeatTimestamp, key, fmt.Sprintf("client-heartbeat: id=%d", id))
	if err != nil {
		c.recordError(cnc.ErrorCodeGenericError, err.Error())
		return nil
	}
	c.counters.SetRegistrationID(hbID, id)
	c.counters.SetOwnerID(hbID, id)
	cl := &clientSession{id: id, hbID: hbID, hb: c.counters.Value(hbID)}
	cl.hb.Store(c.nowMs)
	c.clients[id] = cl
	// Tell the client which counter is its heartbeat, as the C driver does.
	c.transmit(cnc.RspOnCounterReady, cnc.AppendIDAndCounter(c.buf[:0], id, hbID))
	return cl
}

// onCommand dispatches one command (aeron_driver_conductor_on_command).
func (c *conductor) onCommand(typeID int32, msg []byte) {
	hdr, err := cnc.DecodeCorrelated(typeID, msg)
	if err != nil {
		c.onError(0, cnc.ErrorCodeMalformedCommand, err.Error())
		return
	}
	var cl *clientSession
	if typeID != cnc.CmdClientClose {
		if cl = c.client(hdr.ClientID); cl == nil {
			c.onError(hdr.CorrelationID, cnc.ErrorCodeGenericError, "counters exhausted: cannot track client")
			return
		}
		cl.hb.Store(c.nowMs)
	}
	if c.names == nil {
		// a channel naming hosts runs once they are looked up, off the
		// conductor (names.go); the ring's bytes are reused meanwhile
		own := append([]byte(nil), msg...)
		if c.deferForNames(typeID, own, func() {
			if typeID == cnc.CmdClientClose || c.clients[hdr.ClientID] == cl {
				c.runCommand(typeID, own, hdr, cl)
			}
		}) {
			return
		}
	}
	c.runCommand(typeID, msg, hdr, cl)
}

// runCommand dispatches a command and answers a failure with ON_ERROR.
func (c *conductor) runCommand(typeID int32, msg []byte, hdr cnc.Correlated, cl *clientSession) {
	if err := c.dispatch(typeID, msg, hdr, cl); err != nil {
		var ce *cnc.CommandError
		if errors.As(err, &ce) {
			c.onError(hdr.CorrelationID, cnc.ErrorCodeMalformedCommand, err.Error())
			return
		}
		var de *driverError
		if errors.As(err, &de) {
			c.onError(hdr.CorrelationID, de.code, de.msg)
			return
		}
		c.onError(hdr.CorrelationID, cnc.ErrorCodeGenericError, err.Error())
	}
}

// driverError is a command failure with its ON_ERROR code.
type driverError struct {
	code int32
	msg  string
}

func (e *driverError) Error() string { return e.msg }

func fail(code int32, format string, args ...any) error {
	return &driverError{code: code, msg: fmt.Sprintf(format, args...)}
}

func (c *conductor) dispatch(typeID int32, msg []byte, hdr cnc.Correlated, cl *clientSession) error {
	switch typeID {
	case cnc.CmdAddPublication, cnc.CmdAddExclusivePublication:
		cmd, err := cnc.DecodePublicationCommand(typeID, msg)
		if err != nil {
			return err
		}
		return c.addPublication(cl, cmd, typeID == cnc.CmdAddExclusivePublication)
	case cnc.CmdRemovePublication:
		cmd, err := cnc.DecodeRemoveCommand(typeID, msg)
		if err != nil {
			return err
		}
		return c.removePublication(cmd)
	case cnc.CmdAddSubscription:
		cmd, err := cnc.DecodeSubscriptionCommand(typeID, msg)
		if err != nil {
			return err
		}
		return c.addSubscription(cl, cmd)
	case cnc.CmdRemoveSubscription:
		cmd, err := cnc.DecodeRemoveCommand(typeID, msg)
		if err != nil {
			return err
		}
		return c.removeSubscription(cmd)
	case cnc.CmdClientKeepalive:
		return nil // the heartbeat was refreshed above
	case cnc.CmdClientClose:
		if cl, ok := c.clients[hdr.ClientID]; ok {
			c.releaseClient(cl)
		}
		return nil
	case cnc.CmdAddCounter, cnc.CmdAddStaticCounter:
		cmd, err := cnc.DecodeCounterCommand(typeID, msg)
		if err != nil {
			return err
		}
		return c.addCounter(cl, cmd)
	case cnc.CmdRemoveCounter:
		cmd, err := cnc.DecodeRemoveCommand(typeID, msg)
		if err != nil {
			return err
		}
		return c.removeCounter(cmd)
	case cnc.CmdAddDestination, cnc.CmdRemoveDestination, cnc.CmdAddRcvDestination, cnc.CmdRemoveRcvDestination:
		cmd, err := cnc.DecodeDestinationCommand(typeID, msg)
		if err != nil {
			return err
		}
		return c.onDestination(typeID, cmd)
	case cnc.CmdRemoveDestinationByID:
		if len(msg) < 32 {
			return &cnc.CommandError{TypeID: typeID, Reason: fmt.Sprintf("needs 32 bytes, message has %d", len(msg))}
		}
		// aeron_driver_conductor_on_remove_receive_send_destination_by_id
		reg := int64(binary.LittleEndian.Uint64(msg[16:]))
		p := c.networkPublication(reg)
		if p == nil {
			return fail(cnc.ErrorCodeUnknownPublication, "unknown remove destination, client_id=%d registration_id=%d", hdr.ClientID, reg)
		}
		if p.ep.mdc != nil && p.ep.mdc.manual {
			return c.onRemoveDestinationByID(p, hdr.CorrelationID, int64(binary.LittleEndian.Uint64(msg[24:])))
		}
		return fail(cnc.ErrorCodeGenericError, "channel does not allow manual control of destinations: %d", reg)
	case cnc.CmdTerminateDriver:
		cmd, err := cnc.DecodeTerminateCommand(typeID, msg)
		if err != nil {
			return err
		}
		// aeron_driver_conductor_on_terminate_driver: a denied request
		// is not answered.
		if c.validator(cmd.Token) {
			fmt.Fprintf(c.log, "terminate requested by client %d: allowed\n", hdr.ClientID)
			c.terminate()
		} else {
			fmt.Fprintf(c.log, "terminate requested by client %d (token %d bytes): denied by the termination validator\n", hdr.ClientID, len(cmd.Token))
		}
		return nil
	case cnc.CmdRejectImage:
		cmd, err := cnc.DecodeRejectImageCommand(typeID, msg)
		if err != nil {
			return err
		}
		return c.rejectImage(hdr.CorrelationID, cmd)
	case cnc.CmdGetNextAvailableSessionID:
		if _, err := cnc.DecodeSessionIDCommand(typeID, msg); err != nil {
			return err
		}
		c.transmit(cnc.RspOnNextAvailableSessionID, cnc.AppendIDAndCounter(c.buf[:0], hdr.CorrelationID, c.nextSessionID()))
		return nil
	}
	return fail(cnc.ErrorCodeUnknownCommandTypeID, "command type id 0x%x unknown", typeID)
}

// onDestination answers the destination commands as the C driver does:
// publications with control-mode=manual add and remove send destinations
// (onSendDestination), subscriptions with control-mode=manual receive
// destinations (onRcvDestination); other channels do not allow manual control:
// aeron_driver_conductor_on_add_send_destination,
// on_remove_send_destination and find_mds_subscription. Send destinations
// are looked up among network publications only, receive destinations
// among network subscriptions only, so IPC resources are unknown there.
func (c *conductor) onDestination(typeID int32, cmd cnc.DestinationCommand) error {
	switch typeID {
	case cnc.CmdAddDestination, cnc.CmdRemoveDestination:
		p := c.networkPublication(cmd.RegistrationID)
		if p == nil {
			if typeID == cnc.CmdAddDestination {
				return fail(cnc.ErrorCodeUnknownPublication, "unknown add destination client_id=%d registration_id=%d", cmd.ClientID, cmd.RegistrationID)
			}
			return fail(cnc.ErrorCodeUnknownPublication, "unknown remove destination, client_id=%d registration_id=%d", cmd.ClientID, cmd.RegistrationID)
		}
		if typeID == cnc.CmdAddDestination {
			if strings.HasPrefix(cmd.Channel, "aeron-spy:") {
				return fail(cnc.ErrorCodeInvalidChannel, "Aeron spies are invalid as send destinations: %s", cmd.Channel)
			}
			if _, err := uri.Parse(cmd.Channel); err != nil {
				return fail(cnc.ErrorCodeInvalidChannel, "invalid destination: %v", err)
			}
		}
		if p.ep.mdc != nil && p.ep.mdc.manual {
			return c.onSendDestination(p, typeID == cnc.CmdAddDestination, cmd)
		}
		return fail(cnc.ErrorCodeGenericError, "channel does not allow manual control of destinations: %s", cmd.Channel)
	default:
		s, ok := c.subs[cmd.RegistrationID]
		if !ok || s.endpoint == "" {
			return fail(cnc.ErrorCodeUnknownSubscription, "unknown subscription client_id=%d registration_id=%d", cmd.ClientID, cmd.RegistrationID)
		}
		if e, ok := c.endpoints[s.endpoint]; ok && e.mds {
			return c.onRcvDestination(e, typeID == cnc.CmdAddRcvDestination, cmd)
		}
		return fail(cnc.ErrorCodeInvalidChannel, "channel does not allow manual control")
	}
}

// tether is a subscription's tether= or AERON_TETHER_SUBSCRIPTIONS.
func (c *conductor) tether(u *uri.ChannelURI) bool {
	if v, ok := u.Bool(uri.KeyTether); ok {
		return v
	}
	return c.cfg.TetherSubscriptions
}

// networkPublication finds a network publication by its registration id
// (the correlation id of the command that created it).
func (c *conductor) networkPublication(regID int64) *networkPublication {
	for _, p := range c.netPubs {
		if p.regID == regID && p.state != pubDone {
			return p
		}
	}
	return nil
}

// nextSessionID hands out session ids outside the reserved range and not
// in use by an IPC publication.
func (c *conductor) nextSessionID() int32 {
	for {
		id := c.nextSession
		c.nextSession++
		if id >= publicationReservedSessionLo && id <= publicationReservedSessionHi {
			continue
		}
		inUse := false
		for _, p := range c.pubs {
			if p.sessionID == id {
				inUse = true
				break
			}
		}
		for _, p := range c.netPubs {
			if p.sessionID == id {
				inUse = true
				break
			}
		}
		if !inUse {
			return id
		}
	}
}

// parseChannel validates a channel and finds its medium: IPC is the
// conductor's own; network media must have been registered.
func (c *conductor) parseChannel(channel string) (*uri.ChannelURI, error) {
	u, err := uri.Parse(channel)
	if err != nil {
		return nil, fail(cnc.ErrorCodeInvalidChannel, "invalid channel: %v", err)
	}
	if u.Media != uri.MediaIPC || u.Spy {
		med, err := c.media.lookup(u.Media)
		if err != nil {
			return nil, fail(cnc.ErrorCodeInvalidChannel, "%s: %v", channel, err)
		}
		if err := checkNetworkChannel(u, channel, med); err != nil {
			return nil, err
		}
	} else if err := checkKeys(u, channel, nil); err != nil {
		return nil, err
	}
	return u, nil
}

func (c *conductor) addPublication(cl *clientSession, cmd cnc.PublicationCommand, exclusive bool) error {
	u, err := c.parseChannel(cmd.Channel)
	if err != nil {
		return err
	}
	if u.Spy {
		return fail(cnc.ErrorCodeInvalidChannel, "%s: aeron-spy: channels are for subscriptions only", cmd.Channel)
	}
	if u.Media != uri.MediaIPC {
		return c.addNetworkPublication(cl, cmd, u, exclusive)
	}
	params, err := parseIPCParams(u, c.cfg)
	if err != nil {
		return err
	}
	if err := c.applySessionTag(&params); err != nil {
		return err
	}
	var pub *ipcPublication
	if !exclusive {
		for _, p := range c.pubs {
			if p.state == pubActive && !p.exclusive && p.streamID == cmd.StreamID && (!params.hasSession || p.sessionID == params.sessionID) {
				if err := p.checkParams(params); err != nil {
					return err
				}
				pub = p
				break
			}
		}
	}
	if pub == nil {
		if params.hasSession {
			for _, p := range c.pubs {
				if p.sessionID == params.sessionID && p.streamID == cmd.StreamID && (exclusive || p.exclusive) {
					return fail(cnc.ErrorCodeGenericError, "specified session-id %d is already in use for stream-id %d", params.sessionID, cmd.StreamID)
				}
			}
		} else {
			params.sessionID = c.nextSessionID()
		}
		pub, err = newIPCPublication(c, cl, cmd.CorrelationID, cmd.StreamID, cmd.Channel, exclusive, params)
		if err != nil {
			return err
		}
		c.pubs = append(c.pubs, pub)
	}
	pub.refCount++
	c.pubLinks[cmd.CorrelationID] = &pubLink{regID: cmd.CorrelationID, client: cl, pub: pub}
	rsp := int32(cnc.RspOnPublicationReady)
	if exclusive {
		rsp = cnc.RspOnExclusivePublicationReady
	}
	c.transmit(rsp, cnc.AppendPublicationReady(c.buf[:0], cnc.PublicationReady{
		CorrelationID: cmd.CorrelationID, RegistrationID: pub.regID, SessionID: pub.sessionID, StreamID: pub.streamID,
		PublicationLimitCounterID: pub.pubLmtID, ChannelStatusIndicatorID: channelStatusNotAllocated, LogFile: pub.logFile}))
	if pub.refCount == 1 {
		for _, s := range c.subs {
			if s.readsIPC(pub) {
				pub.addSubscriber(c, s)
			}
		}
	}
	return nil
}

func (c *conductor) removePublication(cmd cnc.RemoveCommand) error {
	link, ok := c.pubLinks[cmd.RegistrationID]
	if !ok {
		return fail(cnc.ErrorCodeUnknownPublication, "unknown publication client_id=%d registration_id=%d", cmd.ClientID, cmd.RegistrationID)
	}
	if cmd.Flags&cnc.RemovePublicationFlagRevoke != 0 {
		// revoked for every client holding it (AERON_DRIVER_MANAGED_RESOURCE_REVOKE)
		if link.net != nil {
			link.net.revoke()
		} else {
			link.pub.revoke()
		}
	}
	c.unlinkPublication(link)
	c.transmit(cnc.RspOnOperationSuccess, cnc.AppendID(c.buf[:0], cmd.CorrelationID))
	return nil
}

func (c *conductor) unlinkPublication(link *pubLink) {
	delete(c.pubLinks, link.regID)
	if link.net != nil {
		link.net.refCount--
		if link.net.refCount == 0 {
			link.net.startDraining(c)
		}
		return
	}
	link.pub.refCount--
	if link.pub.refCount == 0 {
		link.pub.startDraining(c)
	}
}

// readsIPC says IPC subscription s reads publication p.
func (s *subLink) readsIPC(p *ipcPublication) bool {
	return s.endpoint == "" && !s.spy && p.acceptingSubscriptions() && p.streamID == s.streamID && (!s.hasSession || s.sessionID == p.sessionID)
}

func (c *conductor) addSubscription(cl *clientSession, cmd cnc.SubscriptionCommand) error {
	u, err := c.parseChannel(cmd.Channel)
	if err != nil {
		return err
	}
	if u.Spy {
		return c.addSpySubscription(cl, cmd, u)
	}
	if u.Media != uri.MediaIPC {
		return c.addNetworkSubscription(cl, cmd, u)
	}
	s := &subLink{regID: cmd.CorrelationID, client: cl, streamID: cmd.StreamID, channel: cmd.Channel, tether: c.tether(u)}
	if s.sessionID, s.hasSession, err = subscriptionSession(u); err != nil {
		return err
	}
	c.subs[s.regID] = s
	c.transmit(cnc.RspOnSubscriptionReady, cnc.AppendIDAndCounter(c.buf[:0], cmd.CorrelationID, channelStatusNotAllocated))
	for _, p := range c.pubs {
		if s.readsIPC(p) {
			p.addSubscriber(c, s)
		}
	}
	return nil
}

func (c *conductor) removeSubscription(cmd cnc.RemoveCommand) error {
	s, ok := c.subs[cmd.RegistrationID]
	if !ok {
		return fail(cnc.ErrorCodeUnknownSubscription, "unknown subscription client_id=%d registration_id=%d", cmd.ClientID, cmd.RegistrationID)
	}
	c.unlinkSubscription(s)
	c.transmit(cnc.RspOnOperationSuccess, cnc.AppendID(c.buf[:0], cmd.CorrelationID))
	return nil
}

func (c *conductor) unlinkSubscription(s *subLink) {
	delete(c.subs, s.regID)
	if s.spy {
		for _, p := range c.netPubs {
			p.removeSpy(c, s)
		}
		return
	}
	if s.endpoint != "" {
		c.unlinkNetworkSubscription(s)
		return
	}
	for _, p := range c.pubs {
		p.removeSubscriber(c, s)
	}
}

func (c *conductor) addCounter(cl *clientSession, cmd cnc.CounterCommand) error {
	if len(cmd.Key) > cnc.MaxKeyLength {
		return fail(cnc.ErrorCodeGenericError, "counter key of %d bytes exceeds %d", len(cmd.Key), cnc.MaxKeyLength)
	}
	if cmd.Static {
		k := [2]int64{int64(cmd.TypeID), cmd.RegistrationID}
		id, ok := c.staticCounters[k]
		if !ok {
			var err error
			if id, err = c.counters.Allocate(cmd.TypeID, cmd.Key, cmd.Label); err != nil {
				return fail(cnc.ErrorCodeGenericError, "%v", err)
			}
			c.counters.SetRegistrationID(id, cmd.RegistrationID)
			c.staticCounters[k] = id
		}
		c.transmit(cnc.RspOnStaticCounter, cnc.AppendIDAndCounter(c.buf[:0], cmd.CorrelationID, id))
		return nil
	}
	id, err := c.counters.Allocate(cmd.TypeID, cmd.Key, cmd.Label)
	if err != nil {
		return fail(cnc.ErrorCodeGenericError, "%v", err)
	}
	c.counters.SetRegistrationID(id, cmd.CorrelationID)
	c.counters.SetOwnerID(id, cl.id)
	c.counterLinks[cmd.CorrelationID] = &counterLink{regID: cmd.CorrelationID, client: cl, id: id}
	c.transmit(cnc.RspOnCounterReady, cnc.AppendIDAndCounter(c.buf[:0], cmd.CorrelationID, id))
	return nil
}

func (c *conductor) removeCounter(cmd cnc.RemoveCommand) error {
	l, ok := c.counterLinks[cmd.RegistrationID]
	if !ok {
		return fail(cnc.ErrorCodeUnknownCounter, "unknown counter client_id=%d registration_id=%d", cmd.ClientID, cmd.RegistrationID)
	}
	c.transmit(cnc.RspOnOperationSuccess, cnc.AppendID(c.buf[:0], cmd.CorrelationID))
	c.freeCounterLink(l)
	return nil
}

func (c *conductor) freeCounterLink(l *counterLink) {
	delete(c.counterLinks, l.regID)
	c.transmit(cnc.RspOnUnavailableCounter, cnc.AppendIDAndCounter(c.buf[:0], l.regID, l.id))
	_ = c.counters.Free(l.id)
}

// releaseClient frees everything a closed or timed-out client held
// (aeron_driver_conductor_on_client_close / client timeout).
func (c *conductor) releaseClient(cl *clientSession) {
	delete(c.clients, cl.id)
	for _, l := range c.pubLinks {
		if l.client == cl {
			c.unlinkPublication(l)
		}
	}
	for _, s := range c.subs {
		if s.client == cl {
			c.unlinkSubscription(s)
		}
	}
	for _, l := range c.counterLinks {
		if l.client == cl {
			c.freeCounterLink(l)
		}
	}
	c.transmit(cnc.RspOnUnavailableCounter, cnc.AppendIDAndCounter(c.buf[:0], cl.id, cl.hbID))
	_ = c.counters.Free(cl.hbID)
}
