//go:build linux

package sys

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr (<sys/socket.h>): a msghdr and the byte count
// the kernel fills in. x/sys/unix has no such type.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [unsafe.Sizeof(uintptr(0)) - 4]byte
}

type msgBatch struct {
	rc    syscall.RawConn
	cap   int
	v6    bool // the socket is AF_INET6 (Go opens wildcard binds dual-stack)
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	addrs []unix.RawSockaddrInet6 // large enough for either family
	// arguments and results of the Control callbacks, which are method
	// values made once so that a call allocates nothing
	vlen, off      int
	done           int
	errno          syscall.Errno
	recvFn, sendFn func(uintptr)
	// ctrl holds each datagram's control messages once EnableTimestamps
	// asked for receive timestamps (nil otherwise)
	ctrl []byte
}

// ctrlLen is the control buffer of one datagram: room for the
// SCM_TIMESTAMPNS message and more.
const ctrlLen = 128

// EnableTimestamps has the kernel stamp every datagram the socket
// receives (SO_TIMESTAMPNS, and SO_TIMESTAMPING with
// SOF_TIMESTAMPING_RX_HARDWARE, as aeron_udp_channel_transport_setup_media_rcv_timestamps
// sets); Timestamp reads the stamp.
func (b *MsgBatch) EnableTimestamps() error {
	var err error
	cerr := b.rc.Control(func(fd uintptr) {
		if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			err = fmt.Errorf("setsockopt(SO_TIMESTAMPNS): %w", errnoErr(err))
			return
		}
		if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING, unix.SOF_TIMESTAMPING_RX_HARDWARE); err != nil {
			err = fmt.Errorf("setsockopt(SO_TIMESTAMPING): %w", errnoErr(err))
		}
	})
	if cerr != nil {
		return cerr
	}
	if err != nil {
		return err
	}
	b.ctrl = make([]byte, b.cap*ctrlLen)
	return nil
}

// Timestamp is the time the kernel received datagram i, in ns since the
// epoch (SCM_TIMESTAMPNS), or 0 without one.
func (b *MsgBatch) Timestamp(i int) int64 {
	if b.ctrl == nil {
		return 0
	}
	n := int(b.hdrs[i].hdr.Controllen)
	c := b.ctrl[i*ctrlLen : i*ctrlLen+min(n, ctrlLen)]
	for len(c) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(c) {
			return 0
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && l == unix.CmsgLen(int(unsafe.Sizeof(unix.Timespec{}))) {
			ts := (*unix.Timespec)(unsafe.Pointer(&c[unix.CmsgLen(0)]))
			return ts.Sec*1e9 + ts.Nsec
		}
		next := unix.CmsgSpace(l - unix.CmsgLen(0))
		if next > len(c) {
			return 0
		}
		c = c[next:]
	}
	return 0
}

// NewMsgBatch prepares batched I/O of up to n datagrams per call on the
// socket behind rc.
func NewMsgBatch(rc syscall.RawConn, n int) (*MsgBatch, error) {
	if n <= 0 {
		return nil, fmt.Errorf("msg batch: size %d, want > 0", n)
	}
	b := &MsgBatch{msgBatch{rc: rc, cap: n, hdrs: make([]mmsghdr, n), iovs: make([]unix.Iovec, n),
		addrs: make([]unix.RawSockaddrInet6, n)}}
	var err error
	cerr := rc.Control(func(fd uintptr) {
		var sa unix.Sockaddr
		if sa, err = unix.Getsockname(int(fd)); err != nil {
			err = fmt.Errorf("getsockname: %w", errnoErr(err))
			return
		}
		_, b.v6 = sa.(*unix.SockaddrInet6)
	})
	if cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	for i := range b.hdrs {
		b.hdrs[i].hdr.Iov = &b.iovs[i]
		b.hdrs[i].hdr.SetIovlen(1)
	}
	b.recvFn, b.sendFn = b.doRecv, b.doSend
	return b, nil
}

// Recv receives up to min(len(bufs), Cap) datagrams, one into each of
// bufs, without blocking: 0 and no error when none is waiting. Len and
// From describe datagram i until the next call. A datagram longer than its
// buffer is truncated, as recvmmsg does.
func (b *MsgBatch) Recv(bufs [][]byte) (int, error) {
	n := min(len(bufs), b.cap)
	if n == 0 {
		return 0, nil
	}
	for i := range n {
		h := &b.hdrs[i]
		if len(bufs[i]) == 0 {
			return 0, fmt.Errorf("recvmmsg: buffer %d is empty", i)
		}
		b.iovs[i].Base = &bufs[i][0]
		b.iovs[i].SetLen(len(bufs[i]))
		h.hdr.Name = (*byte)(unsafe.Pointer(&b.addrs[i]))
		h.hdr.Namelen = unix.SizeofSockaddrInet6
		h.hdr.Flags = 0
		h.len = 0
		if b.ctrl != nil {
			h.hdr.Control = &b.ctrl[i*ctrlLen]
			h.hdr.SetControllen(ctrlLen)
		}
	}
	b.vlen = n
	if err := b.rc.Control(b.recvFn); err != nil {
		return 0, err
	}
	switch b.errno {
	case 0:
		return b.done, nil
	case unix.EAGAIN:
		return 0, nil
	}
	return 0, fmt.Errorf("recvmmsg: %w", NewErrno(b.errno))
}

func (b *MsgBatch) doRecv(fd uintptr) {
	for {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), uintptr(b.vlen), unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EINTR {
			continue
		}
		b.done, b.errno = int(r), e
		return
	}
}

// Len is the length of received datagram i.
func (b *MsgBatch) Len(i int) int { return int(b.hdrs[i].len) }

// From is the sender of received datagram i (an IPv4 peer of a dual-stack
// socket reads as a v4-mapped address, as net.UDPConn reports it).
func (b *MsgBatch) From(i int) netip.AddrPort {
	sa := &b.addrs[i]
	switch sa.Family {
	case unix.AF_INET:
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), ntohs(s4.Port))
	case unix.AF_INET6:
		a := netip.AddrFrom16(sa.Addr)
		if sa.Scope_id != 0 {
			a = a.WithZone(zoneString(sa.Scope_id))
		}
		return netip.AddrPortFrom(a, ntohs(sa.Port))
	}
	return netip.AddrPort{}
}

// Send sends each of datagrams (up to Cap) to dest without blocking and
// returns how many the kernel took: fewer, with no error, when the socket
// buffer is full (EAGAIN: a short send for the caller to retry later).
// An error names the datagram that failed.
func (b *MsgBatch) Send(dest netip.AddrPort, datagrams [][]byte) (int, error) {
	n := min(len(datagrams), b.cap)
	if n == 0 {
		return 0, nil
	}
	nameLen, err := b.putAddr(dest)
	if err != nil {
		return 0, err
	}
	name := (*byte)(unsafe.Pointer(&b.addrs[0]))
	for i := range n {
		h := &b.hdrs[i]
		if d := datagrams[i]; len(d) > 0 {
			b.iovs[i].Base = &d[0]
		} else {
			b.iovs[i].Base = nil
		}
		b.iovs[i].SetLen(len(datagrams[i]))
		h.hdr.Name = name
		h.hdr.Namelen = nameLen
		h.hdr.Flags = 0
		h.len = 0
	}
	sent := 0
	for sent < n {
		b.vlen, b.off = n-sent, sent
		if err := b.rc.Control(b.sendFn); err != nil {
			return sent, err
		}
		switch b.errno {
		case 0:
			sent += b.done
			continue
		case unix.EAGAIN:
			return sent, nil
		}
		return sent, fmt.Errorf("sendmmsg to %s (datagram %d of %d, %d bytes): %w",
			dest, sent+1, n, len(datagrams[sent]), NewErrno(b.errno))
	}
	return sent, nil
}

func (b *MsgBatch) doSend(fd uintptr) {
	for {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[b.off])), uintptr(b.vlen), unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EINTR {
			continue
		}
		b.done, b.errno = int(r), e
		if e != 0 {
			b.done = 0
		}
		return
	}
}

// putAddr writes dest as the socket's family expects into addrs[0].
func (b *MsgBatch) putAddr(dest netip.AddrPort) (uint32, error) {
	a := dest.Addr()
	if !a.IsValid() {
		return 0, fmt.Errorf("sendmmsg: no destination address")
	}
	if b.v6 {
		sa := &b.addrs[0]
		*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: htons(dest.Port()), Addr: a.As16(), Scope_id: zoneID(a)}
		return unix.SizeofSockaddrInet6, nil
	}
	a = a.Unmap()
	if !a.Is4() {
		return 0, fmt.Errorf("sendmmsg: IPv6 destination %s on an IPv4 socket", dest)
	}
	s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&b.addrs[0]))
	*s4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Port: htons(dest.Port()), Addr: a.As4()}
	return unix.SizeofSockaddrInet4, nil
}

// htons/ntohs: sockaddr ports are in network byte order in memory.
func htons(p uint16) uint16 {
	var b [2]byte
	b[0], b[1] = byte(p>>8), byte(p)
	return *(*uint16)(unsafe.Pointer(&b))
}

func ntohs(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}

func ifIndexByName(name string) uint32 {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0
	}
	return uint32(ifi.Index)
}
