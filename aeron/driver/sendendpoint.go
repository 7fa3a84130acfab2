package driver

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
)

// Channel endpoint status values (AERON_COUNTER_CHANNEL_ENDPOINT_STATUS_*):
// the value of a snd-channel, rcv-channel or *-local-sockaddr counter.
const (
	channelStatusInitializing = 0
	channelStatusErrored      = -1
	channelStatusActive       = 1
	channelStatusClosing      = 2
)

// sendEndpoint is a send channel endpoint (aeron_send_channel_endpoint.c):
// one transport per canonical send channel (canonicalSendChannel), shared
// by every network publication on it, exclusive or not. Status messages,
// NAKs and RTT measurements that arrive on it go to the publication of
// their session and stream; the destinations of a multi-destination-cast
// channel are the endpoint's, so every publication on it reaches every
// destination.
//
// The conductor owns canonical, refCount, the counters and the close; the
// sender owns pubs and, once handed the endpoint, the tracker's list.
// released is the one field both touch.
type sendEndpoint struct {
	canonical string
	channel   string // the channel of the publication that opened it (C's original uri)
	media     uri.Media
	t         Transport
	mtu       int   // the MTU the transport was opened for
	regID     int64 // the registration id of the publication that opened it
	// the socket buffer lengths asked for (0: not set) and the ttl of the
	// channel that opened it, which later channels on it must agree with
	// or take (C)
	soSndbuf, soRcvbuf int
	ttl                int32
	// local is the bound address, once open (conductor)
	local string
	// sendDest is where the publications send (the resolved endpoint;
	// invalid for multi-destination-cast): set before the sender gets the
	// endpoint, then the sender's (onResolutionChange)
	sendDest netip.AddrPort
	refCount int // conductor: publications on it

	statusID, localAddrID, numDestID int32
	status                           *atomic.Int64

	// conductor: the endpoint's transport is being opened in the
	// background (BackgroundOpener) while opening; waiting holds the
	// publications to hand to the sender once it is open; handed says the
	// sender has the endpoint; failed says the open failed (ERRORED)
	opening, handed, failed bool
	waiting                 []*networkPublication

	// re-resolution (conductor): host is the endpoint's host name ("" for
	// an IP literal, multicast or multi-destination-cast), dest what it
	// resolved to last; lastSMNs is when a status message for one of its
	// publications last arrived (the sender stores it)
	host      string
	dest      netip.AddrPort
	resolving bool
	lastSMNs  atomic.Int64

	// tag is the channel tag of the channel that opened it (noTag
	// without), controlMode its control-mode= and control its control
	// address (invalid without): what a tagged channel must agree with
	tag         int64
	controlMode string
	control     netip.AddrPort
	// sndTS is channel-snd-ts-offset (tsNone without): where the sender
	// writes the send time into the first frame of each datagram
	sndTS int32

	// mdc lists the destinations of a multi-destination-cast endpoint
	// (nil otherwise); manual is fixed at creation, dests are the sender's
	mdc *destinationTracker
	// named are the manual destinations given by host name (conductor)
	named []*namedDestination

	// sender: the publications by session and stream
	pubs     map[uint64]*networkPublication
	recvFn   RecvFunc
	s        *sender
	released atomic.Bool
}

func dispatchKey(sessionID, streamID int32) uint64 {
	return uint64(uint32(sessionID))<<32 | uint64(uint32(streamID))
}

// sendEndpointFor returns the endpoint of canonical, opening it (transport
// and counters) for the first publication on it; regID is that
// publication's registration id, which the endpoint's counters carry.
func (c *conductor) sendEndpointFor(u *uri.ChannelURI, channel, canonical string, bind, dest netip.AddrPort, mtu int, regID int64) (*sendEndpoint, error) {
	params := c.transportParams(u, mtu)
	ts, err := parseTimestampOffsets(u)
	if err != nil {
		return nil, err
	}
	if e, ok := c.sendEndpoints[canonical]; ok {
		if ts.channelSnd != e.sndTS {
			// send_endpoint_has_clashing_timestamp_offsets
			return nil, tsConflict(uri.KeyChannelSndTimestampOffset, ts.channelSnd, e.channel, channel)
		}
		if e.media != uri.MediaUDP && mtu > e.mtu {
			// a datagram medium sized its buffers for the first
			// publication's MTU
			return nil, fail(cnc.ErrorCodeInvalidChannel, "%s: mtu %d is greater than the mtu %d the endpoint was opened with by %s", channel, mtu, e.mtu, e.channel)
		}
		if err := checkSharedBuffers(u, params, e.soSndbuf, e.soRcvbuf, e.channel, channel); err != nil {
			return nil, err
		}
		return e, nil
	}
	if old, ok := c.closingSendEndpoints[canonical]; ok && old.opening {
		// every publication left while it was opening: its transport is
		// closed once the open returns (C: "found in CLOSING state")
		return nil, fail(cnc.ErrorCodeResourceTemporarilyUnavailable, "%s: send channel endpoint found in CLOSING state, please retry", channel)
	}
	if bind.Port() != 0 {
		// a fixed address (control=, a multicast group) may be taken
		// still by the endpoint just closed
		c.awaitSendEndpointClosed(canonical)
	}
	med, _ := c.media.lookup(u.Media)
	e := &sendEndpoint{canonical: canonical, channel: channel, media: u.Media, mtu: mtu, regID: regID,
		statusID: -1, localAddrID: -1, numDestID: -1, pubs: map[uint64]*networkPublication{}, sendDest: dest}
	if u.Has(uri.KeySocketSndbuf) {
		e.soSndbuf = params.SocketSndbuf
	}
	if u.Has(uri.KeySocketRcvbuf) {
		e.soRcvbuf = params.SocketRcvbuf
	}
	if v, ok := u.Int(uri.KeyTTL); ok {
		e.ttl = int32(v)
	}
	e.recvFn = e.onControl
	e.tag = channelTag(u)
	e.sndTS = ts.channelSnd
	e.controlMode, _ = u.Get(uri.KeyControlMode)
	if u.Has(uri.KeyControl) {
		e.control = bind
	}
	if mdc, manual := mdcMode(u); mdc {
		e.mdc = &destinationTracker{manual: manual}
	} else if ep, ok := u.Endpoint(); ok && !ep.IP.IsValid() && !dest.Addr().IsMulticast() {
		e.host = ep.Host
	}
	e.dest = dest
	e.lastSMNs.Store(c.nowNs)
	if bo, ok := med.(BackgroundOpener); ok {
		if err := bo.CheckOpen(u, bind, dest, params, AffinitySender); err != nil {
			return nil, fail(cnc.ErrorCodeInvalidChannel, "%s: %v", channel, err)
		}
		if err := e.allocateCounters(c, regID); err != nil {
			e.free(c)
			return nil, err
		}
		e.opening = true
		c.sendEndpoints[canonical] = e
		c.opens.start(func(ctx context.Context) (Transport, error) {
			return bo.OpenContext(ctx, u, bind, dest, params, AffinitySender)
		}, func(t Transport, err error) {
			c.onSendEndpointOpened(e, t, err)
		})
		return e, nil
	}
	t, err := med.Open(u, bind, dest, params, AffinitySender)
	if err != nil {
		return nil, fail(cnc.ErrorCodeInvalidChannel, "%s: %v", channel, err)
	}
	e.t = t
	e.local = t.LocalAddr()
	if err := e.allocateCounters(c, regID); err != nil {
		e.free(c)
		return nil, err
	}
	c.sendEndpoints[canonical] = e
	e.activate(c)
	return e, nil
}

// activate hands the open endpoint to the sender, then the publications
// that waited for it, and says ACTIVE.
func (e *sendEndpoint) activate(c *conductor) {
	e.handed = true
	snd := c.snd
	c.senderProxy.offer(func() { snd.onAddEndpoint(e) })
	for _, p := range e.waiting {
		if p.state != pubDone {
			p.handToSender(c)
		}
	}
	e.waiting = nil
	e.status.Store(channelStatusActive)
}

// onSendEndpointOpened is the conductor's end of a background open.
func (c *conductor) onSendEndpointOpened(e *sendEndpoint, t Transport, err error) {
	e.opening = false
	if e.refCount <= 0 {
		// every publication went while it opened
		if t != nil {
			_ = t.Close()
		}
		e.free(c)
		if c.closingSendEndpoints[e.canonical] == e {
			delete(c.closingSendEndpoints, e.canonical)
		}
		return
	}
	if err != nil {
		e.failed = true
		e.status.Store(channelStatusErrored)
		if c.sendEndpoints[e.canonical] == e {
			delete(c.sendEndpoints, e.canonical) // the next publication tries again
		}
		msg := fmt.Sprintf("%s: %v", e.channel, err)
		c.recordError(cnc.ErrorCodeChannelEndpointError, msg)
		// C's channel endpoint error: the offending id is the status
		// counter's, which clients match to their publications
		c.transmit(cnc.RspOnError, cnc.AppendErrorResponse(c.buf[:0], cnc.ErrorResponse{OffendingCorrelationID: int64(e.statusID),
			Code: cnc.ErrorCodeChannelEndpointError, Message: msg}))
		return
	}
	e.t = t
	local := t.LocalAddr()
	e.local = local
	c.counters.UpdateLabel(e.statusID, "snd-channel: "+e.channel+" "+local)
	if id, err := allocateLocalSockaddr(c, "snd-local-sockaddr", e.statusID, local, e.regID); err == nil {
		e.localAddrID = id
	}
	fmt.Fprintf(c.log, "send endpoint %s: open from %s\n", e.channel, local)
	e.activate(c)
}

// allocateCounters: snd-channel (label with the bound address, as the C
// driver updates it), snd-local-sockaddr and, multi-destination-cast,
// mdc-num-dest (aeron_send_channel_endpoint_create).
func (e *sendEndpoint) allocateCounters(c *conductor, regID int64) error {
	local := ""
	if e.t != nil {
		local = e.t.LocalAddr()
	}
	var err error
	if e.statusID, err = allocateChannelStatus(c, cnc.TypeSendChannelStatus, "snd-channel", e.channel, local, regID); err != nil {
		return err
	}
	e.status = c.counters.Value(e.statusID)
	if e.t != nil {
		if e.localAddrID, err = allocateLocalSockaddr(c, "snd-local-sockaddr", e.statusID, local, regID); err != nil {
			return err
		}
	}
	if e.mdc != nil {
		if e.numDestID, err = allocateChannelStatus(c, cnc.TypeMDCDestinations, "mdc-num-dest", e.channel, "", regID); err != nil {
			return err
		}
		e.mdc.count = c.counters.Value(e.numDestID)
	}
	return nil
}

// allocateChannelStatus allocates a channel endpoint status counter
// (aeron_channel_endpoint_status_allocate): its key is the channel's
// length and bytes, its label "<name>: <channel>[ <local address>]".
func allocateChannelStatus(c *conductor, typeID int32, name, channel, local string, regID int64) (int32, error) {
	n := min(len(channel), cnc.MaxKeyLength-4)
	key := append(c.keyBuf[:0], byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	key = append(key, channel[:n]...)
	label := name + ": " + channel
	if local != "" {
		label += " " + local
	}
	id, err := c.counters.Allocate(typeID, key, label)
	if err != nil {
		return -1, fail(cnc.ErrorCodeGenericError, "%v", err)
	}
	c.counters.SetRegistrationID(id, regID)
	return id, nil
}

// allocateLocalSockaddr allocates a *-local-sockaddr counter
// (aeron_counter_local_sockaddr_indicator_allocate): key channel status
// id, length and address; label "<name>: <status id> <address>"; value
// ACTIVE.
func allocateLocalSockaddr(c *conductor, name string, statusID int32, local string, regID int64) (int32, error) {
	n := min(len(local), cnc.MaxKeyLength-9)
	key := append(c.keyBuf[:0], byte(statusID), byte(statusID>>8), byte(statusID>>16), byte(statusID>>24),
		byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	key = append(key, local[:n]...)
	id, err := c.counters.Allocate(cnc.TypeLocalSockAddr, key, fmt.Sprintf("%s: %d %s", name, statusID, local))
	if err != nil {
		return -1, fail(cnc.ErrorCodeGenericError, "%v", err)
	}
	c.counters.SetRegistrationID(id, regID)
	c.counters.Value(id).Store(channelStatusActive)
	return id, nil
}

// release drops a publication's reference; the last one closes the
// endpoint once the sender let go of it (aeron_send_channel_endpoint_decref).
func (e *sendEndpoint) release(c *conductor) {
	e.refCount--
	if e.refCount > 0 {
		return
	}
	if c.sendEndpoints[e.canonical] == e {
		delete(c.sendEndpoints, e.canonical)
	}
	e.status.Store(channelStatusClosing)
	if !e.handed {
		// never open: still opening (onSendEndpointOpened closes what
		// the open gives; until then a new publication on the channel
		// is asked to retry), or failed
		if e.opening {
			c.closingSendEndpoints[e.canonical] = e
		} else {
			e.free(c)
		}
		return
	}
	c.closingSendEndpoints[e.canonical] = e
	snd := c.snd
	c.senderProxy.offer(func() { snd.onRemoveEndpoint(e) })
	c.awaitRelease(&e.released, func() {
		if c.closingSendEndpoints[e.canonical] == e {
			delete(c.closingSendEndpoints, e.canonical)
		}
		e.free(c)
	})
}

// free closes the transport and frees the counters.
func (e *sendEndpoint) free(c *conductor) {
	if e.t != nil {
		_ = e.t.Close()
		e.t = nil
	}
	for _, id := range []int32{e.statusID, e.localAddrID, e.numDestID} {
		if id >= 0 {
			_ = c.counters.Free(id)
		}
	}
	e.statusID, e.localAddrID, e.numDestID = -1, -1, -1
}

// awaitSendEndpointClosed waits, briefly, for the sender to let go of an
// endpoint of canonical that the conductor closed just before, so that a
// new one can bind the same control address.
func (c *conductor) awaitSendEndpointClosed(canonical string) {
	e, ok := c.closingSendEndpoints[canonical]
	if !ok {
		return
	}
	for deadline := time.Now().Add(time.Second); !e.released.Load() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Microsecond)
	}
	c.freeReleased()
}

// onAddEndpoint: aeron_driver_sender_on_add_endpoint.
func (s *sender) onAddEndpoint(e *sendEndpoint) {
	e.s = s
	s.endpoints = append(s.endpoints, e)
}

// onRemoveEndpoint: aeron_driver_sender_on_remove_endpoint; the conductor
// closes the transport once released is set.
func (s *sender) onRemoveEndpoint(e *sendEndpoint) {
	for i, x := range s.endpoints {
		if x == e {
			s.endpoints = append(s.endpoints[:i], s.endpoints[i+1:]...)
			break
		}
	}
	e.released.Store(true)
}

// poll reads the control frames that arrived (the sender's poll of its
// transports in aeron_driver_sender_do_work).
func (e *sendEndpoint) poll() int {
	n, _ := e.t.Recv(controlPollPerDuty, e.recvFn)
	if e.mdc != nil {
		e.mdc.checkTimeouts(e.s.nowNs)
	}
	return n
}

// onControl dispatches a frame from a receiver to the publication of its
// session and stream (aeron_send_channel_endpoint_dispatch and its
// on_status_message / on_nak / on_rttm). Malformed frames are dropped and
// counted.
func (e *sendEndpoint) onControl(_ Transport, buf []byte, from netip.AddrPort, _ int64) {
	c := e.s
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
		if e.mdc != nil {
			// any status message registers (dynamic) or refreshes its
			// sender as a destination, before the publication is looked
			// up: the C receiver's periodic pending setup to the control
			// address carries session 0 and stream 0
			// (aeron_send_channel_endpoint_on_status_message)
			e.mdc.onStatusMessage(from, c.nowNs)
		}
		c.sys[sysStatusMessagesReceived].Add(1)
		if p := e.pubs[dispatchKey(sm.SessionID, sm.StreamID)]; p != nil {
			if p.isResponse && sm.Flags&protocol.SMFlagSetup != 0 {
				// the response subscription asks for SETUP: it is where
				// the response publication sends from now on
				// (aeron_network_publication_trigger_send_setup_frame)
				p.respDest = from
			}
			e.lastSMNs.Store(c.nowNs)
			p.onStatus(c, &sm)
			return
		}
		if e.mdc != nil && !e.mdc.manual && sm.SessionID == 0 && sm.Flags&protocol.SMFlagSetup != 0 {
			// ibgo's receivers ask for SETUP with session 0 and their
			// stream until they have an image: every publication of the
			// stream answers
			for _, p := range e.pubs {
				if p.streamID == sm.StreamID {
					p.onStatus(c, &sm)
				}
			}
		}
	case protocol.TypeNak:
		var nak protocol.Nak
		if nak.Decode(buf) != nil {
			c.sys[sysInvalidPackets].Add(1)
			return
		}
		c.sys[sysNaksReceived].Add(1)
		if p := e.pubs[dispatchKey(nak.SessionID, nak.StreamID)]; p != nil {
			p.onNak(c, nak.TermID, nak.TermOffset, nak.Length)
		}
	case protocol.TypeRTTM:
		var r protocol.RTTMeasurement
		if r.Decode(buf) != nil {
			c.sys[sysInvalidPackets].Add(1)
			return
		}
		if p := e.pubs[dispatchKey(r.SessionID, r.StreamID)]; p != nil && r.Flags&protocol.RTTMFlagReply != 0 {
			p.onRTTM(c, &r, from)
		}
	case protocol.TypeError:
		var ef protocol.ErrorFrame
		if ef.Decode(buf) != nil {
			c.sys[sysInvalidPackets].Add(1)
			return
		}
		c.sys[sysErrorFramesReceived].Add(1)
		if p := e.pubs[dispatchKey(ef.SessionID, ef.StreamID)]; p != nil {
			destRegID := int64(-1)
			if e.mdc != nil {
				destRegID = e.mdc.registrationID(from)
			}
			p.onErrorFrame(c, &ef, from, destRegID)
		}
	case protocol.TypeResponseSetup:
		var rs protocol.ResponseSetup
		if rs.Decode(buf) != nil {
			c.sys[sysInvalidPackets].Add(1)
			return
		}
		// the server's request image names the session of the response
		// publication answering this request publication
		// (aeron_send_channel_endpoint_on_response_setup)
		if p := e.pubs[dispatchKey(rs.SessionID, rs.StreamID)]; p != nil && p.params.responseCorrelationID != -1 && c.toConductor != nil {
			cd, id, session := c.conductor, p.params.responseCorrelationID, rs.ResponseSessionID
			c.toConductor.tryOffer(func() { cd.onResponseSetup(id, session) })
		}
	default:
		// other types are ignored, as C's dispatch does
	}
}

// onPublicationError logs a receiver's ERR frame and tells clients
// (aeron_driver_conductor_on_publication_error).
func (c *conductor) onPublicationError(pe cnc.PublicationError) {
	c.recordError(int(pe.ErrorCode), fmt.Sprintf("onPublicationError: registrationId=%d, destinationRegistrationId=%d, sessionId=%d, streamId=%d, receiverId=%d, groupId=%d, errorCode=%d, errorMessage=%s",
		pe.RegistrationID, pe.DestinationRegistrationID, pe.SessionID, pe.StreamID, pe.ReceiverID, pe.GroupTag, pe.ErrorCode, pe.Message))
	c.transmit(cnc.RspOnPublicationError, cnc.AppendPublicationError(c.buf[:0], pe))
}

// reresolveAfterNs: a send endpoint named by a host name is resolved
// again once no status message came for this long
// (AERON_SEND_CHANNEL_ENDPOINT_DESTINATION_TIMEOUT_NS); a variable for
// tests.
var reresolveAfterNs int64 = 5_000_000_000

// checkReResolution resolves again, off the conductor, the host names of
// the send endpoints that heard no status message for reresolveAfterNs,
// every AERON_DRIVER_RERESOLUTION_CHECK_INTERVAL
// (aeron_send_channel_endpoint_check_for_re_resolution, which C's sender
// runs and its conductor's executor resolves); a new address goes to the
// sender, which reconnects the transport and counts a resolution change.
func (c *conductor) checkReResolution() {
	every := c.cfg.ReResolutionCheckInterval.Nanoseconds()
	if every <= 0 || c.nowNs-c.lastReResolutionNs < every {
		return
	}
	c.lastReResolutionNs = c.nowNs
	for _, e := range c.endpoints {
		c.reresolveControl(e)
	}
	for _, e := range c.sendEndpoints {
		if len(e.named) > 0 && e.handed {
			c.reresolveDestinations(e)
		}
		if e.host == "" || !e.handed || e.resolving || c.nowNs-e.lastSMNs.Load() <= reresolveAfterNs {
			continue
		}
		e.resolving = true
		host, port := e.host, e.dest.Port()
		c.opens.resolve(host, func(a netip.Addr, err error) {
			e.resolving = false
			if c.sendEndpoints[e.canonical] != e {
				return // closed meanwhile
			}
			if err != nil {
				c.recordError(cnc.ErrorCodeUnknownHost, fmt.Sprintf("%s: re-resolve endpoint: Unresolved - endpoint=%s: %v", e.channel, host, err))
				return
			}
			to := netip.AddrPortFrom(a, port)
			if to == e.dest {
				return
			}
			fmt.Fprintf(c.log, "send endpoint %s: %s now resolves to %s (was %s)\n", e.channel, host, to, e.dest)
			e.dest = to
			snd := c.snd
			c.senderProxy.offer(func() { snd.onResolutionChange(e, to) })
		})
	}
}

// dropNamed forgets the named destination at addr (or, addr invalid,
// added by regID).
func (e *sendEndpoint) dropNamed(addr netip.AddrPort, regID int64) {
	for i, d := range e.named {
		if (addr.IsValid() && d.addr == addr) || (!addr.IsValid() && d.regID == regID) {
			e.named = append(e.named[:i], e.named[i+1:]...)
			return
		}
	}
}

// reresolveDestinations resolves again the names of an endpoint's manual
// destinations that sent no status message for the destination timeout
// (aeron_udp_destination_tracker_check_for_re_resolution); a new address
// moves the destination and counts in system counter 25.
func (c *conductor) reresolveDestinations(e *sendEndpoint) {
	for _, d := range e.named {
		if d.resolving || c.nowNs-d.seen.Load() <= reresolveAfterNs {
			continue
		}
		d.resolving = true
		d.seen.Store(c.nowNs) // once per timeout, as C updates the activity time
		c.opens.resolve(d.host, func(a netip.Addr, err error) {
			d.resolving = false
			if c.sendEndpoints[e.canonical] != e || !containsNamed(e.named, d) {
				return // gone meanwhile
			}
			if err != nil {
				c.recordError(cnc.ErrorCodeUnknownHost, fmt.Sprintf("%s: re-resolve destination: Unresolved - endpoint=%s: %v", e.channel, d.host, err))
				return
			}
			to := netip.AddrPortFrom(a, d.addr.Port())
			if to == d.addr {
				return
			}
			fmt.Fprintf(c.log, "send endpoint %s: destination %s now resolves to %s (was %s)\n", e.channel, d.host, to, d.addr)
			d.addr = to
			snd, reg := c.snd, d.regID
			c.senderProxy.offer(func() {
				if e.mdc.readdress(reg, to) {
					snd.sys[sysResolutionChanges].Add(1)
				}
			})
		})
	}
}

func containsNamed(ds []*namedDestination, d *namedDestination) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

// onResolutionChange: the endpoint's host name resolves to another
// address (aeron_send_channel_endpoint_resolution_change): the transport
// reconnects there and the publications send there.
func (s *sender) onResolutionChange(e *sendEndpoint, to netip.AddrPort) {
	if err := e.t.Reconnect(to); err != nil {
		// the endpoint keeps sending where it did
		if s.report != nil {
			s.report(cnc.ErrorCodeGenericError, fmt.Sprintf("%s: failed to reconnect transport with re-resolved address: %v", e.channel, err))
		}
		return
	}
	e.sendDest = to
	s.sys[sysResolutionChanges].Add(1)
}
