package driver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
)

// checkNetworkChannel refuses what the network slice does not do yet.
func checkNetworkChannel(u *uri.ChannelURI, channel string, med Media) error {
	if err := checkKeys(u, channel, med); err != nil {
		return err
	}
	if u.Has(uri.KeyTags) && u.Media != uri.MediaUDP {
		return fail(cnc.ErrorCodeInvalidChannel, "%s: tags are only supported on aeron:udp by this driver", channel)
	}
	if responseMode(u) {
		if u.Media != uri.MediaUDP {
			return fail(cnc.ErrorCodeInvalidChannel, "%s: control-mode=response is only supported on aeron:udp by this driver", channel)
		}
		if !u.Has(uri.KeyControl) {
			return fail(cnc.ErrorCodeInvalidChannel, "%s: control-mode=response needs control=host:port (where the response publication's endpoint is)", channel)
		}
		return nil
	}
	if mdc, _ := mdcMode(u); mdc && !u.Has(uri.KeyEndpoint) {
		return nil // a multi-destination-cast publication; subscriptions check for an endpoint
	}
	ep, ok := u.Endpoint()
	if !ok && u.Media == uri.MediaUDP && channelTag(u) != noTag {
		return nil // a tag names the endpoint
	}
	if !ok || !ep.HasPort {
		return fail(cnc.ErrorCodeInvalidChannel, "%s: aeron:%s needs endpoint=host:port", channel, u.Media)
	}
	if !ep.Multicast() && u.Has(uri.KeyInterface) {
		return fail(cnc.ErrorCodeInvalidChannel, "%s: interface is only supported on multicast channels by this driver yet", channel)
	}
	return nil
}

// isAddressLiteral says host:port v names an IP address, not a host.
func isAddressLiteral(v string) bool {
	a, err := uri.ParseAddress(v)
	return err == nil && a.IP.IsValid()
}

// responseMode says u is a response channel (control-mode=response): a
// response subscription, or the response publication of a server.
func responseMode(u *uri.ChannelURI) bool {
	mode, _ := u.Get(uri.KeyControlMode)
	return mode == uri.ControlModeResponse
}

// resolveEndpoint turns endpoint=host:port into an address (names via the
// system resolver, IPv4 preferred as the C driver does).
func (c *conductor) resolveEndpoint(u *uri.ChannelURI) (netip.AddrPort, error) {
	return c.resolveAddress(u, uri.KeyEndpoint)
}

// resolveAddress resolves the host:port of key (endpoint or control).
func (c *conductor) resolveAddress(u *uri.ChannelURI, key string) (netip.AddrPort, error) {
	v, _ := u.Get(key)
	ep, err := uri.ParseAddress(v)
	if err != nil || !ep.HasPort {
		return netip.AddrPort{}, fail(cnc.ErrorCodeInvalidChannel, "%s=%q: want host:port", key, v)
	}
	if ep.IP.IsValid() {
		return netip.AddrPortFrom(ep.IP.Unmap(), ep.Port), nil
	}
	if a, ok := c.names[ep.Host]; ok {
		return netip.AddrPortFrom(a, ep.Port), nil // looked up off the conductor
	}
	if err, ok := c.nameErrs[ep.Host]; ok {
		return netip.AddrPort{}, fail(cnc.ErrorCodeUnknownHost, "%s %s: cannot resolve %q: %v", key, ep, ep.Host, err)
	}
	a, err := lookupHost(context.Background(), ep.Host)
	if err != nil {
		return netip.AddrPort{}, fail(cnc.ErrorCodeUnknownHost, "%s %s: cannot resolve %q: %v", key, ep, ep.Host, err)
	}
	return netip.AddrPortFrom(a, ep.Port), nil
}

// lookupNetIP is the system resolver; a variable so that tests can name
// hosts.
var lookupNetIP = net.DefaultResolver.LookupNetIP

// lookupHost resolves a host name, IPv4 preferred as the C driver does,
// within 2 s.
func lookupHost(parent context.Context, host string) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(parent, 2*time.Second)
	defer cancel()
	addrs, err := lookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("no address")
	}
	best := addrs[0].Unmap()
	for _, a := range addrs {
		if a.Unmap().Is4() {
			best = a.Unmap()
			break
		}
	}
	return best, nil
}

func (c *conductor) transportParams(u *uri.ChannelURI, mtu int) TransportParams {
	p := TransportParams{SocketRcvbuf: c.cfg.SocketRcvbuf, SocketSndbuf: c.cfg.SocketSndbuf, MTU: mtu}
	if v, ok := u.Size(uri.KeySocketRcvbuf); ok {
		p.SocketRcvbuf = int(v)
	}
	if v, ok := u.Size(uri.KeySocketSndbuf); ok {
		p.SocketSndbuf = int(v)
	}
	if v, ok := u.Int(uri.KeyTTL); ok {
		p.MulticastTTL = int(v)
	}
	if ts, err := parseTimestampOffsets(u); err == nil {
		p.MediaTimestamps = tsEnabled(ts.mediaRcv)
	}
	return p
}

// canonicalSendChannel names a send channel endpoint as the C driver's
// canonical form does (aeron_uri_udp_canonicalise: the local interface or
// control address and the remote endpoint): the medium, where data goes
// (endpoint) or where receivers report (control), and the keys that
// change the endpoint on the wire (interface, control-mode, ib-qp); not
// the order of the parameters nor the log's.
func canonicalSendChannel(u *uri.ChannelURI, dest, control netip.AddrPort, regID int64) string {
	remote := dest.String()
	if ep, ok := u.Endpoint(); ok && ep.HasPort && !ep.IP.IsValid() && !dest.Addr().IsMulticast() {
		// a name, as written (C's remote_param_value): re-resolving it
		// keeps the endpoint
		remote = ep.String()
	}
	key := string(u.Media) + "|" + remote + "|" + control.String()
	for _, k := range []string{uri.KeyInterface, uri.KeyControlMode, uri.KeyIBQueuePair, uri.KeyIBMode} {
		if v, ok := u.Get(k); ok {
			key += "|" + k + "=" + v
		}
	}
	// a channel with neither endpoint nor control, or with a wildcard
	// port, names no address to share: each publication gets its own
	// endpoint (C's requires_additional_suffix in aeron_udp_channel.c)
	if (!u.Has(uri.KeyEndpoint) && !u.Has(uri.KeyControl)) ||
		(u.Has(uri.KeyEndpoint) && dest.Port() == 0) || (u.Has(uri.KeyControl) && control.Port() == 0) {
		// the tag when there is one, so that tagged channels share it
		// (C's "#<tag>" suffix)
		if tag := channelTag(u); tag != noTag {
			key += "|#t" + strconv.FormatInt(tag, 10)
		} else if regID != 0 {
			key += "|#" + strconv.FormatInt(regID, 10)
		}
	}
	return key
}

func (c *conductor) addNetworkPublication(cl *clientSession, cmd cnc.PublicationCommand, u *uri.ChannelURI, exclusive bool) error {
	params, err := parseIPCParams(u, c.cfg)
	if err != nil {
		return err
	}
	// network defaults differ from IPC's
	if _, ok := u.Size(uri.KeyTermLength); !ok {
		params.termLength = c.cfg.TermBufferLength
	}
	if _, ok := u.Size(uri.KeyMTU); !ok {
		params.mtu = c.cfg.MTULength
	}
	if err := c.applySessionTag(&params); err != nil {
		return err
	}
	if params.mtu > params.termLength/8 {
		return fail(cnc.ErrorCodeInvalidChannel, "mtu %d is greater than term-length/8 (%d)", params.mtu, params.termLength/8)
	}
	if err := checkMTUForSndbuf(u, c.cfg, params.mtu); err != nil {
		return err
	}
	mdc, _ := mdcMode(u)
	dest, control, canonical, err := c.resolveTaggedSendChannel(u, cmd.Channel, cmd.CorrelationID)
	if err != nil {
		return err
	}
	if e, ok := c.sendEndpoints[canonical]; ok && e.mdc != nil {
		mdc = true // a tagged channel on a multi-destination-cast endpoint
	}
	isResponse := responseMode(u)
	var request *publicationImage
	if isResponse {
		if request, err = c.responseImage(params.responseCorrelationID); err != nil {
			return err
		}
	} else if id := params.responseCorrelationID; id != -1 {
		// a request publication: its response subscription must exist
		// (aeron_driver_conductor_validate_response_subscription)
		if s, ok := c.subs[id]; !ok || s.endpoint == "" {
			return fail(cnc.ErrorCodeGenericError, "unable to find response subscription for response-correlation-id=%d", id)
		}
	}
	if dest.Addr().IsMulticast() || mdc {
		if _, err := parseFlowControl(u, c.cfg.Network); err != nil {
			return fail(cnc.ErrorCodeInvalidChannel, "%s: %v", cmd.Channel, err)
		}
	}
	var pub *networkPublication
	if !exclusive {
		// matched by endpoint and stream as the C driver
		// (aeron_driver_conductor_get_or_add_network_publication), not by
		// the raw channel string: parameters in another order, or others
		// that do not change the endpoint, share the publication; those
		// that define the log must agree
		for _, p := range c.netPubs {
			if p.state == pubActive && !p.exclusive && !p.ep.failed && p.streamID == cmd.StreamID && p.canonical == canonical &&
				(!params.hasSession || p.sessionID == params.sessionID) && p.params.responseCorrelationID == params.responseCorrelationID {
				if err := checkSharedParams(p.params, p.initialTermID, params); err != nil {
					return err
				}
				pub = p
				break
			}
		}
	}
	if pub == nil {
		if params.hasSession {
			for _, p := range c.netPubs {
				if p.state != pubDone && !p.ep.failed && p.sessionID == params.sessionID && p.streamID == cmd.StreamID && p.canonical == canonical {
					return fail(cnc.ErrorCodeGenericError, "specified session-id %d is already in use for stream-id %d", params.sessionID, cmd.StreamID)
				}
			}
		} else {
			params.sessionID = c.nextSessionID()
		}
		bind := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		if dest.Addr().Is6() {
			bind = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
		}
		if dest.Addr().IsMulticast() {
			// status messages and NAKs arrive on the control group
			if bind, err = multicastControl(dest); err != nil {
				return err
			}
		}
		if control.IsValid() {
			// multi-destination-cast: receivers' status messages (and,
			// dynamic, their registration) come to the control address
			bind = control
		}
		ep, err := c.sendEndpointFor(u, cmd.Channel, canonical, bind, dest, params.mtu, cmd.CorrelationID)
		if err != nil {
			return err
		}
		// the endpoint's current address: a name shared by publications
		// resolves to one address, the endpoint's
		pub, err = newNetworkPublication(c, cl, cmd.CorrelationID, cmd.StreamID, cmd.Channel, exclusive, params, ep.dest)
		if err != nil {
			if ep.refCount == 0 {
				ep.refCount = 1
				ep.release(c)
			}
			return err
		}
		pub.ep = ep
		ep.refCount++
		pub.canonical = canonical
		pub.isResponse = isResponse
		// multi-destination-cast uses the multicast strategies, as
		// aeron_driver_conductor_get_or_add_send_channel_endpoint's
		// supplier choice does
		if pub.fc, err = newFlowControl(c, u, dest.Addr().IsMulticast() || mdc, pub.regID, pub.sessionID, pub.streamID, cmd.Channel); err != nil {
			pub.close(c)
			return err
		}
		if dest.Addr().IsMulticast() {
			maxResend := c.cfg.Network.MaxResend
			if v, ok := u.Int(uri.KeyMaxResend); ok {
				maxResend = int(v)
			}
			pub.rtx = newRetransmitHandler(true, maxResend) // group semantics, announced in SETUP
			pub.group = true
			pub.ttl = ep.ttl // the endpoint's socket's, as C's SETUP says
		}
		pub.rcvWindow = min(int64(params.termLength)/2, int64(c.cfg.InitialWindowLength))
		c.netPubs = append(c.netPubs, pub)
		pub.media = u.Media
		if ep.handed {
			pub.handToSender(c)
		} else {
			// the endpoint opens in the background: the sender gets the
			// publication with it (sendEndpoint.activate)
			ep.waiting = append(ep.waiting, pub)
		}
		defer func() {
			for _, s := range c.subs {
				if s.spies(pub) {
					pub.addSpy(c, s)
				}
			}
		}()
		from := ep.local
		if from == "" {
			from = "(opening)"
		}
		fmt.Fprintf(c.log, "publication %d: session %d stream %d %s from %s\n", pub.regID, pub.sessionID, pub.streamID, dest, from)
	}
	if request != nil {
		// the request image's receiver tells the requester which session
		// answers (RSP_SETUP) until this publication is connected
		// (aeron_publication_image_set_response_session_id)
		request.responseSession.Store(int64(pub.sessionID))
	}
	pub.refCount++
	c.pubLinks[cmd.CorrelationID] = &pubLink{regID: cmd.CorrelationID, client: cl, net: pub}
	rsp := int32(cnc.RspOnPublicationReady)
	if exclusive {
		rsp = cnc.RspOnExclusivePublicationReady
	}
	c.transmit(rsp, cnc.AppendPublicationReady(c.buf[:0], cnc.PublicationReady{
		CorrelationID: cmd.CorrelationID, RegistrationID: pub.regID, SessionID: pub.sessionID, StreamID: pub.streamID,
		PublicationLimitCounterID: pub.pubLmtID, ChannelStatusIndicatorID: pub.ep.statusID, LogFile: pub.logFile}))
	return nil
}

// resolveSendChannel resolves where a publication channel sends (endpoint;
// none for multi-destination-cast and response publications) and where its
// receivers report (control=: multi-destination-cast, response channels),
// and names its send endpoint.
// regID makes the name unique where the channel names no address to
// share (0: spies, which match what exists).
func (c *conductor) resolveSendChannel(u *uri.ChannelURI, regID int64) (dest, control netip.AddrPort, canonical string, err error) {
	if mdc, _ := mdcMode(u); mdc || responseMode(u) {
		if u.Has(uri.KeyControl) {
			if control, err = c.resolveAddress(u, uri.KeyControl); err != nil {
				return
			}
		}
	} else if dest, err = c.resolveEndpoint(u); err != nil {
		return
	}
	return dest, control, canonicalSendChannel(u, dest, control, regID), nil
}

// addSpySubscription links an aeron-spy: subscription to every network
// publication of its channel and stream (aeron_driver_conductor_on_add_spy_subscription):
// the spy reads the publication's own log, joining at the sender position.
func (c *conductor) addSpySubscription(cl *clientSession, cmd cnc.SubscriptionCommand, u *uri.ChannelURI) error {
	tag := channelTag(u)
	canonical := ""
	if tag == noTag || u.Has(uri.KeyEndpoint) || u.Has(uri.KeyControl) {
		// a tag alone names the publications it spies on
		var err error
		if _, _, canonical, err = c.resolveSendChannel(u, 0); err != nil {
			return err
		}
	}
	s := &subLink{regID: cmd.CorrelationID, client: cl, streamID: cmd.StreamID, channel: cmd.Channel, spy: true, spyCanonical: canonical,
		spyTag: tag, tether: c.tether(u)}
	var err error
	if s.sessionID, s.hasSession, err = subscriptionSession(u); err != nil {
		return err
	}
	c.subs[s.regID] = s
	c.transmit(cnc.RspOnSubscriptionReady, cnc.AppendIDAndCounter(c.buf[:0], cmd.CorrelationID, channelStatusNotAllocated))
	for _, p := range c.netPubs {
		if s.spies(p) {
			p.addSpy(c, s)
		}
	}
	return nil
}

// spies says whether spy subscription s reads publication p
// (aeron_driver_conductor_spy_subscription_link_matches: same channel and
// stream, session if given; only publications still accepting).
func (s *subLink) spies(p *networkPublication) bool {
	if !s.spy || !p.acceptingSubscriptions() || p.streamID != s.streamID {
		return false
	}
	if s.spyTag != noTag && s.spyTag == p.ep.tag {
		return true // the same channel tag, whatever the session (C)
	}
	return s.spyCanonical != "" && p.canonical == s.spyCanonical && (!s.hasSession || s.sessionID == p.sessionID)
}

func (c *conductor) addNetworkSubscription(cl *clientSession, cmd cnc.SubscriptionCommand, u *uri.ChannelURI) error {
	mds := false
	if mode, _ := u.Get(uri.KeyControlMode); mode == uri.ControlModeManual {
		// a multi-destination subscription: its sockets are the
		// destinations the client adds (mds.go)
		if u.Has(uri.KeyEndpoint) || u.Has(uri.KeyControl) {
			return fail(cnc.ErrorCodeInvalidChannel, "%s: a multi-destination subscription (control-mode=manual) takes its endpoints from receive destinations, not endpoint= or control=", cmd.Channel)
		}
		if u.Media != uri.MediaUDP {
			return fail(cnc.ErrorCodeInvalidChannel, "%s: multi-destination subscriptions are only supported on aeron:udp", cmd.Channel)
		}
		mds = true
	}
	// a response subscription binds its endpoint, else an ephemeral port,
	// and learns its session from the request publication's RSP_SETUP
	respSub := responseMode(u)
	tag := channelTag(u)
	if !u.Has(uri.KeyEndpoint) && !mds && !respSub && tag == noTag {
		return fail(cnc.ErrorCodeInvalidChannel, "%s: a subscription needs endpoint=host:port", cmd.Channel)
	}
	var bind netip.AddrPort
	var err error
	if u.Has(uri.KeyEndpoint) {
		if bind, err = c.resolveEndpoint(u); err != nil {
			return err
		}
	}
	var control netip.AddrPort
	if u.Has(uri.KeyControl) {
		// dynamic multi-destination-cast: status messages go to the
		// publication's control address, which learns this receiver from them
		if control, err = c.resolveAddress(u, uri.KeyControl); err != nil {
			return err
		}
		if bind.Addr().IsMulticast() {
			return fail(cnc.ErrorCodeInvalidChannel, "%s: control= with a multicast endpoint is not supported", cmd.Channel)
		}
	}
	if respSub {
		if control.Port() == 0 {
			return fail(cnc.ErrorCodeInvalidChannel, "control has port=0 for subscription: channel=%s", cmd.Channel)
		}
		if !bind.IsValid() {
			bind = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
			if control.Addr().Is6() {
				bind = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
			}
		}
	}
	var tagged *receiveEndpoint
	if tag != noTag {
		if tagged, err = c.receiveEndpointByTag(u, cmd.Channel, tag, bind, control); err != nil {
			return err
		}
		if tagged == nil && !bind.IsValid() && !mds {
			// a tag that names no endpoint yet, and no address: the
			// wildcard, as C binds
			bind = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		}
	}
	key := bind.String()
	if respSub {
		// its own endpoint: the response publication learns where it
		// sends from the endpoint's requests for SETUP
		key = "rsp/" + strconv.FormatInt(cmd.CorrelationID, 10)
	} else if tag != noTag && bind.Port() == 0 && !mds {
		key += "#t" + strconv.FormatInt(tag, 10)
	}
	if mds {
		// each multi-destination subscription is its own endpoint
		key = "mds/" + strconv.FormatInt(cmd.CorrelationID, 10)
	}
	if u.Media != uri.MediaUDP {
		// the binding is part of the endpoint's identity: an aeron:ib and an
		// aeron:udp subscription on one host:port are two endpoints
		key = string(u.Media) + "/" + key
	}
	if u.Media == uri.MediaIB && u.IBQueuePair() == uri.IBQueuePairRC {
		// so is the QP type: an RC listener and a UD (SIDR) endpoint on
		// one host:port are two transports
		key = "rc+" + key
	}
	if tagged != nil {
		key = tagged.key
	} else if e, ok := c.endpoints[key]; ok && tag != noTag && e.tag != noTag && e.tag != tag {
		key += "|#t" + strconv.FormatInt(tag, 10) // another tag's endpoint: not shared (C)
	}
	ccName, err := checkCongestionControl(u, cmd.Channel)
	if err != nil {
		return err
	}
	rcvWnd := int64(c.cfg.InitialWindowLength)
	if v, ok := u.Size(uri.KeyReceiverWindow); ok {
		rcvWnd = v
	}
	bufs := c.transportParams(u, c.cfg.MTULength)
	bufs.ReceiverWindow = int(rcvWnd)
	ts, err := parseTimestampOffsets(u)
	if err != nil {
		return err
	}
	e, ok := c.endpoints[key]
	if ok {
		if err := e.checkBuffers(u, bufs, rcvWnd, cmd.Channel); err != nil {
			return err
		}
		// receive_endpoint_has_clashing_timestamp_offsets
		if ts.mediaRcv != e.ts.mediaRcv {
			return tsConflict(uri.KeyMediaRcvTimestampOffset, ts.mediaRcv, e.channel, cmd.Channel)
		}
		if ts.channelRcv != e.ts.channelRcv {
			return tsConflict(uri.KeyChannelRcvTimestampOffset, ts.channelRcv, e.channel, cmd.Channel)
		}
	} else if err := checkWindowForRcvbuf(rcvWnd, bufs.SocketRcvbuf, cmd.Channel); err != nil {
		return err
	}
	if !ok {
		c.awaitEndpointClosed(key)
		var t Transport
		if !mds {
			med, _ := c.media.lookup(u.Media)
			if t, err = med.Open(u, bind, netip.AddrPort{}, bufs, AffinityReceiver); err != nil {
				return fail(cnc.ErrorCodeInvalidChannel, "%s: %v", cmd.Channel, err)
			}
		}
		e = newReceiveEndpoint(key, t)
		e.tag, e.bind = tag, bind
		e.controlMode, _ = u.Get(uri.KeyControlMode)
		e.mds, e.cc, e.livenessNs = mds, ccName, c.cfg.ImageLivenessTimeout.Nanoseconds()
		e.channel, e.rcvWnd, e.soRcvbuf, e.soSndbuf = cmd.Channel, rcvWnd, bufs.SocketRcvbuf, bufs.SocketSndbuf
		e.ts = ts
		if err := e.setGroupTag(u, c.cfg.Network); err != nil {
			if t != nil {
				_ = t.Close()
			}
			return err
		}
		e.setReliable(u, c.cfg.Network)
		e.group = groupParam(u)
		e.multicastDelay = newOptimalDelay(c.cfg.Network.NakMulticastGroupSize, c.cfg.Network.NakMulticastMaxBackoff.Nanoseconds())
		e.nakDelayNs = c.cfg.Network.NakUnicastDelay.Nanoseconds()
		if v, ok := u.Duration(uri.KeyNakDelay); ok {
			e.nakDelayNs = v
		}
		e.nakRetryNs = e.nakDelayNs * int64(c.cfg.Network.NakUnicastRetryRatio)
		e.untethered = parseUntethered(u, c.cfg)
		if bind.Addr().IsMulticast() {
			e.multicast = true
			if v, ok := u.Int(uri.KeyTTL); ok {
				e.multicastTTL = int32(v)
			}
			// status messages and NAKs go to the control group
			if e.control, err = multicastControl(bind); err != nil {
				_ = t.Close()
				return err
			}
		}
		if control.IsValid() {
			e.control, e.explicitControl, e.resolvedControl = control, true, control
			if v, _ := u.Get(uri.KeyControl); !isAddressLiteral(v) {
				a, _ := uri.ParseAddress(v)
				e.controlHost = a.Host
				e.lastActivityNs.Store(c.nowNs)
			}
		}
		if err := e.allocateCounters(c, cmd.CorrelationID); err != nil {
			e.freeCounters(c)
			if t != nil {
				_ = t.Close()
			}
			return err
		}
		c.endpoints[key] = e
		r := c.recv
		c.receiverProxy.offer(func() { r.onAddEndpoint(e) })
	} else if err := e.checkReliable(u, c.cfg.Network, cmd.Channel); err != nil {
		return err
	}
	s := &subLink{regID: cmd.CorrelationID, client: cl, streamID: cmd.StreamID, channel: cmd.Channel, endpoint: key, tether: c.tether(u),
		sparse: c.sparse(u)}
	if s.sessionID, s.hasSession, err = subscriptionSession(u); err != nil {
		return err
	}
	c.subs[s.regID] = s
	e.subs = append(e.subs, s)
	if respSub && !s.hasSession {
		// the receiver gets it with its session (onResponseSetup)
		s.awaitingResponse = true
	} else {
		r := c.recv
		c.receiverProxy.offer(func() { r.onAddSubscription(e, s) })
	}
	c.transmit(cnc.RspOnSubscriptionReady, cnc.AppendIDAndCounter(c.buf[:0], cmd.CorrelationID, e.statusID))
	for _, im := range e.images {
		if im.acceptingSubscriptions() && s.matches(im.streamID, im.sessionID) {
			im.addSubscriber(c, s)
		}
	}
	return nil
}

func (c *conductor) unlinkNetworkSubscription(s *subLink) {
	e, ok := c.endpoints[s.endpoint]
	if !ok {
		return
	}
	for i, x := range e.subs {
		if x == s {
			e.subs = append(e.subs[:i], e.subs[i+1:]...)
			break
		}
	}
	r := c.recv
	c.receiverProxy.offer(func() { r.onRemoveSubscription(e, s) })
	for _, im := range e.images {
		im.removeSubscriber(c, s)
		// An image nobody wants any more goes now rather than at the
		// liveness timeout; a new subscription gets a fresh one from the
		// next SETUP it elicits.
		if len(im.subs.positions) == 0 && !e.conductorInterested(im.streamID, im.sessionID) {
			im.close(c)
		}
	}
	if len(e.subs) == 0 {
		e.close(c)
		delete(c.endpoints, s.endpoint)
	}
}

// networkWork is the conductor's duty over network publications and
// images: limits, rebuild tracking, timers and lifecycles. Sending and
// receiving are the sender's and receiver's.
func (c *conductor) networkWork() int {
	work := 0
	for i := 0; i < len(c.netPubs); i++ {
		p := c.netPubs[i]
		work += p.update(c)
		if p.state == pubDone {
			c.netPubs = append(c.netPubs[:i], c.netPubs[i+1:]...)
			i--
		}
	}
	for _, e := range c.endpoints {
		for i := 0; i < len(e.images); i++ {
			im := e.images[i]
			work += im.trackRebuild(c)
			if im.state == imageDone {
				e.images = append(e.images[:i], e.images[i+1:]...)
				i--
			}
		}
	}
	return work
}

// awaitEndpointClosed waits, briefly, for the receiver to close a
// transport bound to key that the conductor closed just before, so that a
// new subscription can bind the same address again.
func (c *conductor) awaitEndpointClosed(key string) {
	e, ok := c.closingEndpoints[key]
	if !ok {
		return
	}
	delete(c.closingEndpoints, key)
	deadline := time.Now().Add(time.Second)
	for !e.released.Load() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Microsecond)
	}
}
