//go:build linux

package sys

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// PeerHungUp reports whether the peer of a connected stream socket has
// closed its side (or the connection failed), without reading from the
// socket: data still queued for the reader stays queued. rc comes from the
// connection's SyscallConn (net.TCPConn). It is a poll(2) with a zero
// timeout for POLLRDHUP, so it never blocks. An error means the socket
// itself is unusable (for example closed by its owner).
//
// Safe to call from any goroutine; it takes the fd only for the call.
func PeerHungUp(rc syscall.RawConn) (bool, error) {
	var (
		pfd  [1]unix.PollFd
		n    int
		perr error
	)
	err := rc.Control(func(fd uintptr) {
		pfd[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLRDHUP}
		for {
			n, perr = unix.Poll(pfd[:], 0)
			if perr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return false, err
	}
	if perr != nil {
		return false, perr
	}
	return n > 0 && pfd[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0, nil
}
