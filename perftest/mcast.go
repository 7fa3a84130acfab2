package perftest

import (
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// Multicast (-g, --mcg; -M, --MGID), as send_bw.c and send_lat.c do it
// (send_set_up_connection, set_mcast_group, multicast_resources.c):
//
//   - The receiving side (send_bw's server; both sides of send_lat) makes
//     the group's GID, attaches its QP to it (ibv_attach_mcast, MLID 0 on
//     RoCE) and advertises the group instead of itself: GID = the MGID,
//     LID = the MLID, QPN = 0xffffff (QPNUM_MCAST).
//   - The sender addresses its UD sends to what the peer advertised: an AH
//     to the MGID and remote QPN 0xffffff, so the device delivers each
//     message to every QP attached to the group.
//   - The MGID is -M's, else MCG_GID ff01:0:0:2:c985:: with its last byte
//     incremented on a send_lat client, so the two latency sides listen on
//     different groups (set_multicast_gid: perftest passes the machine type,
//     SERVER = 0, as "is_client").
//   - On InfiniBand perftest also registers the group with the subnet
//     manager (a MAD through umad); ibgo does not speak umad and refuses -g
//     there. On RoCE there is nothing to register: the device maps the MGID
//     to an Ethernet multicast address itself.

// qpnMcast is the destination QPN of a multicast send (QPNUM_MCAST).
const qpnMcast = 0xffffff

// mcgGID is perftest's default group, MCG_GID.
var mcgGID = uverbs.GID{255, 1, 0, 0, 0, 2, 201, 133}

// mcastReceiver says whether this side attaches to a group: send_bw's
// server, either side of send_lat.
func (e *engine) mcastReceiver() bool {
	p := e.cfg
	return p.Mcast && (p.Server == "" || p.Test.Kind == LAT || p.Bidir)
}

// multicastGID is set_multicast_gid.
func (e *engine) multicastGID() uverbs.GID {
	p := e.cfg
	if p.MGIDGiven {
		return p.MGID
	}
	g := mcgGID
	if p.Server != "" {
		g[15]++
	}
	return g
}

// attachMcast joins every QP to this side's group and advertises the group
// in the QPs' destinations (after setup made them).
func (e *engine) attachMcast() error {
	if !e.mcastReceiver() {
		return nil
	}
	g := e.multicastGID()
	for i, qp := range e.res.qps {
		if err := qp.AttachMcast(g, 0); err != nil {
			return &Error{Kind: KindResource, op: opAttachMcast, Device: e.hw.dev.Name, QP: i, QPN: qp.QPN(), Text: g.String(), Err: err}
		}
		e.res.mcast = append(e.res.mcast, qp)
		d := &e.sess.local[i]
		d.GID, d.LID, d.QPN = g, 0, qpnMcast
	}
	e.res.mgid = g
	return nil
}

// detachMcast leaves the group before the QPs are destroyed
// (send_destroy_ctx).
func (e *engine) detachMcast() {
	for _, qp := range e.res.mcast {
		qp.DetachMcast(e.res.mgid, 0)
	}
	e.res.mcast = nil
}

// joinSender is the send_bw client's step after the key exchange: nothing
// to register on RoCE; perftest then sleeps 50 ms so that a switch has
// the join before the first packet, and so does ibgo.
func (e *engine) joinSender() {
	p := e.cfg
	if p.Mcast && p.Test.Kind == BW && p.Server != "" {
		time.Sleep(50 * time.Millisecond)
	}
}

// mgidLabel says whether an address line's GID is a group's
// (ctx_print_pingpong_data: the server's own line and the client's line
// for the server, or every line with -b).
func (e *engine) mgidLabel(side string) bool {
	p := e.cfg
	if !p.Mcast {
		return false
	}
	server := p.Server == ""
	return p.Bidir || (side == "local" && server) || (side == "remote" && !server)
}

// groupGID is the group this side receives on (a receiver) or sends to.
func (e *engine) groupGID() uverbs.GID {
	if e.mcastReceiver() || len(e.sess.remote) == 0 {
		return e.res.mgid
	}
	return e.sess.remote[0].GID
}
