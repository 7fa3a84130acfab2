package uverbs

import (
	"encoding/binary"
	"fmt"

	"github.com/ibgo/ibgo/internal/sys"
)

// GRHLen is the size of the area a UD receive buffer reserves in front of
// the payload for the global route header.
const GRHLen = 40

// GRH is what the 40-byte header area of a UD receive says about where the
// datagram came from. On RoCE v2 over IPv4 the area holds 20 unused bytes
// and then the IPv4 header; over IPv6 (and on InfiniBand) it holds the
// IPv6/IB GRH itself.
type GRH struct {
	Version      int // 4 (RoCE v2 over IPv4) or 6 (IPv6 / IB GRH)
	SGID         GID // the sender's address (IPv4-mapped for version 4)
	DGID         GID // the address the datagram was sent to
	TrafficClass uint8
	FlowLabel    uint32
	HopLimit     uint8 // hop limit, or the IPv4 TTL
	NextHeader   uint8 // IPv6 next header: 17 (UDP) for RoCE v2, 0x1b for IB; 17 for version 4
}

// ibNextHeader is the GRH next-header value of native InfiniBand (rdma-core's IB_NEXT_HDR).
const ibNextHeader = 0x1b

// ipprotoUDP is the next-header value of RoCE v2.
const ipprotoUDP = 17

// ParseGRH decodes the header area of a UD receive (the first GRHLen bytes
// of the buffer when the completion has WCWithGRH). It tells IPv4 from IPv6
// the way libibverbs does (verbs.c: get_grh_header_version): an IPv6 version
// nibble is believed unless bytes 20..39 form an IPv4 header with a valid
// checksum.
func ParseGRH(b []byte) (GRH, error) {
	if len(b) < GRHLen {
		return GRH{}, fmt.Errorf("uverbs: GRH area is %d bytes, want %d", len(b), GRHLen)
	}
	ip4 := b[20:40]
	v6 := b[0]>>4 == 6
	v4 := ip4[0]>>4 == 4
	if v6 && v4 {
		// Both nibbles fit: an IPv4 header must be 20 bytes long and carry a
		// correct checksum to win.
		v4 = ip4[0]&0xf == 5 && ipv4Checksum(ip4) == 0
	}
	switch {
	case v4:
		var g GRH
		g.Version = 4
		g.TrafficClass = ip4[1]
		g.HopLimit = ip4[8]
		g.NextHeader = ip4[9]
		g.SGID = mappedIPv4(ip4[12:16])
		g.DGID = mappedIPv4(ip4[16:20])
		return g, nil
	case v6:
		var g GRH
		g.Version = 6
		vtf := binary.BigEndian.Uint32(b[0:4])
		g.TrafficClass = uint8(vtf >> 20)
		g.FlowLabel = vtf & 0xfffff
		g.NextHeader = b[6]
		g.HopLimit = b[7]
		copy(g.SGID[:], b[8:24])
		copy(g.DGID[:], b[24:40])
		return g, nil
	}
	return GRH{}, fmt.Errorf("uverbs: GRH area holds neither an IPv6/IB header (version nibble %d) nor an IPv4 header (version nibble %d): %w",
		b[0]>>4, ip4[0]>>4, sys.NewErrno(sys.EPROTONOSUPPORT))
}

// ipv4Checksum returns the one's-complement sum over a 20-byte header; 0
// means the header's checksum field is right.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func mappedIPv4(a []byte) GID {
	var g GID
	g[10], g[11] = 0xff, 0xff
	copy(g[12:], a)
	return g
}

// AHAttrFromWC builds the address vector that answers a received UD
// datagram: back to its sender, from the local GID it was sent to. grh is the
// header area of the receive buffer (ignored unless wc has WCWithGRH). It
// mirrors rdma-core libibverbs/verbs.c: ibv_init_ah_from_wc (the local GID
// index is looked up in the GID table, RoCE v2 for IPv4 and UDP, IB for an IB
// GRH), so the AH of a reply to a RoCE v2/IPv4 sender is {global, dgid
// ::ffff:<source IP>, hop limit = the TTL, traffic class = the TOS}.
func (c *Context) AHAttrFromWC(port uint8, wc *WC, grh []byte) (AHAttr, error) {
	a := AHAttr{DLID: wc.SLID, SL: wc.SL, SrcPathBits: wc.DLIDPathBits, Port: port}
	if wc.Flags&WCWithGRH == 0 {
		return a, nil
	}
	g, err := ParseGRH(grh)
	if err != nil {
		return AHAttr{}, &Error{Op: "ah from wc", Device: c.dev.Name, Err: err}
	}
	if g.DGID[0] == 0xff || g.Version == 4 && g.DGID[12]&0xf0 == 0xe0 {
		return AHAttr{}, &Error{Op: "ah from wc", Device: c.dev.Name,
			Err: fmt.Errorf("%w: the datagram was sent to multicast group %s; a reply needs the sender's unicast address",
				sys.NewErrno(sys.EINVAL), g.DGID)}
	}
	typ := GIDTypeRoCEv2
	switch {
	case g.Version == 4 || g.NextHeader == ipprotoUDP:
	case g.NextHeader == ibNextHeader:
		typ = GIDTypeIB
	default:
		return AHAttr{}, &Error{Op: "ah from wc", Device: c.dev.Name,
			Err: fmt.Errorf("%w: GRH next header %#x is neither UDP (RoCE v2) nor IB", ErrNotSupported, g.NextHeader)}
	}
	idx, err := c.gidIndex(port, g.DGID, typ)
	if err != nil {
		return AHAttr{}, err
	}
	a.IsGlobal = true
	a.GRH = GlobalRoute{DGID: g.SGID, SGIDIndex: idx, HopLimit: g.HopLimit, TrafficClass: g.TrafficClass}
	if g.Version == 6 {
		a.GRH.FlowLabel = g.FlowLabel
	}
	return a, nil
}

// gidIndex finds gid of type typ on port (libibverbs ibv_find_gid_index).
func (c *Context) gidIndex(port uint8, gid GID, typ GIDType) (uint8, error) {
	gids, err := c.QueryGIDTable()
	if err != nil {
		return 0, err
	}
	for _, e := range gids {
		if e.Port == uint32(port) && e.Type == typ && e.GID == gid {
			return uint8(e.Index), nil
		}
	}
	return 0, &Error{Op: "find gid", Device: c.dev.Name,
		Err: fmt.Errorf("%w: no %s GID %s on port %d", ErrNoDevice, typ, gid, port)}
}
