package driver

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
)

// Tags (tags=channelTag,entityTag), as the C driver 1.48 has them.
//
// The channel tag names a channel endpoint: a channel with a tag shares
// the send or receive endpoint that has that tag, whatever the rest of the
// channel says (aeron:udp?tags=1001 is the endpoint first added with
// aeron:udp?endpoint=host:port|tags=1001), provided its control mode, and
// its addresses if it gives any, are the endpoint's
// (aeron_udp_channel_matches_tag). An aeron-spy: channel with a tag reads
// every publication on the endpoint with that tag. Where a channel names
// no address of its own, the tag is the unique part of its endpoint's
// canonical form, so tagged wildcard channels share one endpoint.
//
// The entity tag names a network publication: another publication, IPC
// or network, with session-id=tag:<entityTag> takes its session id, mtu
// and term length (aeron_uri_publication_session_id_param). Both drivers
// write it into the log's metadata.

// noTag is AERON_URI_INVALID_TAG.
const noTag = -1

// channelTags parses tags=: the channel tag and the entity tag, noTag
// where absent (aeron_uri_parse_tag, aeron_driver_uri's entity tag).
func channelTags(u *uri.ChannelURI) (channelTag, entityTag int64, err error) {
	channelTag, entityTag = noTag, noTag
	v, ok := u.Get(uri.KeyTags)
	if !ok {
		return
	}
	ch, ent, _ := strings.Cut(v, ",")
	if ch != "" {
		n, perr := strconv.ParseUint(ch, 10, 63)
		if perr != nil {
			return noTag, noTag, fail(cnc.ErrorCodeInvalidChannel, "could not parse channel tag string: %s", ch)
		}
		channelTag = int64(n)
	}
	if ent != "" {
		n, perr := strconv.ParseInt(ent, 10, 64)
		if perr != nil {
			return noTag, noTag, fail(cnc.ErrorCodeInvalidChannel, "Entity tag invalid: %s", ent)
		}
		entityTag = n
	}
	return
}

// channelTag is u's channel tag or noTag (tags= was checked before).
func channelTag(u *uri.ChannelURI) int64 {
	t, _, _ := channelTags(u)
	return t
}

// applySessionTag resolves session-id=tag:<n> of a new publication to the
// network publication whose entity tag is n: its session id, and its mtu
// and term length unless the channel gives its own.
func (c *conductor) applySessionTag(p *ipcParams) error {
	if !p.hasSessionTag {
		return nil
	}
	for _, np := range c.netPubs {
		if np.state != pubDone && np.params.entityTag != noTag && np.params.entityTag == p.sessionTag {
			p.sessionID, p.hasSession = np.sessionID, true
			if !p.mtuSet {
				p.mtu = np.params.mtu
			}
			if !p.termLenSet {
				p.termLength = np.params.termLength
			}
			return nil
		}
	}
	return fail(cnc.ErrorCodeInvalidChannel, "session-id=tag:%d must reference a network publication", p.sessionTag)
}

// subscriptionSession is a subscription's session-id=: an int32 (C takes
// no tag: reference on subscriptions).
func subscriptionSession(u *uri.ChannelURI) (int32, bool, error) {
	v, ok := u.Get(uri.KeySessionID)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false, fail(cnc.ErrorCodeInvalidChannel, "could not parse session-id=%s as int32_t in URI: a subscription takes no tag: reference", v)
	}
	return int32(n), true, nil
}

// controlModesMatch is aeron_udp_channel_control_modes_match: a channel
// without control-mode matches any.
func controlModesMatch(u *uri.ChannelURI, endpointMode string) bool {
	mode, _ := u.Get(uri.KeyControlMode)
	return mode == "" || mode == endpointMode
}

// taggedAddressesMatch is aeron_udp_channel_endpoints_match_with_override
// for a tagged channel: one that names no address matches any endpoint;
// otherwise its remote (endpoint) and local (control) addresses must be
// the endpoint's, an absent one counting as the wildcard.
func taggedAddressesMatch(u *uri.ChannelURI, remote, local, epRemote, epLocal netip.AddrPort) bool {
	if !u.Has(uri.KeyEndpoint) && !u.Has(uri.KeyControl) {
		return true
	}
	return remote == epRemote && local == epLocal
}

// resolveTaggedSendChannel is resolveSendChannel with tags: a channel tag
// that an endpoint has gives that endpoint's addresses and name; a tagged
// channel that finds none must have an endpoint, a control address or
// control-mode=manual (C's message); and an endpoint of the same addresses
// with another tag is not shared.
func (c *conductor) resolveTaggedSendChannel(u *uri.ChannelURI, channel string, regID int64) (dest, control netip.AddrPort, canonical string, err error) {
	tag := channelTag(u)
	if tag == noTag {
		return c.resolveSendChannel(u, regID)
	}
	var own, ownControl netip.AddrPort
	if u.Has(uri.KeyEndpoint) {
		if own, err = c.resolveEndpoint(u); err != nil {
			return
		}
	}
	if u.Has(uri.KeyControl) {
		if ownControl, err = c.resolveAddress(u, uri.KeyControl); err != nil {
			return
		}
	}
	e, err := c.sendEndpointByTag(u, channel, tag, own, ownControl)
	if err != nil {
		return
	}
	if e != nil {
		return e.dest, e.control, e.canonical, nil
	}
	if mode, _ := u.Get(uri.KeyControlMode); !u.Has(uri.KeyControl) && !u.Has(uri.KeyEndpoint) && mode != uri.ControlModeManual {
		err = fail(cnc.ErrorCodeInvalidChannel, "URI must have explicit control, endpoint, or be manual control-mode when original: channel=%s", channel)
		return
	}
	if dest, control, canonical, err = c.resolveSendChannel(u, regID); err != nil {
		return
	}
	if e, ok := c.sendEndpoints[canonical]; ok && e.tag != noTag && e.tag != tag {
		canonical += "|#t" + strconv.FormatInt(tag, 10)
	}
	return
}

// sendEndpointByTag finds the send endpoint a tagged publication channel
// names (aeron_driver_conductor_find_existing_send_channel_endpoint's tag
// scan); nil when none has the tag. dest and control are the channel's
// own addresses (invalid where it gives none).
func (c *conductor) sendEndpointByTag(u *uri.ChannelURI, channel string, tag int64, dest, control netip.AddrPort) (*sendEndpoint, error) {
	for _, e := range c.sendEndpoints {
		if e.tag == noTag || e.tag != tag || e.failed {
			continue
		}
		if !controlModesMatch(u, e.controlMode) {
			return nil, fail(cnc.ErrorCodeInvalidChannel, "matching tag %d has mismatched control-mode: %s <> %s", tag, channel, e.channel)
		}
		if !taggedAddressesMatch(u, dest, control, e.dest, e.control) {
			return nil, fail(cnc.ErrorCodeInvalidChannel, "matching tag %d has mismatched endpoint or control: %s <> %s", tag, channel, e.channel)
		}
		return e, nil
	}
	return nil, nil
}

// receiveEndpointByTag is the same for a tagged subscription channel.
func (c *conductor) receiveEndpointByTag(u *uri.ChannelURI, channel string, tag int64, bind, control netip.AddrPort) (*receiveEndpoint, error) {
	for _, e := range c.endpoints {
		if e.tag == noTag || e.tag != tag || e.closed {
			continue
		}
		if !controlModesMatch(u, e.controlMode) {
			return nil, fail(cnc.ErrorCodeInvalidChannel, "matching tag %d has mismatched control-mode: %s <> %s", tag, channel, e.channel)
		}
		epControl := netip.AddrPort{}
		if e.explicitControl {
			epControl = e.resolvedControl
		}
		if !taggedAddressesMatch(u, control, bind, epControl, e.bind) {
			return nil, fail(cnc.ErrorCodeInvalidChannel, "matching tag %d has mismatched endpoint or control: %s <> %s", tag, channel, e.channel)
		}
		return e, nil
	}
	return nil, nil
}
