// Package udp is the UDP binding of the media driver's media seam
// (driver.Media): unicast and multicast endpoints (sockets from the Go net
// package, datagrams moved in batches by recvmmsg/sendmmsg through
// internal/sys), plus the test loss generator of Aeron's debug bindings.
package udp

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/sys"
)

// Loss configures the loss generator: DATA datagrams are dropped at a set
// rate on receive and/or send, deterministically for a seed. Aeron's Java
// debug driver has the same knobs (aeron.debug.receive.data.loss.rate …);
// ibgo reads them from AERON_DEBUG_RECEIVE_DATA_LOSS_RATE,
// AERON_DEBUG_SEND_DATA_LOSS_RATE and AERON_DEBUG_DATA_LOSS_SEED.
//
// Aeron's debug bindings and the C driver's loss interceptors (loss,
// fixed-loss, multi-gap-loss) only drop; ibgo also reorders and duplicates
// DATA datagrams, with its own variables IBGO_DEBUG_{RECEIVE,SEND}_DATA_REORDER_RATE
// and IBGO_DEBUG_{RECEIVE,SEND}_DATA_DUPLICATE_RATE. A reordered datagram
// is held back and delivered (or sent) right after the next datagram of any
// kind; a duplicated one is delivered (sent) twice. A plain value.
type Loss struct {
	ReceiveRate, SendRate float64 // 0..1
	Seed                  uint64

	ReceiveReorderRate, ReceiveDuplicateRate float64 // 0..1, ibgo only
	SendReorderRate, SendDuplicateRate       float64 // 0..1, ibgo only
}

// Enabled reports whether any loss, reordering or duplication is configured.
func (l Loss) Enabled() bool {
	return l.ReceiveRate > 0 || l.SendRate > 0 || l.ReceiveReorderRate > 0 || l.ReceiveDuplicateRate > 0 ||
		l.SendReorderRate > 0 || l.SendDuplicateRate > 0
}

// LossFromEnv reads the loss generator settings (getenv: os.Getenv when nil).
func LossFromEnv(getenv func(string) string) (Loss, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var l Loss
	rate := func(name string, dst *float64) error {
		if v := getenv(name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 1 {
				return fmt.Errorf("%s=%q: want a rate in [0, 1]", name, v)
			}
			*dst = f
		}
		return nil
	}
	if err := rate("AERON_DEBUG_RECEIVE_DATA_LOSS_RATE", &l.ReceiveRate); err != nil {
		return l, err
	}
	if err := rate("AERON_DEBUG_SEND_DATA_LOSS_RATE", &l.SendRate); err != nil {
		return l, err
	}
	for name, dst := range map[string]*float64{
		"IBGO_DEBUG_RECEIVE_DATA_REORDER_RATE": &l.ReceiveReorderRate, "IBGO_DEBUG_RECEIVE_DATA_DUPLICATE_RATE": &l.ReceiveDuplicateRate,
		"IBGO_DEBUG_SEND_DATA_REORDER_RATE": &l.SendReorderRate, "IBGO_DEBUG_SEND_DATA_DUPLICATE_RATE": &l.SendDuplicateRate,
	} {
		if err := rate(name, dst); err != nil {
			return l, err
		}
	}
	if v := getenv("AERON_DEBUG_DATA_LOSS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			return l, fmt.Errorf("AERON_DEBUG_DATA_LOSS_SEED=%q: %v", v, err)
		}
		l.Seed = s
	}
	return l, nil
}

// Media is the udp medium. Safe for concurrent use.
type Media struct {
	loss Loss
	n    atomic.Uint64 // transports opened, to vary the loss stream per transport
	// Dropped, Reordered and Duplicated count what the loss generator did.
	Dropped, Reordered, Duplicated atomic.Int64
}

// New returns the udp medium with the given loss generator (zero: none).
func New(loss Loss) *Media { return &Media{loss: loss} }

// Name is "udp".
func (m *Media) Name() string { return string(uri.MediaUDP) }

// ChannelKeys implements driver.ChannelKeyDeclarer: aeron:udp gives the
// kernel's receive time of each datagram (SO_TIMESTAMPNS) for
// media-rcv-ts-offset.
func (m *Media) ChannelKeys() []string { return []string{uri.KeyMediaRcvTimestampOffset} }

// Open binds a UDP socket to bind (port 0: ephemeral). A multicast bind
// address is a group: the socket binds the wildcard address on its port
// (address reuse on, so several subscribers and drivers on one host share
// it), joins the group on the channel's interface and sends through that
// interface with the channel's TTL, as aeron_udp_channel_transport_init
// does. A sender binds the control group (data group + 1) and sends to the
// data group (connect); a receiver binds the data group.
func (m *Media) Open(ch *uri.ChannelURI, bind, connect netip.AddrPort, p driver.TransportParams, aff driver.Affinity) (driver.Transport, error) {
	if connect.Addr().IsMulticast() && !bind.Addr().IsMulticast() {
		return nil, fmt.Errorf("udp: multicast destination %s needs a multicast control address to bind, not %s", connect, bind)
	}
	// an IPv4 bind (0.0.0.0 included) is an AF_INET socket, as C's: its
	// snd-/rcv-local-sockaddr reads 0.0.0.0:port, not Go's dual-stack [::]
	network := "udp"
	if bind.Addr().Unmap().Is4() {
		network = "udp4"
	}
	conn, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(bind))
	if err != nil {
		return nil, fmt.Errorf("udp: bind %s: %w", bind, err)
	}
	if bind.Addr().IsMulticast() {
		if err := joinGroup(conn, ch, bind.Addr(), p.MulticastTTL); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	if p.SocketRcvbuf > 0 {
		_ = conn.SetReadBuffer(p.SocketRcvbuf)
	}
	if p.SocketSndbuf > 0 {
		_ = conn.SetWriteBuffer(p.SocketSndbuf)
	}
	t, err := newTransport(m, conn, connect, p)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return t, nil
}

// recvBatch is the most datagrams one recvmmsg reads: the receiver's poll
// per duty cycle (a Recv asking for more loops); sendBatch is the most one
// sendmmsg writes, the sender's datagrams per duty.
const (
	recvBatch = 32
	sendBatch = 16
)

// transport is one socket, read and written by the owning agent directly
// with non-blocking recvmmsg/sendmmsg (aeron_udp_channel_transport_recvmmsg
// and _send): no reader goroutine, no queue, and nothing allocates per
// datagram. The receive buffers take the largest UDP payload, since a peer
// may send with a larger MTU than ours.
type transport struct {
	m       *Media
	conn    *net.UDPConn
	connect netip.AddrPort
	local   string
	rcvbuf  int
	rb, sb  *sys.MsgBatch
	rbufs   [][]byte
	one     [][]byte   // a one-datagram batch for the loss generator's path
	rng     *rand.Rand // send loss generator
	rrng    *rand.Rand // receive loss generator
	orng    *rand.Rand // receive reorder/duplicate
	// receive side reordering: one datagram held back, delivered after the next
	recvHeld     []byte
	recvHeldFrom netip.AddrPort
	recvHeldLive bool
	// send side reordering: one datagram held back, sent after the next
	sendHeld     []byte
	sendHeldTo   netip.AddrPort
	sendHeldLive bool
	closed       atomic.Bool
}

func newTransport(m *Media, conn *net.UDPConn, connect netip.AddrPort, p driver.TransportParams) (*transport, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("udp: %s: %w", conn.LocalAddr(), err)
	}
	rb, err := sys.NewMsgBatch(rc, recvBatch)
	if err != nil {
		return nil, fmt.Errorf("udp: %s: %w", conn.LocalAddr(), err)
	}
	sb, err := sys.NewMsgBatch(rc, sendBatch)
	if err != nil {
		return nil, fmt.Errorf("udp: %s: %w", conn.LocalAddr(), err)
	}
	if p.MediaTimestamps {
		// media-rcv-ts-offset: the kernel's receive time of each datagram
		if err := rb.EnableTimestamps(); err != nil {
			return nil, fmt.Errorf("udp: %s: media-rcv-ts-offset: %w", conn.LocalAddr(), err)
		}
	}
	const maxPayload = 65535 - 8 - 20 // the largest IPv4 UDP payload; bigger is truncated
	bufLen := max(p.MTU, maxPayload)
	t := &transport{m: m, conn: conn, connect: connect, local: conn.LocalAddr().String(), rcvbuf: p.SocketRcvbuf,
		rb: rb, sb: sb, rbufs: make([][]byte, recvBatch), one: make([][]byte, 1)}
	for i := range t.rbufs {
		t.rbufs[i] = make([]byte, bufLen)
	}
	if l := m.loss; l.Enabled() {
		seq := m.n.Add(1)
		t.rng = rand.New(rand.NewPCG(l.Seed, seq))
		t.rrng = rand.New(rand.NewPCG(l.Seed^0x9e3779b97f4a7c15, seq))
		t.orng = rand.New(rand.NewPCG(l.Seed^0x5bd1e995, seq))
		if l.SendReorderRate > 0 {
			t.sendHeld = make([]byte, 0, bufLen)
		}
		if l.ReceiveReorderRate > 0 {
			t.recvHeld = make([]byte, 0, bufLen)
		}
	}
	return t, nil
}

// isData: the loss generator drops DATA datagrams only (not heartbeats or
// control), as Aeron's data loss generators do.
func isData(b []byte) bool {
	return len(b) >= protocol.DataHeaderLength && b[4] == 0 &&
		protocol.FrameType(int16(uint16(b[6])|uint16(b[7])<<8)) == protocol.TypeData &&
		int32(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24) > 0
}

// Send sends datagrams to dest (the connected peer when invalid), up to
// sendBatch per sendmmsg. A full socket buffer ends it early without an
// error: the count is then a short send for the sender to retry.
func (t *transport) Send(dest netip.AddrPort, datagrams [][]byte) (int, error) {
	if !dest.IsValid() {
		dest = t.connect
	}
	if t.rng != nil {
		return t.sendWithLoss(dest, datagrams)
	}
	sent := 0
	for sent < len(datagrams) {
		chunk := datagrams[sent:min(len(datagrams), sent+sendBatch)]
		n, err := t.sb.Send(dest, chunk)
		sent += n
		if err != nil {
			return sent, fmt.Errorf("udp: send from %s: %w", t.local, err)
		}
		if n < len(chunk) {
			break
		}
	}
	return sent, nil
}

func (t *transport) sendOne(dest netip.AddrPort, d []byte) (int, error) {
	t.one[0] = d
	n, err := t.sb.Send(dest, t.one)
	t.one[0] = nil
	if err != nil {
		return n, fmt.Errorf("udp: send from %s: %w", t.local, err)
	}
	return n, nil
}

// sendWithLoss is Send through the loss generator, one datagram at a time.
func (t *transport) sendWithLoss(dest netip.AddrPort, datagrams [][]byte) (int, error) {
	for i, d := range datagrams {
		if isData(d) {
			l := &t.m.loss
			if l.SendRate > 0 && t.rng.Float64() < l.SendRate {
				t.m.Dropped.Add(1)
				continue
			}
			if l.SendDuplicateRate > 0 && t.rng.Float64() < l.SendDuplicateRate {
				if n, err := t.sendOne(dest, d); err == nil && n == 1 {
					t.m.Duplicated.Add(1)
				}
			}
			if !t.sendHeldLive && l.SendReorderRate > 0 && len(d) <= cap(t.sendHeld) && t.rng.Float64() < l.SendReorderRate {
				t.sendHeld = append(t.sendHeld[:0], d...)
				t.sendHeldTo, t.sendHeldLive = dest, true
				t.m.Reordered.Add(1)
				continue
			}
		}
		if n, err := t.sendOne(dest, d); err != nil || n == 0 {
			return i, err
		}
		if t.sendHeldLive {
			t.sendHeldLive = false
			_, _ = t.sendOne(t.sendHeldTo, t.sendHeld)
		}
	}
	return len(datagrams), nil
}

// Recv reads up to maxN datagrams with recvmmsg, recvBatch at a time, and
// hands each to fn; it never blocks.
func (t *transport) Recv(maxN int, fn driver.RecvFunc) (int, error) {
	total := 0
	for total < maxN {
		want := min(maxN-total, recvBatch)
		k, err := t.rb.Recv(t.rbufs[:want])
		if err != nil {
			return total, fmt.Errorf("udp: receive on %s: %w", t.local, err)
		}
		for i := range k {
			b, from := t.rbufs[i][:t.rb.Len(i)], t.rb.From(i)
			if t.orng != nil {
				t.deliverWithLoss(fn, b, from)
			} else {
				fn(t, b, from, t.rb.Timestamp(i))
			}
		}
		total += k
		if k < want {
			break
		}
	}
	return total, nil
}

// deliverWithLoss is the receive side of the loss generator: drop,
// duplicate, or hold back until the next datagram (reorder).
func (t *transport) deliverWithLoss(fn driver.RecvFunc, b []byte, from netip.AddrPort) {
	l := &t.m.loss
	if isData(b) {
		if l.ReceiveRate > 0 && t.rrng.Float64() < l.ReceiveRate {
			t.m.Dropped.Add(1)
			return
		}
		if l.ReceiveDuplicateRate > 0 && t.orng.Float64() < l.ReceiveDuplicateRate {
			fn(t, b, from, 0)
			t.m.Duplicated.Add(1)
		}
		if !t.recvHeldLive && l.ReceiveReorderRate > 0 && len(b) <= cap(t.recvHeld) && t.orng.Float64() < l.ReceiveReorderRate {
			t.recvHeld = append(t.recvHeld[:0], b...)
			t.recvHeldFrom, t.recvHeldLive = from, true
			t.m.Reordered.Add(1)
			return
		}
	}
	fn(t, b, from, 0)
	if t.recvHeldLive {
		t.recvHeldLive = false
		fn(t, t.recvHeld, t.recvHeldFrom, 0)
	}
}

func (t *transport) Reconnect(dest netip.AddrPort) error { t.connect = dest; return nil }

func (t *transport) SocketRcvbuf() (int, error) { return t.rcvbuf, nil }

func (t *transport) LocalAddr() string { return t.local }

func (t *transport) Binding() string { return "udp" }

// Close closes the socket; a second Close does nothing.
func (t *transport) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	return t.conn.Close()
}
