package ib

// Destinations a UD transport was not set up for.
//
// A unicast publication's transport resolves its endpoint when it opens
// (ib.go, dial) and learns every peer that sends to it from the GRH
// (source). Aeron also sends to addresses neither covers: a subscription
// with control= (multi-destination-cast) sends its status messages, NAKs
// and SETUP requests to the publication's control address, and a
// control-mode=manual publication sends to the destinations its client
// adds. An aeron:udp socket just sends there; here the address must first
// be resolved to a QP by SIDR. Send starts that in the background on the
// first datagram for an unknown unicast address and drops datagrams for it
// until the answer arrives, as an unconnected UDP path drops them; Aeron's
// timers repeat what matters (SETUP requests, status messages, data by
// retransmission). A failed resolution is tried again after ResolveRetry
// if datagrams still go there.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/uverbs"
)

// peerAnswer is a background resolution's result for the agent.
type peerAnswer struct {
	dest  netip.AddrPort
	epGen uint32 // the endpoint it was asked for (transport.epGen)
	param cm.UDParam
	err   error
}

// peerResolver runs the background resolutions of one UD transport. The
// agent calls ask and collect; the goroutines only resolve and hand their
// answer over.
type peerResolver struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	out    chan peerAnswer
	// next is when dest may be asked again: 0 while one is in flight,
	// after a failure now + ResolveRetry
	next map[netip.AddrPort]int64
}

// askPeer starts resolving dest unless it is in flight or failed less
// than ResolveRetry ago. Only for a ready endpoint.
func (t *transport) askPeer(dest netip.AddrPort) {
	r := &t.res
	if !dest.Addr().IsValid() || dest.Addr().IsUnspecified() || dest.Addr().IsMulticast() || dest.Port() == 0 {
		return
	}
	if r.next == nil {
		r.ctx, r.cancel = context.WithCancel(context.Background())
		r.out = make(chan peerAnswer, 16)
		r.next = map[netip.AddrPort]int64{}
	}
	if at, ok := r.next[dest]; ok && (at == 0 || time.Now().UnixNano() < at) {
		return
	}
	if t.m.fabricDown() {
		t.m.HeldWhilePortDown.Add(1)
		r.next[dest] = time.Now().Add(ResolveRetry).UnixNano()
		return // no SIDR while a port is down (fabricDown)
	}
	info, err := t.ep.ID().Query()
	if err != nil {
		return
	}
	src := t.ep.LocalAddr()
	if src.IP.IsValid() {
		src = cm.IPAddr(netip.AddrPortFrom(src.IP.Addr(), 0))
	}
	r.next[dest] = 0
	r.wg.Add(1)
	go func(gen uint32) {
		defer r.wg.Done()
		a := peerAnswer{dest: dest, epGen: gen}
		a.param, a.err = resolvePeer(r.ctx, src, dest, info.DeviceIndex)
		select {
		case r.out <- a:
		case <-r.ctx.Done():
		}
	}(t.epGen)
}

// resolvePeer asks dest's QP by SIDR from a QP-less id of its own, which
// must reach dest through device devIndex (the AH is made on the
// transport's PD there).
func resolvePeer(ctx context.Context, src cm.Addr, dest netip.AddrPort, devIndex uint32) (cm.UDParam, error) {
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	fail := func(err error) (cm.UDParam, error) {
		return cm.UDParam{}, fmt.Errorf("ib: resolve %s by SIDR: %w", dest, err)
	}
	ch, err := cm.NewChannel()
	if err != nil {
		return fail(err)
	}
	defer ch.Close()
	id, err := ch.CreateID(cm.PortSpaceUDP, uverbs.QPTypeUD)
	if err != nil {
		return fail(err)
	}
	defer id.Close()
	if err := id.Resolve(ctx, src, cm.IPAddr(dest)); err != nil {
		return fail(err)
	}
	if info, err := id.Query(); err != nil {
		return fail(err)
	} else if info.DeviceIndex != devIndex {
		return fail(fmt.Errorf("it is reached through device index %d, the transport's endpoint is on %d", info.DeviceIndex, devIndex))
	}
	p, err := id.SIDR(ctx, nil)
	if err != nil {
		return fail(err)
	}
	return p, nil
}

// collectPeers takes the answers that arrived: a peer for the current
// endpoint becomes a destination; a failure is counted and reported
// (unless nobody listens there yet, the normal wait) and may be retried.
func (t *transport) collectPeers() {
	r := &t.res
	for {
		var a peerAnswer
		select {
		case a = <-r.out:
		default:
			return
		}
		if a.err != nil {
			r.next[a.dest] = time.Now().Add(ResolveRetry).UnixNano()
			if !errors.Is(a.err, cm.ErrUnreachable) && r.ctx.Err() == nil {
				t.m.ResolveErrors.Add(1)
				t.m.report(a.err)
			}
			continue
		}
		delete(r.next, a.dest)
		if a.epGen != t.epGen || !t.ready.Load() || t.peers[a.dest] != nil {
			continue // asked for an endpoint since released, or known meanwhile
		}
		peer, err := cm.NewUDPeer(t.ep.PD(), a.param)
		if err != nil {
			r.next[a.dest] = time.Now().Add(ResolveRetry).UnixNano()
			t.m.ResolveErrors.Add(1)
			t.m.report(fmt.Errorf("ib: address handle for %s: %w", a.dest, err))
			continue
		}
		t.addPeer(a.dest, peer, false)
		if peer.AHAttr.IsGlobal {
			k := peerKey{qpn: peer.QPN, gid: peer.AHAttr.GRH.DGID}
			if _, ok := t.keys[k]; !ok {
				t.addSource(k, a.dest) // its frames come from the address it was asked by
			}
		}
	}
}

// stopPeers cancels the resolutions in flight and waits for them (Close).
func (t *transport) stopPeers() {
	r := &t.res
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.wg.Wait()
}
