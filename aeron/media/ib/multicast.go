package ib

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/uverbs"
)

// UD multicast (aeron:ib?endpoint=<group>:port|interface=<local ip>).
//
// The driver places addresses as for aeron:udp multicast (as Aeron's C
// driver does): a publication's transport binds the control group (data
// group + 1) and sends to the data group; a subscription's binds the data
// group and sends its status messages and NAKs to the control group. Here
// "binds" is a full-member RDMA CM multicast join (rdma_join_multicast:
// the QP is attached and receives the group's datagrams) and "sends to" a
// send-only join, whose AH, remote QPN 0xFFFFFF and the well-known Q_Key
// address every send. One UD QP, bound to the interface's IP (which
// chooses the device), carries both memberships.
//
// What differs from UDP: an IB multicast group has no ports, so two
// channels on one group but different ports see each other's frames (the
// driver drops frames of streams it has no subscription for; give each
// channel its own group). ttl= has no IB meaning and is ignored (the CM
// sets the hop limit). Without interface= the join cannot choose a device,
// so the channel is refused rather than guessed.

// multicast is the group membership of a multicast transport.
type multicast struct {
	recv *cm.Multicast // full member: the group bound
	send *cm.Multicast // send-only: the group sent to
	to   netip.AddrPort
}

// errMulticastRC is the rule a multicast channel with ib-qp=rc breaks.
var errMulticastRC = errors.New("ib: multicast needs ib-qp=ud: a reliable connection (ib-qp=rc) joins exactly two queue pairs")

// openMulticast opens a UD endpoint on the channel's interface and joins
// bind's group as a full member and the group it sends to (connect for a
// publication, the control group for a subscription) as a send-only one.
func (m *Media) openMulticast(ctx context.Context, ch *uri.ChannelURI, bind, connect netip.AddrPort, p driver.TransportParams, aff driver.Affinity) (driver.Transport, error) {
	to := connect
	if !connect.IsValid() {
		c, err := controlGroup(bind)
		if err != nil {
			return nil, err
		}
		to = c
	}
	local, err := multicastInterface(ch, bind.Addr())
	if err != nil {
		return nil, err
	}
	t := &transport{m: m, kind: kindGroup, peers: map[netip.AddrPort]*udPeer{}, keys: map[peerKey]*srcName{}, connect: connect, slots: newSlotRegs(sendSlots)}
	window := receiveWindow(p)
	ring := ringSize(window, 1024, 0, 0)
	// inline as the unicast UD QP asks: control frames and small
	// datagrams leave without a gather from memory (issue 29)
	opts := &cm.UDOptions{Cap: uverbs.QPCap{MaxSendWR: sendSlots, MaxRecvWR: uint32(ring), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: wantInline},
		Timestamps: p.MediaTimestamps}
	t.args = dialArgs{opts, p, aff, window, ring}
	t.group = groupArgs{local: local, bind: bind, to: to}
	if err := t.joinGroups(ctx); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// checkMulticast is what openMulticast refuses before it joins.
func checkMulticast(ch *uri.ChannelURI, bind, connect netip.AddrPort) error {
	if qp, _ := ch.Get(uri.KeyIBQueuePair); qp == uri.IBQueuePairRC {
		return errMulticastRC
	}
	if !bind.Addr().IsMulticast() {
		return fmt.Errorf("ib: multicast destination %s needs a multicast control address to bind, not %s", connect, bind)
	}
	if !connect.IsValid() {
		if _, err := controlGroup(bind); err != nil {
			return err
		}
	}
	_, err := multicastInterface(ch, bind.Addr())
	return err
}

// groupArgs are what joinGroups needs again to rebuild a multicast
// endpoint (cqerror.go).
type groupArgs struct {
	local    netip.Addr     // the interface's IP: chooses the device
	bind, to netip.AddrPort // the group joined as a full member, the one sent to
}

// joinGroups opens the UD endpoint of a multicast transport and joins its
// groups: Open and a rebuild after a CQ failure both use it.
func (t *transport) joinGroups(ctx context.Context) error {
	g, a := &t.group, &t.args
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	var err error
	if t.ep, err = cm.OpenUD(ctx, g.local.String(), a.opts); err != nil {
		return fmt.Errorf("ib: multicast %s on interface %s: %w", g.bind.Addr(), g.local, err)
	}
	// Receives are posted before the QP is attached, so nothing the group
	// sends meanwhile finds an empty queue.
	if err := t.setup(a.p, a.aff, a.window, a.ring); err != nil {
		return err
	}
	mc := &multicast{to: g.to}
	t.mc = mc
	if mc.recv, err = t.ep.JoinMulticastAddr(ctx, g.bind.Addr(), nil); err != nil {
		return fmt.Errorf("ib: join multicast group %s on interface %s: %w", g.bind.Addr(), g.local, err)
	}
	if mc.send, err = t.ep.JoinMulticastAddr(ctx, g.to.Addr(), &cm.JoinOptions{SendOnly: true}); err != nil {
		return fmt.Errorf("ib: join multicast group %s (send-only) on interface %s: %w", g.to.Addr(), g.local, err)
	}
	t.peers[g.to] = &udPeer{UDPeer: &mc.send.Peer, pinned: true} // the membership's: not counted, not evicted
	t.ready.Store(true)
	return nil
}

// controlGroup is a data group's control group: the next address, same
// port (aeron_multicast_control_address; the driver's multicastControl,
// which refuses even data addresses before this runs).
func controlGroup(data netip.AddrPort) (netip.AddrPort, error) {
	b := data.Addr().AsSlice()
	if b[len(b)-1]&1 == 0 {
		return netip.AddrPort{}, fmt.Errorf("ib: multicast data address %s must be odd (its control address is the next one)", data.Addr())
	}
	b[len(b)-1]++
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a, data.Port()), nil
}

// multicastInterface resolves interface=addr[/prefix] to the local IP the
// endpoint binds (aeron_find_interface: with a prefix, the local address
// inside addr/prefix; without, addr itself).
func multicastInterface(ch *uri.ChannelURI, group netip.Addr) (netip.Addr, error) {
	s, ok := ch.Get(uri.KeyInterface)
	if !ok {
		return netip.Addr{}, fmt.Errorf("ib: multicast group %s needs interface=<local IP of the RDMA device>: the CM multicast join is made on a bound device, there is no kernel default as for aeron:udp", group)
	}
	in, err := uri.ParseInterface(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ib: interface=%s: %v", s, err)
	}
	want := in.IP
	if !want.IsValid() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", in.Host)
		if err != nil || len(addrs) == 0 {
			return netip.Addr{}, fmt.Errorf("ib: interface=%s: cannot resolve %q: %v", s, in.Host, err)
		}
		want = addrs[0]
	}
	want = want.Unmap()
	if in.PrefixLen < 0 {
		return want, nil
	}
	prefix, err := want.Prefix(in.PrefixLen)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ib: interface=%s: %v", s, err)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ib: interface=%s: listing interface addresses: %w", s, err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if ok && prefix.Contains(ip.Unmap()) {
			return ip.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("ib: interface=%s: no local interface has an address in %s", s, prefix)
}

// source names the sender of a datagram received on a group: its IP (the
// GRH's source GID) with a port derived from its QPN, remembered per
// (QPN, GID) so each sender is one source (one image per session). No AH is
// made: replies to group members go to the group (the driver sends status
// messages and NAKs to the control group, data and retransmits to the data
// group), and a received multicast GRH cannot give one
// (ibv_init_ah_from_wc refuses multicast destinations).
func (mc *multicast) source(t *transport, k peerKey, g *uverbs.GRH) netip.AddrPort {
	ip, _ := netip.AddrFromSlice(g.SGID[:])
	ip = ip.Unmap()
	port := uint16(k.qpn)
	a := netip.AddrPortFrom(ip, port)
	for t.taken(a) {
		port++
		a = netip.AddrPortFrom(ip, port)
	}
	t.addSource(k, a)
	return a
}

// taken says whether a names a peer or source already.
func (t *transport) taken(a netip.AddrPort) bool {
	if t.peers[a] != nil || a == t.connect {
		return true
	}
	for _, v := range t.keys {
		if v.addr == a {
			return true
		}
	}
	return false
}

// leave leaves both groups and forgets the send-only group's peer (its AH
// belongs to the membership, not to t.peers). Nil-safe, idempotent.
func (mc *multicast) leave(t *transport) error {
	if mc == nil {
		return nil
	}
	delete(t.peers, mc.to)
	return errors.Join(mc.send.Leave(), mc.recv.Leave())
}
