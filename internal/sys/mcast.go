//go:build linux

package sys

import (
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// Multicast is the multicast configuration of one UDP socket, as Aeron's
// aeron_udp_channel_transport_init sets it. A plain value.
type Multicast struct {
	Group   netip.Addr // group to join on the interface (invalid: join nothing)
	IfAddr  netip.Addr // IPv4: interface address for the join and for sending (invalid or unspecified: the kernel's choice)
	IfIndex int        // IPv6: interface index for the join and for sending (0: the kernel's choice)
	TTL     int        // > 0: IP_MULTICAST_TTL / IPV6_MULTICAST_HOPS
}

// SetMulticast configures the socket behind rc (a net.UDPConn's
// SyscallConn): IP_MULTICAST_ALL off, so a socket bound to the wildcard
// address receives only the groups it joined itself (Aeron leaves it on
// and drops the frames of the other direction; ibgo's driver and a C
// driver on one host then do not see each other's control traffic on the
// data socket), the group membership, the outgoing interface and the TTL.
// Errors name the option. Safe to call from any goroutine.
func SetMulticast(rc syscall.RawConn, m Multicast) error {
	var err error
	cerr := rc.Control(func(fd uintptr) {
		s := int(fd)
		if m.Group.Is6() && !m.Group.Is4In6() {
			if err = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_ALL, 0); err != nil {
				err = fmt.Errorf("setsockopt IPV6_MULTICAST_ALL: %w", err)
				return
			}
			mreq := &unix.IPv6Mreq{Multiaddr: m.Group.As16(), Interface: uint32(m.IfIndex)}
			if err = unix.SetsockoptIPv6Mreq(s, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, mreq); err != nil {
				err = fmt.Errorf("setsockopt IPV6_JOIN_GROUP %s if %d: %w", m.Group, m.IfIndex, err)
				return
			}
			if err = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, m.IfIndex); err != nil {
				err = fmt.Errorf("setsockopt IPV6_MULTICAST_IF %d: %w", m.IfIndex, err)
				return
			}
			if m.TTL > 0 {
				if err = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, m.TTL); err != nil {
					err = fmt.Errorf("setsockopt IPV6_MULTICAST_HOPS %d: %w", m.TTL, err)
				}
			}
			return
		}
		var ifa [4]byte
		if m.IfAddr.Is4() || m.IfAddr.Is4In6() {
			ifa = m.IfAddr.Unmap().As4()
		}
		if err = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0); err != nil {
			err = fmt.Errorf("setsockopt IP_MULTICAST_ALL: %w", err)
			return
		}
		if m.Group.IsValid() {
			mreq := &unix.IPMreq{Multiaddr: m.Group.Unmap().As4(), Interface: ifa}
			if err = unix.SetsockoptIPMreq(s, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq); err != nil {
				err = fmt.Errorf("setsockopt IP_ADD_MEMBERSHIP %s on %s: %w", m.Group, netip.AddrFrom4(ifa), err)
				return
			}
		}
		if err = unix.SetsockoptInet4Addr(s, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, ifa); err != nil {
			err = fmt.Errorf("setsockopt IP_MULTICAST_IF %s: %w", netip.AddrFrom4(ifa), err)
			return
		}
		if m.TTL > 0 {
			if err = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, m.TTL); err != nil {
				err = fmt.Errorf("setsockopt IP_MULTICAST_TTL %d: %w", m.TTL, err)
			}
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}
