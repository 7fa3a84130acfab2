package udp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/sys"
)

// joinGroup joins group on the channel's interface and sets the outgoing
// interface and TTL (aeron_udp_channel_transport_init's multicast branch).
func joinGroup(conn *net.UDPConn, ch *uri.ChannelURI, group netip.Addr, ttl int) error {
	ifAddr, ifIndex, err := multicastInterface(ch, group.Is6() && !group.Is4In6())
	if err != nil {
		return err
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("udp: multicast %s: %w", group, err)
	}
	if err := sys.SetMulticast(rc, sys.Multicast{Group: group, IfAddr: ifAddr, IfIndex: ifIndex, TTL: ttl}); err != nil {
		return fmt.Errorf("udp: multicast %s on interface %s: %w", group, ifAddr, err)
	}
	return nil
}

// multicastInterface resolves the channel's interface=addr[/prefix] to the
// local address and interface index to use (aeron_find_interface: the
// interface holding an address in addr/prefix; without a prefix, the one
// holding addr itself). Without the key the kernel chooses (INADDR_ANY,
// index 0), as the C driver's default 0.0.0.0 does.
func multicastInterface(ch *uri.ChannelURI, v6 bool) (netip.Addr, int, error) {
	s, ok := ch.Get(uri.KeyInterface)
	if !ok {
		if v6 {
			return netip.IPv6Unspecified(), 0, nil
		}
		return netip.IPv4Unspecified(), 0, nil
	}
	in, err := uri.ParseInterface(s)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("udp: interface=%s: %v", s, err)
	}
	want := in.IP
	if !want.IsValid() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", in.Host)
		if err != nil || len(addrs) == 0 {
			return netip.Addr{}, 0, fmt.Errorf("udp: interface=%s: cannot resolve %q: %v", s, in.Host, err)
		}
		want = addrs[0].Unmap()
		for _, a := range addrs {
			if a.Unmap().Is4() != v6 {
				want = a.Unmap()
				break
			}
		}
	}
	want = want.Unmap()
	bits := want.BitLen()
	if in.PrefixLen >= 0 {
		bits = in.PrefixLen
	}
	prefix, err := want.Prefix(bits)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("udp: interface=%s: %v", s, err)
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("udp: interface=%s: listing interfaces: %w", s, err)
	}
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() == want.Is4() && prefix.Contains(ip) {
				return ip, ifi.Index, nil
			}
		}
	}
	return netip.Addr{}, 0, fmt.Errorf("udp: interface=%s: no local interface has an address in %s", s, prefix)
}
