package ib

// Devices removed under the medium.
//
// An RDMA device can go while the driver runs: `rdma link delete` of a
// soft-RoCE device, a driver unbound, a NIC hot-unplugged or reset. RDMA
// CM tells every id on the device (DEVICE_REMOVAL; cm.ID.DeviceRemoved)
// and destroys the ids' kernel side; nothing else reports it, and on a
// provider that cannot revoke user contexts (soft-RoCE) the removal
// waits in the kernel until the process has closed everything it holds
// on the device. So each transport's agent compares cm.DeviceRemovals
// with the value it last saw on every Recv (one atomic load) and, when
// its own ids were told, lets go of everything on the device at once:
//
//   - a UD transport goes through the rebuild a failed CQ takes
//     (cqerror.go): its publication logs are deregistered, its endpoint,
//     peers and ring released, and it listens, resolves or joins again,
//     which fails (reported, with a growing wait) until a device with the
//     address is back, and then resumes there;
//   - an ib-qp=rc publication loses its connection (its watcher sees the
//     event), deregisters its logs, and its dial loop drops the anchor
//     that held the old device and dials on whatever device now has the
//     route (rc.go);
//   - an ib-qp=rc subscription drops its connections, its shared queues
//     and its listener, and listens again once the address has a device.
//
// Each removal is counted (Media.DeviceRemovals) and written to the error
// log; the Aeron images ride it out as they ride out a link outage: an
// outage shorter than their timeouts loses nothing (NAKs and
// retransmissions), a longer one ends them as Aeron does.

import (
	"fmt"
	"time"

	"github.com/ibgo/ibgo/cm"
)

// deviceRemoved says whether the device under t's endpoint was removed
// (checked only when cm.DeviceRemovals moved). Agent.
func (t *transport) deviceRemoved() bool {
	g := cm.DeviceRemovals()
	if g == t.removalsSeen {
		return false
	}
	t.removalsSeen = g
	return t.ep != nil && t.ep.ID().DeviceRemoved()
}

// deviceGone starts the rebuild of a transport whose device was removed.
// Agent.
func (t *transport) deviceGone() {
	t.m.DeviceRemovals.Add(1)
	t.cqFailed = true // Recv rebuilds (cqerror.go)
	t.rebuildAt = 0
	what := "it resolves its subscription again"
	switch t.kind {
	case kindListen:
		what = "it listens again once a device has its address"
	case kindGroup:
		what = "it joins its groups again once a device has its interface"
	}
	t.m.report(fmt.Errorf("ib: the RDMA device of UD endpoint %s was removed (DEVICE_REMOVAL); everything on it is released and %s", t.describe(), what))
}

// deviceRemoved says whether c's id was told its device was removed.
func (c *rcConn) deviceRemoved() bool {
	id := c.id
	if c.conn != nil {
		id = c.conn.ID()
	}
	return id != nil && id.DeviceRemoved()
}

// dropAnchor closes the anchor that held a removed device open, with the
// connection buffers registered there (dial goroutine; no connection uses
// them: the agent dropped its connection before asking for a dial).
func (t *rcTransport) dropAnchor() {
	if t.pmr != nil {
		_ = t.pmr.Close()
	}
	if t.pmem != nil {
		_ = t.pmem.Close()
	}
	_ = t.anchor.Close()
	_ = t.anchorCh.Close()
	t.anchorCh, t.anchor, t.ppd, t.pmem, t.pmr = nil, nil, nil, nil, nil
}

// subDeviceGone lets go of everything a subscription holds on its removed
// device; Recv listens again (listenAgain). Agent.
func (t *rcTransport) subDeviceGone() {
	t.m.DeviceRemovals.Add(1)
	t.m.report(fmt.Errorf("ib: the RDMA device of rc subscription %s was removed (DEVICE_REMOVAL); its connections, shared queues and listener are released and it listens again once a device has its address", t.bind))
	t.stopListener()
	t.relisten, t.rebuildAt = true, 0
}

// stopListener ends the accept goroutine, drops every connection, and
// closes the shared queues, the registrations and then the listener, in
// the order the device needs: the listener's id holds the device open
// (its PD and context go with its last id). It also cleans up after a
// listen that failed part way. Agent.
func (t *rcTransport) stopListener() {
	if t.listenCancel != nil {
		t.listenCancel()
		// the accept goroutine may be handing a connection over: keep
		// taking them until it has returned
		for waiting := true; waiting; {
			select {
			case <-t.acceptDone:
				waiting = false
			case ev := <-t.evc:
				t.apply(ev)
			}
		}
		t.listenCancel, t.acceptDone = nil, nil
	}
	t.drain()
	for _, c := range t.byKey {
		t.drop(c)
	}
	t.releaseParked(true)
	t.pend, t.pendAt = t.pend[:0], 0
	t.sharedMu.Lock()
	t.retire()
	t.gen++
	t.freeRetired()
	t.sharedFailed = false
	t.sharedMu.Unlock()
	_ = t.deregisterAll()
	if t.lid != nil {
		_ = t.lid.Close()
	}
	if t.ch != nil {
		_ = t.ch.Close()
	}
	t.lid, t.ch, t.pd, t.vctx = nil, nil, nil, nil
}

// listenAgain opens the subscription's listener and shared queues again
// after its device was removed, on the device that has the bound address
// now; until one has, it fails, reported, after a growing wait. Agent.
func (t *rcTransport) listenAgain() error {
	now := time.Now().UnixNano()
	if now < t.rebuildAt {
		return nil
	}
	if err := t.openSubscription(); err != nil {
		t.stopListener()
		t.relistens.failed()
		t.rebuildAt = now + t.relistens.wait().Nanoseconds()
		err = fmt.Errorf("ib: rc listen again on %s after its device was removed: %w", t.bind, err)
		t.m.report(err)
		return err
	}
	t.relisten, t.rebuildAt = false, 0
	t.relistens.reset()
	return nil
}
