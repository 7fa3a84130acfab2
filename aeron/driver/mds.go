package driver

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
)

// Multi-destination subscriptions (MDS): a subscription channel with
// control-mode=manual has no socket of its own; the client adds receive
// destinations (ADD_RCV_DESTINATION, each a unicast endpoint to bind) and
// removes them (REMOVE_RCV_DESTINATION). One image takes a session from
// every destination it arrives on: frames already in the log are dropped
// by position (an insert at a filled offset does nothing, and anything
// behind rcv-pos is an underrun), so the fastest path wins, and status
// messages and NAKs go back through each destination to where its copy
// came from. This follows aeron_receive_channel_endpoint.c with its
// aeron_receive_destination_t list and aeron_publication_image_connection_t.

// rcvDestination is one receive destination of a multi-destination
// subscription. Its fields are fixed when the conductor creates it; the
// receiver closes t and sets released.
type rcvDestination struct {
	regID   int64 // the ADD_RCV_DESTINATION correlation id
	channel string
	bind    netip.AddrPort
	t       Transport
	// localAddrID is its rcv-local-sockaddr counter (conductor; -1 once
	// freed), as aeron_receive_destination_create allocates one per
	// destination
	localAddrID int32
	released    atomic.Bool
}

// freeCounter frees the destination's rcv-local-sockaddr.
func (d *rcvDestination) freeCounter(c *conductor) {
	if d.localAddrID >= 0 {
		_ = c.counters.Free(d.localAddrID)
		d.localAddrID = -1
	}
}

// imageConnection is where one destination's copy of a session comes
// from. Receiver.
type imageConnection struct {
	t      Transport
	source netip.AddrPort
	lastNs int64
}

// connection records (or refreshes) the source of the session on
// transport t (aeron_publication_image_add_connection_if_unknown).
func (im *publicationImage) connection(t Transport, from netip.AddrPort, nowNs int64) {
	for i := range im.conns {
		if c := &im.conns[i]; c.t == t {
			c.source, c.lastNs = from, nowNs
			return
		}
	}
	im.conns = append(im.conns, imageConnection{t: t, source: from, lastNs: nowNs})
}

// sendControl sends a status message, NAK or RTTM of the image: to its
// source on an ordinary endpoint, through every live connection of a
// multi-destination subscription (aeron_publication_image_send_pending_status_message
// loops over the connections).
func (im *publicationImage) sendControl(r *receiver, b []byte) {
	if !im.e.mds {
		im.e.sendTo(r, nil, im.source, b)
		return
	}
	for i := range im.conns {
		c := &im.conns[i]
		if im.e.livenessNs > 0 && r.nowNs-c.lastNs > im.e.livenessNs {
			continue // that destination's copy stopped arriving
		}
		im.e.sendTo(r, c.t, c.source, b)
	}
}

// imageChannel names the channel of the endpoint's images in counters
// and loss reports.
func (e *receiveEndpoint) imageChannel(streamID, sessionID int32) string {
	// the channel of the oldest subscription the image is for, as
	// aeron_driver_conductor_on_create_publication_image labels rcv-hwm
	// and rcv-pos (and so aeron:ib images say aeron:ib)
	for _, s := range e.subs {
		if s.matches(streamID, sessionID) {
			return s.channel
		}
	}
	return e.channel
}

func (r *receiver) onAddRcvDestination(e *receiveEndpoint, d *rcvDestination) {
	e.rdests = append(e.rdests, d)
}

// onRemoveRcvDestination stops reading the destination, forgets the
// image connections through it and closes its transport.
func (r *receiver) onRemoveRcvDestination(e *receiveEndpoint, d *rcvDestination) {
	for i, x := range e.rdests {
		if x == d {
			e.rdests = append(e.rdests[:i], e.rdests[i+1:]...)
			break
		}
	}
	for _, im := range e.rimages {
		for i := 0; i < len(im.conns); i++ {
			if im.conns[i].t == d.t {
				im.conns = append(im.conns[:i], im.conns[i+1:]...)
				i--
			}
		}
	}
	_ = d.t.Close()
	d.released.Store(true)
}

// onRcvDestination handles ADD_RCV_DESTINATION and REMOVE_RCV_DESTINATION
// for a multi-destination subscription
// (aeron_driver_conductor_on_add_receive_destination,
// on_remove_receive_destination): the destination is a unicast UDP
// endpoint of the subscription's medium; success is OPERATION_SUCCESS.
func (c *conductor) onRcvDestination(e *receiveEndpoint, add bool, cmd cnc.DestinationCommand) error {
	u, err := uri.Parse(cmd.Channel)
	if err != nil {
		return fail(cnc.ErrorCodeInvalidChannel, "invalid destination: %v", err)
	}
	if _, ok := u.Endpoint(); !ok {
		return fail(cnc.ErrorCodeInvalidChannel, "receive destination %s has no endpoint", cmd.Channel)
	}
	bind, err := c.resolveEndpoint(u)
	if err != nil {
		return err
	}
	if !add {
		for i, d := range e.dests {
			if d.bind == bind {
				e.dests = append(e.dests[:i], e.dests[i+1:]...)
				e.closingDests = append(e.closingDests, d)
				d.freeCounter(c)
				r := c.recv
				c.receiverProxy.offer(func() { r.onRemoveRcvDestination(e, d) })
				c.transmit(cnc.RspOnOperationSuccess, cnc.AppendID(c.buf[:0], cmd.CorrelationID))
				return nil
			}
		}
		return fail(cnc.ErrorCodeUnknownSubscription, "unknown receive destination %s", cmd.Channel)
	}
	if bind.Addr().IsMulticast() {
		return fail(cnc.ErrorCodeInvalidChannel, "receive destination %s: multicast destinations are not supported by this driver yet", cmd.Channel)
	}
	if u.Media != uri.MediaUDP {
		return fail(cnc.ErrorCodeInvalidChannel, "receive destination %s: only aeron:udp destinations are supported", cmd.Channel)
	}
	med, err := c.media.lookup(u.Media)
	if err != nil {
		return fail(cnc.ErrorCodeInvalidChannel, "%v", err)
	}
	if err := checkNetworkChannel(u, cmd.Channel, med); err != nil {
		return err
	}
	for _, d := range e.dests {
		if d.bind == bind {
			return fail(cnc.ErrorCodeInvalidChannel, "receive destination %s is already added", cmd.Channel)
		}
	}
	c.awaitDestinationClosed(e, bind)
	bufs := c.transportParams(u, c.cfg.MTULength)
	if bufs.SocketRcvbuf == 0 {
		bufs.SocketRcvbuf = e.soRcvbuf
	}
	t, err := med.Open(u, bind, netip.AddrPort{}, bufs, AffinityReceiver)
	if err != nil {
		return fail(cnc.ErrorCodeInvalidChannel, "receive destination %s: %v", cmd.Channel, err)
	}
	d := &rcvDestination{regID: cmd.CorrelationID, channel: cmd.Channel, bind: bind, t: t, localAddrID: -1}
	if d.localAddrID, err = allocateLocalSockaddr(c, "rcv-local-sockaddr", e.statusID, t.LocalAddr(), cmd.CorrelationID); err != nil {
		_ = t.Close()
		return err
	}
	e.dests = append(e.dests, d)
	r := c.recv
	c.receiverProxy.offer(func() { r.onAddRcvDestination(e, d) })
	c.transmit(cnc.RspOnOperationSuccess, cnc.AppendID(c.buf[:0], cmd.CorrelationID))
	fmt.Fprintf(c.log, "subscription %s: receive destination %s on %s\n", e.channel, cmd.Channel, t.LocalAddr())
	return nil
}

// awaitDestinationClosed waits, briefly, for the receiver to close a
// destination bound to bind that was just removed, so that it can be
// bound again.
func (c *conductor) awaitDestinationClosed(e *receiveEndpoint, bind netip.AddrPort) {
	deadline := time.Now().Add(time.Second)
	for i := 0; i < len(e.closingDests); i++ {
		d := e.closingDests[i]
		if d.bind == bind {
			for !d.released.Load() && time.Now().Before(deadline) {
				time.Sleep(20 * time.Microsecond)
			}
		}
		if d.released.Load() {
			e.closingDests = append(e.closingDests[:i], e.closingDests[i+1:]...)
			i--
		}
	}
}
