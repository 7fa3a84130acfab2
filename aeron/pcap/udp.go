package pcap

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
)

// Datagram is a UDP datagram taken from a packet.
type Datagram struct {
	Src, Dst netip.AddrPort
	// Payload is the UDP payload; it aliases the packet data unless the
	// datagram was reassembled from IP fragments.
	Payload []byte
	// Fragments is the number of IP fragments it was reassembled from (0
	// when it was not fragmented).
	Fragments int
}

// Kind says what a packet held.
type Kind int

// Packet kinds returned by Decoder.Datagram.
const (
	KindUDP      Kind = iota + 1 // a whole UDP datagram
	KindFragment                 // an IP fragment kept for reassembly
	KindOther                    // not UDP over IP (ARP, TCP, ICMP …)
)

const (
	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86DD
	etherTypeVLAN  = 0x8100
	etherTypeQinQ  = 0x88A8
	etherTypeVLAN2 = 0x9100
	protoUDP       = 17
	maxVLANTags    = 4
	// maxPendingFragments bounds reassembly state so that a capture full of
	// unmatched fragments cannot grow memory without limit.
	maxPendingFragments = 256
	maxIPDatagram       = 65535 + 8
)

type fragKey struct {
	src, dst netip.Addr
	id       uint32
	proto    uint8
}

type fragment struct {
	off  int
	data []byte
}

type fragState struct {
	frags  []fragment
	total  int // payload length, known once the last fragment arrived; -1 before
	size   int
	number int // packet number of the first fragment seen
}

// Decoder extracts UDP datagrams from packets and reassembles IP fragments.
// The zero value is ready to use.
type Decoder struct {
	pending map[fragKey]*fragState
	order   []fragKey
}

func malformed(p *Packet, format string, args ...any) error {
	return &Error{Packet: p.Number, Offset: p.Offset, Reason: fmt.Sprintf(format, args...)}
}

// Datagram decodes the link, IP and UDP headers of p. A malformed or
// truncated header is an error; a packet that is not UDP is KindOther.
func (d *Decoder) Datagram(p *Packet) (Datagram, Kind, error) {
	b := p.Data
	var ipv byte
	switch p.LinkType {
	case LinkTypeEthernet:
		if len(b) < 14 {
			return Datagram{}, 0, malformed(p, "Ethernet header needs 14 bytes, captured %d", len(b))
		}
		et := binary.BigEndian.Uint16(b[12:])
		b = b[14:]
		for i := 0; et == etherTypeVLAN || et == etherTypeQinQ || et == etherTypeVLAN2; i++ {
			if i == maxVLANTags || len(b) < 4 {
				return Datagram{}, 0, malformed(p, "VLAN tags cut short or nested deeper than %d", maxVLANTags)
			}
			et = binary.BigEndian.Uint16(b[2:])
			b = b[4:]
		}
		switch et {
		case etherTypeIPv4:
			ipv = 4
		case etherTypeIPv6:
			ipv = 6
		default:
			return Datagram{}, KindOther, nil
		}
	case LinkTypeNull, LinkTypeLoop:
		if len(b) < 4 {
			return Datagram{}, 0, malformed(p, "loopback header needs 4 bytes, captured %d", len(b))
		}
		b = b[4:]
	case LinkTypeRaw, LinkTypeIPv4, LinkTypeIPv6, 12, 14:
		// 12 and 14 are DLT_RAW on some BSDs.
	case LinkTypeLinuxSLL:
		if len(b) < 16 {
			return Datagram{}, 0, malformed(p, "Linux cooked header needs 16 bytes, captured %d", len(b))
		}
		switch binary.BigEndian.Uint16(b[14:]) {
		case etherTypeIPv4, etherTypeIPv6:
		default:
			return Datagram{}, KindOther, nil
		}
		b = b[16:]
	case LinkTypeLinuxSLL2:
		if len(b) < 20 {
			return Datagram{}, 0, malformed(p, "Linux cooked v2 header needs 20 bytes, captured %d", len(b))
		}
		switch binary.BigEndian.Uint16(b[0:]) {
		case etherTypeIPv4, etherTypeIPv6:
		default:
			return Datagram{}, KindOther, nil
		}
		b = b[20:]
	default:
		return Datagram{}, 0, malformed(p, "link type %d is not supported (Ethernet, Linux cooked, loopback and raw IP are)", p.LinkType)
	}
	if len(b) == 0 {
		return Datagram{}, 0, malformed(p, "no IP header")
	}
	v := b[0] >> 4
	if ipv != 0 && v != ipv {
		return Datagram{}, 0, malformed(p, "link layer says IPv%d, IP header says version %d", ipv, v)
	}
	switch v {
	case 4:
		return d.ipv4(p, b)
	case 6:
		return d.ipv6(p, b)
	}
	if p.LinkType == LinkTypeEthernet {
		return Datagram{}, 0, malformed(p, "IP version %d", v)
	}
	return Datagram{}, KindOther, nil
}

func (d *Decoder) ipv4(p *Packet, b []byte) (Datagram, Kind, error) {
	if len(b) < 20 {
		return Datagram{}, 0, malformed(p, "IPv4 header needs 20 bytes, captured %d", len(b))
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	if ihl < 20 || ihl > len(b) {
		return Datagram{}, 0, malformed(p, "IPv4 header length %d is invalid for %d captured bytes", ihl, len(b))
	}
	if total == 0 { // segmentation offload: the capture knows the length
		total = len(b)
	}
	if total < ihl {
		return Datagram{}, 0, malformed(p, "IPv4 total length %d is less than the header length %d", total, ihl)
	}
	if total > len(b) {
		return Datagram{}, 0, malformed(p, "IPv4 total length %d exceeds the %d bytes captured (snaplen too small?)", total, len(b))
	}
	proto := b[9]
	src := netip.AddrFrom4([4]byte(b[12:16]))
	dst := netip.AddrFrom4([4]byte(b[16:20]))
	flags := binary.BigEndian.Uint16(b[6:])
	payload := b[ihl:total] // drops Ethernet padding
	if proto != protoUDP {
		return Datagram{}, KindOther, nil
	}
	more := flags&0x2000 != 0
	off := int(flags&0x1fff) * 8
	if more || off != 0 {
		key := fragKey{src: src, dst: dst, id: uint32(binary.BigEndian.Uint16(b[4:])), proto: proto}
		return d.fragment(p, key, off, more, payload)
	}
	return udp(p, src, dst, payload, 0)
}

func (d *Decoder) ipv6(p *Packet, b []byte) (Datagram, Kind, error) {
	if len(b) < 40 {
		return Datagram{}, 0, malformed(p, "IPv6 header needs 40 bytes, captured %d", len(b))
	}
	plen := int(binary.BigEndian.Uint16(b[4:]))
	if plen == 0 {
		plen = len(b) - 40
	}
	if 40+plen > len(b) {
		return Datagram{}, 0, malformed(p, "IPv6 payload length %d exceeds the %d bytes captured (snaplen too small?)", plen, len(b)-40)
	}
	src := netip.AddrFrom16([16]byte(b[8:24]))
	dst := netip.AddrFrom16([16]byte(b[24:40]))
	next := b[6]
	rest := b[40 : 40+plen]
	for {
		switch next {
		case protoUDP:
			return udp(p, src, dst, rest, 0)
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if len(rest) < 8 {
				return Datagram{}, 0, malformed(p, "IPv6 extension header %d cut short", next)
			}
			n := (int(rest[1]) + 1) * 8
			if n > len(rest) {
				return Datagram{}, 0, malformed(p, "IPv6 extension header %d of %d bytes exceeds the %d left", next, n, len(rest))
			}
			next, rest = rest[0], rest[n:]
		case 51: // authentication header
			if len(rest) < 8 {
				return Datagram{}, 0, malformed(p, "IPv6 authentication header cut short")
			}
			n := (int(rest[1]) + 2) * 4
			if n > len(rest) {
				return Datagram{}, 0, malformed(p, "IPv6 authentication header of %d bytes exceeds the %d left", n, len(rest))
			}
			next, rest = rest[0], rest[n:]
		case 44: // fragment
			if len(rest) < 8 {
				return Datagram{}, 0, malformed(p, "IPv6 fragment header cut short")
			}
			fo := binary.BigEndian.Uint16(rest[2:])
			key := fragKey{src: src, dst: dst, id: binary.BigEndian.Uint32(rest[4:]), proto: rest[0]}
			if key.proto != protoUDP && int(fo&0xfff8) == 0 {
				return Datagram{}, KindOther, nil
			}
			return d.fragment(p, key, int(fo&0xfff8), fo&1 != 0, rest[8:])
		default:
			return Datagram{}, KindOther, nil
		}
	}
}

// fragment stores one IP fragment; when the datagram is complete it returns
// the reassembled UDP datagram.
func (d *Decoder) fragment(p *Packet, key fragKey, off int, more bool, data []byte) (Datagram, Kind, error) {
	if off+len(data) > maxIPDatagram {
		return Datagram{}, 0, malformed(p, "IP fragment at offset %d with %d bytes exceeds the maximum datagram size", off, len(data))
	}
	if more && len(data)%8 != 0 {
		return Datagram{}, 0, malformed(p, "IP fragment of %d bytes that is not the last must be a multiple of 8", len(data))
	}
	if d.pending == nil {
		d.pending = make(map[fragKey]*fragState)
	}
	st := d.pending[key]
	if st == nil {
		if len(d.order) >= maxPendingFragments {
			oldest := d.order[0]
			d.order = d.order[1:]
			delete(d.pending, oldest)
		}
		st = &fragState{total: -1, number: p.Number}
		d.pending[key] = st
		d.order = append(d.order, key)
	}
	st.frags = append(st.frags, fragment{off: off, data: append([]byte(nil), data...)})
	st.size += len(data)
	if !more {
		st.total = off + len(data)
	}
	if st.total < 0 || st.size < st.total {
		return Datagram{}, KindFragment, nil
	}
	sort.Slice(st.frags, func(i, j int) bool { return st.frags[i].off < st.frags[j].off })
	buf := make([]byte, st.total)
	end := 0
	for _, f := range st.frags {
		if f.off > end {
			return Datagram{}, KindFragment, nil // a hole: wait for the missing fragment
		}
		copy(buf[f.off:], f.data[:min(len(f.data), len(buf)-f.off)])
		end = max(end, f.off+len(f.data))
	}
	if end < st.total {
		return Datagram{}, KindFragment, nil
	}
	n := len(st.frags)
	d.forget(key)
	if key.proto != protoUDP {
		return Datagram{}, KindOther, nil
	}
	return udp(p, key.src, key.dst, buf, n)
}

func (d *Decoder) forget(key fragKey) {
	delete(d.pending, key)
	for i, k := range d.order {
		if k == key {
			d.order = append(d.order[:i], d.order[i+1:]...)
			break
		}
	}
}

// Pending is the number of datagrams with fragments still missing.
func (d *Decoder) Pending() int { return len(d.pending) }

func udp(p *Packet, src, dst netip.Addr, b []byte, frags int) (Datagram, Kind, error) {
	if len(b) < 8 {
		return Datagram{}, 0, malformed(p, "UDP header needs 8 bytes, have %d", len(b))
	}
	n := int(binary.BigEndian.Uint16(b[4:]))
	if n == 0 && len(b) > 0xffff { // IPv6 jumbogram
		n = len(b)
	}
	if n < 8 {
		return Datagram{}, 0, malformed(p, "UDP length %d is less than its 8-byte header", n)
	}
	if n > len(b) {
		return Datagram{}, 0, malformed(p, "UDP length %d exceeds the %d bytes of the IP payload", n, len(b))
	}
	return Datagram{
		Src:       netip.AddrPortFrom(src.Unmap(), binary.BigEndian.Uint16(b[0:])),
		Dst:       netip.AddrPortFrom(dst.Unmap(), binary.BigEndian.Uint16(b[2:])),
		Payload:   b[8:n],
		Fragments: frags,
	}, KindUDP, nil
}
