package perftest

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"
)

// errPeerGone ends a loop that waits on the peer (a spin on memory the peer
// writes, a receive CQ) when the peer's process is gone: its kernel closed
// the out-of-band TCP connection. perftest spins forever there.
var errPeerGone = errors.New(" The peer closed the out-of-band connection during the test (it exited or was killed); stopping")

// watchdog checks the control connection for a hang-up without reading
// from it (the exchange after the test still needs its bytes).
type watchdog struct {
	fd    int
	spins uint32
	next  int64
	pfd   [1]unix.PollFd
}

const (
	watchEvery    = 1 << 12 // spins between clock reads
	watchInterval = 100e6   // ns between polls
)

func (e *engine) startWatchdog() {
	e.wd.fd = -1
	tc, ok := e.oob.c.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) { e.wd.fd = int(fd) })
}

// peerGone is cheap enough for every spin: a counter in the caller's loop
// (it inlines), a clock read every 4096 spins, a poll at most every 100 ms.
func (e *engine) peerGone() bool {
	e.wd.spins++
	if e.wd.spins%watchEvery != 0 {
		return false
	}
	return e.peerGoneCheck()
}

func (e *engine) peerGoneCheck() bool {
	w := &e.wd
	if w.fd < 0 {
		return false
	}
	now := e.now()
	if now < w.next {
		return false
	}
	w.next = now + watchInterval
	w.pfd[0] = unix.PollFd{Fd: int32(w.fd), Events: unix.POLLRDHUP}
	n, err := unix.Poll(w.pfd[:], 0)
	return err == nil && n > 0 && w.pfd[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
}
