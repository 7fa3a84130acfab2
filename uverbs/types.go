package uverbs

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// GUID is a 64-bit globally unique identifier in network byte order, as the
// kernel reports node and system-image GUIDs.
type GUID [8]byte

// String formats the GUID as ibv_devinfo does: xxxx:xxxx:xxxx:xxxx.
func (g GUID) String() string {
	v := binary.BigEndian.Uint64(g[:])
	return fmt.Sprintf("%04x:%04x:%04x:%04x", v>>48&0xffff, v>>32&0xffff, v>>16&0xffff, v&0xffff)
}

// Hex formats the GUID as ibv_devices does: 16 hex digits.
func (g GUID) Hex() string { return fmt.Sprintf("%016x", binary.BigEndian.Uint64(g[:])) }

// Uint64 returns the GUID as a host-order number.
func (g GUID) Uint64() uint64 { return binary.BigEndian.Uint64(g[:]) }

// GUIDFromUint64 builds a GUID from a host-order number.
func GUIDFromUint64(v uint64) GUID {
	var g GUID
	binary.BigEndian.PutUint64(g[:], v)
	return g
}

// ParseGUID parses the sysfs form xxxx:xxxx:xxxx:xxxx.
func ParseGUID(s string) (GUID, error) {
	h := strings.ReplaceAll(strings.TrimSpace(s), ":", "")
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil || len(h) != 16 {
		return GUID{}, fmt.Errorf("malformed GUID %q", s)
	}
	return GUIDFromUint64(v), nil
}

// GID is a 128-bit port address (for RoCE, an IPv6 or IPv4-mapped address).
type GID [16]byte

// IsZero reports whether the GID is all zeros (an empty table slot).
func (g GID) IsZero() bool { return g == GID{} }

// IP returns the GID as an IP address.
func (g GID) IP() net.IP { return net.IP(g[:]) }

// String formats the GID as glibc's inet_ntop(AF_INET6) does, which is what
// ibv_devinfo prints: the longest run of two or more zero groups becomes
// "::", and IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d)
// addresses end in dotted quad.
func (g GID) String() string {
	var w [8]uint16
	for i := range w {
		w[i] = binary.BigEndian.Uint16(g[2*i:])
	}
	best, bestLen := -1, 0
	for i := 0; i < 8; {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && w[j] == 0 {
			j++
		}
		if j-i > bestLen {
			best, bestLen = i, j-i
		}
		i = j
	}
	if bestLen < 2 {
		best = -1
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if best >= 0 && i >= best && i < best+bestLen {
			if i == best {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && best == 0 && (bestLen == 6 || bestLen == 5 && w[5] == 0xffff) {
			fmt.Fprintf(&b, "%d.%d.%d.%d", g[12], g[13], g[14], g[15])
			break
		}
		fmt.Fprintf(&b, "%x", w[i])
	}
	if best >= 0 && best+bestLen == 8 {
		b.WriteByte(':')
	}
	return b.String()
}

// Raw formats the GID as eight colon-separated groups of four hex digits
// (the sysfs and ibv_devinfo RoCE v1/IB form).
func (g GID) Raw() string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

// ParseGID parses either the sysfs form or any IPv6/IPv4 text form.
func ParseGID(s string) (GID, error) {
	s = strings.TrimSpace(s)
	var g GID
	if parts := strings.Split(s, ":"); len(parts) == 8 && !strings.Contains(s, "::") {
		ok := true
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 16, 16)
			if err != nil || len(p) != 4 {
				ok = false
				break
			}
			binary.BigEndian.PutUint16(g[2*i:], uint16(v))
		}
		if ok {
			return g, nil
		}
	}
	ip := net.ParseIP(s)
	if ip == nil {
		return GID{}, fmt.Errorf("malformed GID %q", s)
	}
	copy(g[:], ip.To16())
	return g, nil
}

// NodeType is the kind of RDMA node (enum ibv_node_type).
type NodeType int

const (
	NodeUnknown     NodeType = -1
	NodeCA          NodeType = 1
	NodeSwitch      NodeType = 2
	NodeRouter      NodeType = 3
	NodeRNIC        NodeType = 4
	NodeUSNIC       NodeType = 5
	NodeUSNICUDP    NodeType = 6
	NodeUnspecified NodeType = 7
)

// Transport is the verbs transport (enum ibv_transport_type).
type Transport int

const (
	TransportUnknown     Transport = -1
	TransportIB          Transport = 0
	TransportIWARP       Transport = 1
	TransportUSNIC       Transport = 2
	TransportUSNICUDP    Transport = 3
	TransportUnspecified Transport = 4
)

// Transport maps a node type to its transport the way libibverbs does.
func (n NodeType) Transport() Transport {
	switch n {
	case NodeCA, NodeSwitch, NodeRouter:
		return TransportIB
	case NodeRNIC:
		return TransportIWARP
	case NodeUSNIC:
		return TransportUSNIC
	case NodeUSNICUDP:
		return TransportUSNICUDP
	case NodeUnspecified:
		return TransportUnspecified
	}
	return TransportUnknown
}

func (t Transport) String() string {
	switch t {
	case TransportIB:
		return "InfiniBand"
	case TransportIWARP:
		return "iWARP"
	case TransportUSNIC:
		return "usNIC"
	case TransportUSNICUDP:
		return "usNIC UDP"
	case TransportUnspecified:
		return "unspecified"
	}
	return "invalid transport"
}

// GIDType is a GID table entry's type (enum ib_uverbs_gid_type).
type GIDType uint32

const (
	GIDTypeIB     GIDType = 0
	GIDTypeRoCEv1 GIDType = 1
	GIDTypeRoCEv2 GIDType = 2
)

func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return "GIDType(" + strconv.Itoa(int(t)) + ")"
}

// PortState is a port's logical state (enum ibv_port_state).
type PortState uint8

const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

func (s PortState) String() string {
	switch s {
	case PortDown:
		return "PORT_DOWN"
	case PortInit:
		return "PORT_INIT"
	case PortArmed:
		return "PORT_ARMED"
	case PortActive:
		return "PORT_ACTIVE"
	}
	return "invalid state"
}

// MTU is a path MTU enum value (enum ibv_mtu: 1..5 = 256..4096 bytes).
type MTU uint8

const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes returns the enum for 256..4096, or 0.
func MTUFromBytes(n int) MTU {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m
		}
	}
	return 0
}

func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return strconv.Itoa(b)
	}
	return "invalid MTU"
}

// LinkLayer is a port's link layer (IBV_LINK_LAYER_*).
type LinkLayer uint8

const (
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2
)

func (l LinkLayer) String() string {
	switch l {
	case LinkLayerUnspecified:
		return "Unspecified"
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// AtomicCap is the device's atomic operation support (enum ibv_atomic_cap).
type AtomicCap uint32

const (
	AtomicNone AtomicCap = 0
	AtomicHCA  AtomicCap = 1
	AtomicGlob AtomicCap = 2
)

func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE"
	case AtomicHCA:
		return "ATOMIC_HCA"
	case AtomicGlob:
		return "ATOMIC_GLOB"
	}
	return "invalid atomic capability"
}
