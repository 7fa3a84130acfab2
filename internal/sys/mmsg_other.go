//go:build !linux

package sys

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Off Linux: one recvfrom/sendto per datagram through the same interface
// (these allocate a sockaddr per call; the allocation-free batch is Linux
// only).
type msgBatch struct {
	rc    syscall.RawConn
	cap   int
	lens  []int
	froms []netip.AddrPort
}

// NewMsgBatch prepares datagram I/O of up to n datagrams per call.
func NewMsgBatch(rc syscall.RawConn, n int) (*MsgBatch, error) {
	if n <= 0 {
		return nil, fmt.Errorf("msg batch: size %d, want > 0", n)
	}
	return &MsgBatch{msgBatch{rc: rc, cap: n, lens: make([]int, n), froms: make([]netip.AddrPort, n)}}, nil
}

// Recv receives up to min(len(bufs), Cap) datagrams without blocking.
func (b *MsgBatch) Recv(bufs [][]byte) (int, error) {
	n := min(len(bufs), b.cap)
	got := 0
	var rerr error
	cerr := b.rc.Control(func(fd uintptr) {
		for got < n {
			r, from, err := syscall.Recvfrom(int(fd), bufs[got], syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				if err != syscall.EAGAIN {
					rerr = fmt.Errorf("recvfrom: %w", err)
				}
				return
			}
			b.lens[got], b.froms[got] = r, fromSockaddr(from)
			got++
		}
	})
	if cerr != nil {
		return 0, cerr
	}
	if got > 0 {
		return got, nil
	}
	return 0, rerr
}

// EnableTimestamps: receive timestamps are Linux only.
func (b *MsgBatch) EnableTimestamps() error {
	return fmt.Errorf("receive timestamps are not supported on this platform")
}

// Timestamp is 0: no receive timestamps off Linux.
func (b *MsgBatch) Timestamp(int) int64 { return 0 }

// Len is the length of received datagram i.
func (b *MsgBatch) Len(i int) int { return b.lens[i] }

// From is the sender of received datagram i.
func (b *MsgBatch) From(i int) netip.AddrPort { return b.froms[i] }

// Send sends each of datagrams (up to Cap) to dest without blocking; a
// full socket buffer ends it early with no error (a short send).
func (b *MsgBatch) Send(dest netip.AddrPort, datagrams [][]byte) (int, error) {
	n := min(len(datagrams), b.cap)
	sent := 0
	var serr error
	cerr := b.rc.Control(func(fd uintptr) {
		sa, v6 := syscall.Sockaddr(nil), false
		if s, err := syscall.Getsockname(int(fd)); err == nil {
			_, v6 = s.(*syscall.SockaddrInet6)
		}
		a := dest.Addr()
		if v6 {
			sa = &syscall.SockaddrInet6{Port: int(dest.Port()), Addr: a.As16(), ZoneId: zoneID(a)}
		} else if a = a.Unmap(); a.Is4() {
			sa = &syscall.SockaddrInet4{Port: int(dest.Port()), Addr: a.As4()}
		} else {
			serr = fmt.Errorf("sendto: IPv6 destination %s on an IPv4 socket", dest)
			return
		}
		for sent < n {
			err := syscall.Sendto(int(fd), datagrams[sent], syscall.MSG_DONTWAIT, sa)
			if err == syscall.EINTR {
				continue
			}
			if err == syscall.EAGAIN {
				return
			}
			if err != nil {
				serr = fmt.Errorf("sendto %s (datagram %d of %d): %w", dest, sent+1, n, err)
				return
			}
			sent++
		}
	})
	if cerr != nil {
		return sent, cerr
	}
	return sent, serr
}

func fromSockaddr(sa syscall.Sockaddr) netip.AddrPort {
	switch s := sa.(type) {
	case *syscall.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port))
	case *syscall.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(s.Addr).WithZone(zoneString(s.ZoneId)), uint16(s.Port))
	}
	return netip.AddrPort{}
}

func ifIndexByName(name string) uint32 {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0
	}
	return uint32(ifi.Index)
}
