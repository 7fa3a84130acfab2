package ib

// Eviction of a UD transport's address handles and source names.
//
// A UD transport learns a source for every sender it hears (source: an
// address handle made from the GRH and a name for its (QPN, GID)) and
// resolves control addresses and manual destinations on demand (peers.go).
// Every publisher restart, re-resolution or new peer adds one; without an
// end they would grow for the life of the endpoint. Each is stamped with
// the sweep epoch it was last used in (a send to it, a datagram from it:
// a pointer write, no clock read on the datapath); once a second Recv
// sweeps: an address neither sent to nor heard from for PeerIdleTimeout
// loses its address handle and its names. A source heard again is learnt
// again. PeerIdleTimeout is well above Aeron's image liveness timeout
// (10 s): an image whose sender fell silent is gone before its source is,
// so no status message loses its destination. And at MaxPeers entries the
// least recently used one goes before a new one is made, so a storm of
// senders costs at most MaxPeers address handles.

import (
	"net/netip"
	"time"

	"github.com/ibgo/ibgo/cm"
)

// PeerIdleTimeout is how long a UD transport keeps an address handle and
// a source name nothing was sent to or received from. Set it before the
// driver starts.
var PeerIdleTimeout = 30 * time.Second

// MaxPeers bounds the address handles (and, separately, the source names)
// one UD transport holds: at the bound the least recently used goes
// before a new one is made. Set it before the driver starts.
var MaxPeers = 4096

// sweepEvery is how often Recv sweeps idle entries.
const sweepEvery = time.Second

// udPeer is a destination's address handle and when it was last used.
type udPeer struct {
	*cm.UDPeer
	used   uint32 // the transport's epoch at the last send to it (or datagram from it)
	pinned bool   // the endpoint's own (t.connect's, the multicast send group's): never evicted
}

// srcName is the address a sender's datagrams are delivered from.
type srcName struct {
	addr netip.AddrPort
	used uint32 // the transport's epoch at its last datagram
}

// idle says whether an entry last used in epoch used has been idle for
// PeerIdleTimeout at least: a use late in its epoch leaves one epoch less
// of idleness, so that one is not counted.
func (t *transport) idle(used uint32) bool {
	d := t.epoch - used
	return d > 0 && time.Duration(d-1)*sweepEvery >= PeerIdleTimeout
}

// maybeSweep sweeps once sweepEvery has passed (Recv calls it every
// time; the clock is read once in 64 idle calls and once in 1024 busy
// ones, so a ping-pong's agent pays for no clock read per message).
func (t *transport) maybeSweep(busy bool) {
	t.sweepCalls++
	if mask := uint32(63); busy && t.sweepCalls&1023 != 0 || !busy && t.sweepCalls&mask != 0 {
		return
	}
	now := time.Now().UnixNano()
	if now < t.sweepAt {
		return
	}
	t.sweepAt = now + sweepEvery.Nanoseconds()
	t.epoch++
	t.sweep(false)
	t.m.readDeviceCounters(now) // rqempty.go
}

// sweep evicts the idle entries, or with bound (the call of addPeer and
// addSource at MaxPeers) the least recently used entry of peers and of
// keys, each that is at the bound.
func (t *transport) sweep(bound bool) {
	// a datagram from a source keeps its address handle alive
	for _, s := range t.keys {
		if p := t.peers[s.addr]; p != nil && int32(s.used-p.used) > 0 {
			p.used = s.used
		}
	}
	if bound {
		if len(t.peers) >= MaxPeers {
			var oldest netip.AddrPort
			var op *udPeer
			for a, p := range t.peers {
				if !p.pinned && (op == nil || int32(p.used-op.used) < 0) {
					oldest, op = a, p
				}
			}
			if op != nil {
				t.evictPeer(oldest, op)
			}
		}
		if len(t.keys) >= MaxPeers {
			var oldest peerKey
			var os *srcName
			for k, s := range t.keys {
				if s.addr != t.connect && (os == nil || int32(s.used-os.used) < 0) {
					oldest, os = k, s
				}
			}
			if os != nil {
				delete(t.keys, oldest)
				t.m.SourcesEvicted.Add(1)
			}
		}
		return
	}
	for a, p := range t.peers {
		if !p.pinned && t.idle(p.used) {
			t.evictPeer(a, p)
		}
	}
	for k, s := range t.keys {
		if t.idle(s.used) && s.addr != t.connect && t.peers[s.addr] == nil {
			delete(t.keys, k)
			t.m.SourcesEvicted.Add(1)
		}
	}
}

// evictPeer forgets a's address handle and closes it.
func (t *transport) evictPeer(a netip.AddrPort, p *udPeer) {
	delete(t.peers, a)
	_ = p.Close()
	t.m.AddressHandles.Add(-1)
	t.m.PeersEvicted.Add(1)
}

// addPeer makes p a's address handle (counted in Media.AddressHandles),
// making room at MaxPeers first.
func (t *transport) addPeer(a netip.AddrPort, p *cm.UDPeer, pinned bool) *udPeer {
	if len(t.peers) >= MaxPeers {
		t.sweep(true)
	}
	e := &udPeer{UDPeer: p, used: t.epoch, pinned: pinned}
	t.peers[a] = e
	t.m.AddressHandles.Add(1)
	return e
}

// addSource names the sender k as a, making room at MaxPeers first.
func (t *transport) addSource(k peerKey, a netip.AddrPort) {
	if len(t.keys) >= MaxPeers {
		t.sweep(true)
	}
	t.keys[k] = &srcName{addr: a, used: t.epoch}
}
