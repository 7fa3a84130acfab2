package sys

import (
	"net/netip"
	"strconv"
)

// MsgBatch is batched datagram I/O on one UDP socket (a net.UDPConn's
// SyscallConn): recvmmsg(2) and sendmmsg(2) over preallocated mmsghdr,
// iovec and sockaddr arrays, non-blocking (MSG_DONTWAIT), so a duty cycle
// moves a batch of datagrams in one system call and allocates nothing (the
// C Aeron driver's aeron_udp_channel_transport_recvmmsg and
// aeron_udp_channel_transport_send). Off Linux it falls back to one
// recvfrom/sendto per datagram.
//
// Not safe for concurrent use: a transport keeps one MsgBatch for receiving
// and another for sending.
type MsgBatch struct {
	msgBatch
}

// Cap is the most datagrams one Recv or Send call moves.
func (b *MsgBatch) Cap() int { return b.cap }

// zoneString names an IPv6 scope by number (the net package accepts
// numeric zones), allocating only for scoped addresses.
func zoneString(id uint32) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(id), 10)
}

// zoneID is the inverse of zoneString; a named zone resolves through the
// net package's interface table (rare: link-local peers only).
func zoneID(a netip.Addr) uint32 {
	z := a.Zone()
	if z == "" {
		return 0
	}
	if n, err := strconv.ParseUint(z, 10, 32); err == nil {
		return uint32(n)
	}
	return ifIndexByName(z)
}
