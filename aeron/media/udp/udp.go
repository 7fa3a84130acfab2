// Package udp is the UDP binding of the media driver's media seam
// (driver.Media): unicast and multicast endpoints over the Go net package,
// plus the test loss generator of Aeron's debug bindings.
package udp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
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
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(bind))
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
	mtu := max(p.MTU, 64<<10) // a peer may send with a larger MTU than ours
	t := &transport{m: m, conn: conn, connect: connect, rcvbuf: p.SocketRcvbuf,
		full: make(chan *datagram, queueDepth), free: make(chan *datagram, queueDepth), done: make(chan struct{})}
	for range queueDepth {
		t.free <- &datagram{buf: make([]byte, mtu)}
	}
	if m.loss.Enabled() {
		seq := m.n.Add(1)
		t.rng = rand.New(rand.NewPCG(m.loss.Seed, seq))
		t.orng = rand.New(rand.NewPCG(m.loss.Seed^0x5bd1e995, seq))
		if m.loss.SendReorderRate > 0 {
			t.sendHeld = make([]byte, 0, mtu)
		}
	}
	go t.readLoop()
	return t, nil
}

const queueDepth = 256

type datagram struct {
	buf  []byte
	n    int
	from netip.AddrPort
}

// transport is one socket. A reader goroutine blocks in the kernel and
// hands datagrams to the owning agent through a ring of preallocated
// buffers, because the net package offers no non-blocking read: Recv never
// blocks and nothing allocates per datagram.
type transport struct {
	m       *Media
	conn    *net.UDPConn
	connect netip.AddrPort
	rcvbuf  int
	full    chan *datagram
	free    chan *datagram
	done    chan struct{}
	once    sync.Once
	rng     *rand.Rand // loss generator, used by the owning agent only
	rrng    *rand.Rand
	rmu     sync.Mutex
	orng    *rand.Rand // receive reorder/duplicate, used by readLoop only
	// send side reordering: one datagram held back, sent after the next
	sendHeld     []byte
	sendHeldTo   netip.AddrPort
	sendHeldLive bool
}

func (t *transport) readLoop() {
	var held *datagram // receive reordering: delivered after the next datagram
	for {
		var d *datagram
		select {
		case d = <-t.free:
		case <-t.done:
			return
		}
		n, from, err := t.conn.ReadFromUDPAddrPort(d.buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			t.free <- d
			continue
		}
		if t.dropOnReceive(d.buf[:n]) {
			t.free <- d
			continue
		}
		d.n, d.from = n, from
		if t.orng != nil && isData(d.buf[:n]) {
			l := &t.m.loss
			if l.ReceiveDuplicateRate > 0 && t.orng.Float64() < l.ReceiveDuplicateRate {
				select {
				case dup := <-t.free:
					dup.n, dup.from = copy(dup.buf, d.buf[:n]), from
					t.full <- dup
					t.m.Duplicated.Add(1)
				default: // no buffer free: no duplicate this time
				}
			}
			if held == nil && l.ReceiveReorderRate > 0 && t.orng.Float64() < l.ReceiveReorderRate {
				held = d
				t.m.Reordered.Add(1)
				continue
			}
		}
		t.full <- d
		if held != nil {
			t.full <- held
			held = nil
		}
	}
}

// isData: the loss generator drops DATA datagrams only (not heartbeats or
// control), as Aeron's data loss generators do.
func isData(b []byte) bool {
	return len(b) >= protocol.DataHeaderLength && b[4] == 0 &&
		protocol.FrameType(int16(uint16(b[6])|uint16(b[7])<<8)) == protocol.TypeData &&
		int32(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24) > 0
}

func (t *transport) dropOnReceive(b []byte) bool {
	if t.m.loss.ReceiveRate <= 0 || !isData(b) {
		return false
	}
	t.rmu.Lock()
	if t.rrng == nil {
		t.rrng = rand.New(rand.NewPCG(t.m.loss.Seed^0x9e3779b97f4a7c15, t.m.n.Load()))
	}
	drop := t.rrng.Float64() < t.m.loss.ReceiveRate
	t.rmu.Unlock()
	if drop {
		t.m.Dropped.Add(1)
	}
	return drop
}

func (t *transport) Send(dest netip.AddrPort, datagrams [][]byte) (int, error) {
	if !dest.IsValid() {
		dest = t.connect
	}
	for i, d := range datagrams {
		if t.rng != nil && isData(d) {
			l := &t.m.loss
			if l.SendRate > 0 && t.rng.Float64() < l.SendRate {
				t.m.Dropped.Add(1)
				continue
			}
			if l.SendDuplicateRate > 0 && t.rng.Float64() < l.SendDuplicateRate {
				if _, err := t.conn.WriteToUDPAddrPort(d, dest); err == nil {
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
		if _, err := t.conn.WriteToUDPAddrPort(d, dest); err != nil {
			return i, fmt.Errorf("udp: send to %s: %w", dest, err)
		}
		if t.sendHeldLive {
			t.sendHeldLive = false
			_, _ = t.conn.WriteToUDPAddrPort(t.sendHeld, t.sendHeldTo)
		}
	}
	return len(datagrams), nil
}

func (t *transport) Recv(maxN int, fn driver.RecvFunc) (int, error) {
	n := 0
	for n < maxN {
		select {
		case d := <-t.full:
			fn(t, d.buf[:d.n], d.from, 0)
			t.free <- d
			n++
		default:
			return n, nil
		}
	}
	return n, nil
}

func (t *transport) Reconnect(dest netip.AddrPort) error { t.connect = dest; return nil }

func (t *transport) SocketRcvbuf() (int, error) { return t.rcvbuf, nil }

func (t *transport) LocalAddr() string { return t.conn.LocalAddr().String() }

func (t *transport) Binding() string { return "udp" }

func (t *transport) Close() error {
	var err error
	t.once.Do(func() {
		close(t.done)
		err = t.conn.Close()
	})
	return err
}
