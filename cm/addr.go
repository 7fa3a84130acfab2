package cm

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/ibgo/ibgo/internal/abi"
)

// Addr is an rdma_cm socket address: an IP address and port (AF_INET or
// AF_INET6; an IPv6 zone names the scope id), or an InfiniBand address
// (AF_IB) when IB is set. The zero Addr is "no address".
//
// Addr is a plain value, safe to copy and share.
type Addr struct {
	IP netip.AddrPort
	IB *IBAddr
	// v6: the kernel gave this IPv4-mapped address as AF_INET6, and it
	// goes back so (a dual-stack id keeps its family)
	v6 bool
}

// IBAddr is struct sockaddr_ib (rdma/ib.h): a GID and a service id, which on
// the ucma ABI is be64(port space << 16 | port) for ids of the IP port spaces.
type IBAddr struct {
	PKey     uint16
	FlowInfo uint32
	GID      [16]byte
	SID      uint64
	SIDMask  uint64
	ScopeID  uint64
}

// IPAddr returns the Addr of ap.
func IPAddr(ap netip.AddrPort) Addr { return Addr{IP: ap} }

// ParseAddr parses "10.0.0.1:7174", "[fe80::1%eth0]:7174" or a bare IP
// (port 0) into an Addr.
func ParseAddr(s string) (Addr, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return Addr{IP: ap}, nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return Addr{}, fmt.Errorf("cm: address %q: want ip, ip:port or [ipv6]:port", s)
	}
	return Addr{IP: netip.AddrPortFrom(ip, 0)}, nil
}

// IsZero reports whether a is the zero Addr.
func (a Addr) IsZero() bool { return a.IB == nil && !a.IP.IsValid() }

// Port is the IP port, or the low 16 bits of an AF_IB service id.
func (a Addr) Port() uint16 {
	if a.IB != nil {
		return uint16(a.IB.SID)
	}
	return a.IP.Port()
}

func (a Addr) String() string {
	if a.IB != nil {
		return fmt.Sprintf("ib[%s]:sid=%#x", net.IP(a.IB.GID[:]).String(), a.IB.SID)
	}
	if !a.IP.IsValid() {
		return "<none>"
	}
	return a.IP.String()
}

// Service ids of the IP port spaces as the kernel forms them (cma.c:
// cma_get_service_id), e.g. PS_TCP port 7471 is 0x0000000001061D2F.
func serviceID(ps PortSpace, port uint16) uint64 { return uint64(ps)<<16 | uint64(port) }

// putSockaddr writes a into dst (a 128-byte __kernel_sockaddr_storage) and
// returns the exact size the kernel wants (16, 28 or 48), or 0 for the zero
// Addr. IPv4-mapped IPv6 addresses are written as AF_INET, as Go's net does,
// unless the kernel gave them as AF_INET6 (parseSockaddr).
func putSockaddr(dst []byte, a Addr) (int, error) {
	clear(dst[:abi.SOCKADDR_STORAGE_SIZE])
	switch {
	case a.IB != nil:
		binary.LittleEndian.PutUint16(dst[0:], abi.AF_IB)
		binary.BigEndian.PutUint16(dst[2:], a.IB.PKey)
		binary.BigEndian.PutUint32(dst[4:], a.IB.FlowInfo)
		copy(dst[8:24], a.IB.GID[:])
		binary.BigEndian.PutUint64(dst[24:], a.IB.SID)
		binary.BigEndian.PutUint64(dst[32:], a.IB.SIDMask)
		binary.LittleEndian.PutUint64(dst[40:], a.IB.ScopeID)
		return abi.SOCKADDR_IB_SIZE, nil
	case !a.IP.IsValid():
		return 0, nil
	}
	ip := a.IP.Addr()
	if ip.Is4In6() && ip.Zone() == "" && !a.v6 {
		ip = ip.Unmap()
	}
	if ip.Is4() {
		binary.LittleEndian.PutUint16(dst[0:], abi.AF_INET)
		binary.BigEndian.PutUint16(dst[2:], a.IP.Port())
		b := ip.As4()
		copy(dst[4:8], b[:])
		return abi.SOCKADDR_IN_SIZE, nil
	}
	binary.LittleEndian.PutUint16(dst[0:], abi.AF_INET6)
	binary.BigEndian.PutUint16(dst[2:], a.IP.Port())
	b := ip.As16()
	copy(dst[8:24], b[:])
	if z := ip.Zone(); z != "" {
		idx, err := zoneIndex(z)
		if err != nil {
			return 0, err
		}
		binary.LittleEndian.PutUint32(dst[24:], idx)
	}
	return abi.SOCKADDR_IN6_SIZE, nil
}

func zoneIndex(z string) (uint32, error) {
	if n, err := strconv.ParseUint(z, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifi, err := net.InterfaceByName(z)
	if err != nil {
		return 0, fmt.Errorf("cm: IPv6 zone %q: %w", z, err)
	}
	return uint32(ifi.Index), nil
}

// parseSockaddr decodes a kernel sockaddr of size bytes (0: none). It never
// panics: a short buffer or an unknown family is an error that says which.
func parseSockaddr(b []byte, size int) (Addr, error) {
	if size == 0 {
		return Addr{}, nil
	}
	if size < 2 || size > len(b) {
		return Addr{}, fmt.Errorf("cm: sockaddr of %d bytes in a %d-byte buffer", size, len(b))
	}
	fam := binary.LittleEndian.Uint16(b)
	want := map[uint16]int{abi.AF_INET: abi.SOCKADDR_IN_SIZE, abi.AF_INET6: abi.SOCKADDR_IN6_SIZE, abi.AF_IB: abi.SOCKADDR_IB_SIZE}[fam]
	if want == 0 {
		return Addr{}, fmt.Errorf("cm: sockaddr family %d is not AF_INET, AF_INET6 or AF_IB", fam)
	}
	if size < want {
		return Addr{}, fmt.Errorf("cm: sockaddr family %d needs %d bytes, got %d", fam, want, size)
	}
	port := binary.BigEndian.Uint16(b[2:])
	switch fam {
	case abi.AF_INET:
		return Addr{IP: netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)}, nil
	case abi.AF_INET6:
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		if sc := binary.LittleEndian.Uint32(b[24:]); sc != 0 {
			ip = ip.WithZone(strconv.FormatUint(uint64(sc), 10))
		}
		return Addr{IP: netip.AddrPortFrom(ip, port), v6: ip.Is4In6()}, nil
	}
	ib := &IBAddr{
		PKey:     binary.BigEndian.Uint16(b[2:]),
		FlowInfo: binary.BigEndian.Uint32(b[4:]),
		GID:      [16]byte(b[8:24]),
		SID:      binary.BigEndian.Uint64(b[24:]),
		SIDMask:  binary.BigEndian.Uint64(b[32:]),
		ScopeID:  binary.LittleEndian.Uint64(b[40:]),
	}
	return Addr{IB: ib}, nil
}
