package driver

import (
	"net/netip"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
)

// destinationTimeoutNs is how long a dynamic multi-destination-cast
// destination lives without a status message
// (AERON_UDP_DESTINATION_TRACKER_DESTINATION_TIMEOUT_NS).
const destinationTimeoutNs = 5_000_000_000

// controlSetupIntervalNs: a subscription with control= asks the
// publication behind it for SETUP this often while it has no image of its
// stream (the receiver's pending setup entries with a control address;
// ibgo resends at a tenth of the pending-setup timeout, as elicitSetup).
const controlSetupIntervalNs = pendingSetupTimeoutNs / 10

// mdcDestination is one receiver of a multi-destination-cast publication.
type mdcDestination struct {
	addr       netip.AddrPort
	regID      int64 // the ADD_DESTINATION correlation id (manual)
	lastSeenNs int64
	// seen is lastSeenNs for the conductor, for a manual destination
	// named by a host name (re-resolution); nil otherwise
	seen *atomic.Int64
}

// namedDestination is a manual destination named by a host name, which
// the conductor resolves again when it has been silent
// (aeron_udp_destination_tracker_check_for_re_resolution). Conductor.
type namedDestination struct {
	regID     int64
	host      string
	addr      netip.AddrPort
	seen      *atomic.Int64 // the sender's last status message from it
	resolving bool
}

// destinationTracker is the sender's list of destinations of a
// multi-destination-cast publication (aeron_udp_destination_tracker.c):
// manual ones come and go by client command, dynamic ones by status
// messages and the destination timeout. Owned by the sender agent.
type destinationTracker struct {
	manual bool
	dests  []mdcDestination
	// count is the endpoint's mdc-num-dest counter (nil in unit tests)
	count *atomic.Int64
}

func (d *destinationTracker) counted() {
	if d.count != nil {
		d.count.Store(int64(len(d.dests)))
	}
}

// onStatusMessage records the receiver that sent a status message
// (aeron_udp_destination_tracker_on_status_message): dynamic trackers add
// unknown senders; both refresh the last-seen time.
func (d *destinationTracker) onStatusMessage(from netip.AddrPort, nowNs int64) {
	for i := range d.dests {
		if d.dests[i].addr == from {
			d.dests[i].lastSeenNs = nowNs
			if s := d.dests[i].seen; s != nil {
				s.Store(nowNs)
			}
			return
		}
	}
	if !d.manual {
		d.dests = append(d.dests, mdcDestination{addr: from, lastSeenNs: nowNs})
		d.counted()
	}
}

// checkTimeouts drops dynamic destinations that went quiet.
func (d *destinationTracker) checkTimeouts(nowNs int64) {
	if d.manual {
		return
	}
	for i := 0; i < len(d.dests); i++ {
		if nowNs-d.dests[i].lastSeenNs > destinationTimeoutNs {
			d.dests = append(d.dests[:i], d.dests[i+1:]...)
			d.counted()
			i--
		}
	}
}

// registrationID is the ADD_DESTINATION id of the destination at addr
// (-1: none, or dynamic).
func (d *destinationTracker) registrationID(addr netip.AddrPort) int64 {
	for _, x := range d.dests {
		if x.addr == addr && x.regID != 0 {
			return x.regID
		}
	}
	return -1
}

func (d *destinationTracker) add(addr netip.AddrPort, regID, nowNs int64, seen *atomic.Int64) {
	for _, x := range d.dests {
		if x.addr == addr {
			return
		}
	}
	d.dests = append(d.dests, mdcDestination{addr: addr, regID: regID, lastSeenNs: nowNs, seen: seen})
	d.counted()
}

// readdress moves the manual destination added by regID to addr (a
// re-resolved name, aeron_udp_destination_tracker_resolution_change).
func (d *destinationTracker) readdress(regID int64, addr netip.AddrPort) bool {
	for i := range d.dests {
		if d.dests[i].regID == regID {
			d.dests[i].addr = addr
			return true
		}
	}
	return false
}

// remove drops the destination with addr (or, when addr is invalid, the
// one added by regID).
func (d *destinationTracker) remove(addr netip.AddrPort, regID int64) {
	for i, x := range d.dests {
		if (addr.IsValid() && x.addr == addr) || (!addr.IsValid() && x.regID == regID) {
			d.dests = append(d.dests[:i], d.dests[i+1:]...)
			d.counted()
			return
		}
	}
}

// mdcMode says whether a publication channel is multi-destination-cast
// (control-mode=manual, or control-mode=dynamic with control=), and which.
func mdcMode(u *uri.ChannelURI) (mdc, manual bool) {
	mode, _ := u.Get(uri.KeyControlMode)
	switch mode {
	case uri.ControlModeManual:
		return true, true
	case uri.ControlModeDynamic:
		return true, false
	}
	return false, false
}

// onSendDestination handles ADD_DESTINATION/REMOVE_DESTINATION for a
// publication with manual control (aeron_driver_conductor_on_add_send_destination,
// on_remove_send_destination): the destination's endpoint is resolved here
// and handed to the sender; success is OPERATION_SUCCESS.
func (c *conductor) onSendDestination(p *networkPublication, add bool, cmd cnc.DestinationCommand) error {
	u, err := uri.Parse(cmd.Channel)
	if err != nil {
		return fail(cnc.ErrorCodeInvalidChannel, "invalid destination: %v", err)
	}
	if _, ok := u.Endpoint(); !ok {
		return fail(cnc.ErrorCodeInvalidChannel, "destination %s has no endpoint", cmd.Channel)
	}
	addr, err := c.resolveEndpoint(u)
	if err != nil {
		return err
	}
	snd, reg := c.snd, cmd.CorrelationID
	e := p.ep
	if add {
		var seen *atomic.Int64
		if ep, _ := u.Endpoint(); !ep.IP.IsValid() {
			// a host name: resolved again when silent
			seen = new(atomic.Int64)
			seen.Store(c.nowNs)
			e.named = append(e.named, &namedDestination{regID: reg, host: ep.Host, addr: addr, seen: seen})
		}
		c.senderProxy.offer(func() { e.mdc.add(addr, reg, snd.nowNs, seen) })
	} else {
		e.dropNamed(addr, 0)
		c.senderProxy.offer(func() { e.mdc.remove(addr, 0) })
	}
	c.transmit(cnc.RspOnOperationSuccess, cnc.AppendID(c.buf[:0], cmd.CorrelationID))
	return nil
}

// onRemoveDestinationByID: aeron_driver_conductor_on_remove_send_destination_by_id.
func (c *conductor) onRemoveDestinationByID(p *networkPublication, correlationID, destRegID int64) error {
	p.ep.dropNamed(netip.AddrPort{}, destRegID)
	c.senderProxy.offer(func() { p.ep.mdc.remove(netip.AddrPort{}, destRegID) })
	c.transmit(cnc.RspOnOperationSuccess, cnc.AppendID(c.buf[:0], correlationID))
	return nil
}
